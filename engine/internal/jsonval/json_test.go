package jsonval

import (
	"fmt"
	"math/big"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/zclconf/go-cty/cty"

	"github.com/lhengine/lhengine/engine/internal/bounds"
)

func TestJSONRoundTrip(t *testing.T) {
	t.Parallel()
	for _, in := range []string{
		`null`,
		`true`,
		`"text with \"quotes\", <html> & unicode ✓"`,
		`0`,
		`-1.5`,
		`12345678901234567890123456789012345678901234567890`,
		`-98765432109876543210.123456789012345678901`,
		`0.1`,
		`1e-7`,
		`[]`,
		`{}`,
		`[1,"two",null,[3],{"four":4}]`,
		`{"a":{"b":{"c":[1,2,{"d":null}]}},"big":9007199254740993,"z":false}`,
	} {
		t.Run(in, func(t *testing.T) {
			t.Parallel()
			v, err := FromJSON([]byte(in))
			require.NoError(t, err)
			out, err := ToJSON(v)
			require.NoError(t, err)
			require.JSONEq(t, in, string(out))

			again, err := FromJSON(out)
			require.NoError(t, err)
			require.True(t, v.RawEquals(again), "%#v != %#v", v, again)
		})
	}
}

func TestFromJSON(t *testing.T) {
	t.Parallel()
	v, err := FromJSON([]byte(" null\n"))
	require.NoError(t, err)
	require.True(t, v.RawEquals(cty.NullVal(cty.DynamicPseudoType)))

	v, err = FromJSON([]byte(`9007199254740993`))
	require.NoError(t, err)
	bi, _ := v.AsBigFloat().Int(nil)
	require.Equal(t, "9007199254740993", bi.String(), "integers beyond float64 keep every digit")

	v, err = FromJSON([]byte(`{"b":[1,"x"],"a":{"n":null}}`))
	require.NoError(t, err)
	require.True(t, v.Type().IsObjectType())
	require.True(t, v.GetAttr("b").Type().IsTupleType())
	require.True(t, v.GetAttr("a").GetAttr("n").IsNull())

	for _, bad := range []string{``, `{`, `[1,]`, `{"a":1} {"b":2}`, `nul`, `{"a":1,}`} {
		_, err := FromJSON([]byte(bad))
		require.Error(t, err, bad)
	}
}

func TestToJSON(t *testing.T) {
	t.Parallel()
	big := cty.MustParseNumberVal("123456789012345678901234567890")
	for _, tt := range []struct {
		in   cty.Value
		want string
	}{
		{cty.NullVal(cty.DynamicPseudoType), `null`},
		{cty.NullVal(cty.List(cty.String)), `null`},
		{cty.NumberIntVal(-42), `-42`},
		{big, `123456789012345678901234567890`},
		{cty.NumberFloatVal(0.25), `0.25`},
		{cty.StringVal("a<b>&c"), `"a<b>&c"`},
		{cty.ListVal([]cty.Value{cty.StringVal("x")}), `["x"]`},
		{cty.SetVal([]cty.Value{cty.NumberIntVal(2), cty.NumberIntVal(1)}), `[1,2]`},
		{cty.MapVal(map[string]cty.Value{"b": cty.True, "a": cty.False}), `{"a":false,"b":true}`},
		{cty.ObjectVal(map[string]cty.Value{"z": cty.NullVal(cty.DynamicPseudoType), "a": cty.EmptyObjectVal}), `{"a":{},"z":null}`},
	} {
		got, err := ToJSON(tt.in)
		require.NoError(t, err, tt.want)
		require.Equal(t, tt.want, string(got))
	}

	for _, bad := range []cty.Value{
		cty.DynamicVal,
		cty.UnknownVal(cty.String),
		cty.ObjectVal(map[string]cty.Value{"a": cty.UnknownVal(cty.Number)}),
		cty.PositiveInfinity,
		cty.StringVal("secret").Mark("sensitive"),
	} {
		_, err := ToJSON(bad)
		require.Error(t, err, "%#v", bad)
	}
}

// TestFromJSONDepth checks that JSON nested deeper than bounds.MaxJSONDepth is an
// error and not a crash (five million levels overflow the decoder's stack),
// and that brackets inside strings do not count.
func TestFromJSONDepth(t *testing.T) {
	t.Parallel()
	const n = 5_000_000
	_, err := FromJSON([]byte(strings.Repeat("[", n) + strings.Repeat("]", n)))
	require.ErrorContains(t, err, "nests more than 1000 levels deep")

	_, err = FromJSON([]byte(strings.Repeat(`{"a":`, bounds.MaxJSONDepth+1) + "1" + strings.Repeat("}", bounds.MaxJSONDepth+1)))
	require.Error(t, err)

	v, err := FromJSON([]byte(strings.Repeat("[", bounds.MaxJSONDepth) + `"[[[\"{{{"` + strings.Repeat("]", bounds.MaxJSONDepth)))
	require.NoError(t, err)
	require.True(t, v.Type().IsTupleType())
}

// TestToJSONSize checks that a value whose JSON would exceed bounds.MaxJSONBytes
// is refused before it is encoded: a thousand references to one 100KB
// string hold 100KB, but would encode to 100MB.
func TestToJSONSize(t *testing.T) {
	t.Parallel()
	s := cty.StringVal(strings.Repeat("x", 100_000))
	elems := make([]cty.Value, 1000)
	for i := range elems {
		elems[i] = s
	}
	_, err := ToJSON(cty.TupleVal(elems))
	require.ErrorContains(t, err, "more than 67108864 bytes of JSON")

	b, err := ToJSON(cty.TupleVal(elems[:10]))
	require.NoError(t, err)
	require.Len(t, b, 10*100_002+11)
}

// TestJSONNumberLimits checks that FromJSON refuses a number too large to
// write out as text in reasonable time (1e100000000 has a hundred million
// digits, and writing it took longer than ten minutes), that ToJSON refuses
// one however it was computed, and that what ToJSON writes FromJSON reads
// back, to the limits.
func TestJSONNumberLimits(t *testing.T) {
	t.Parallel()
	_, err := FromJSON([]byte(`{"a": [1e100000000]}`))
	require.ErrorContains(t, err, "holds a number")
	_, err = FromJSON([]byte(`"1e100000000"`))
	require.NoError(t, err)
	_, err = FromJSON([]byte("1" + strings.Repeat("0", bounds.MaxNumberExponent+1)))
	require.ErrorContains(t, err, "exponent beyond 10000")

	// What ToJSON writes, FromJSON reads back, to the limits.
	for _, text := range []string{"1e10000", "-9.99e9999", "1e-10000", "123456789012345678901234567890e9970"} {
		v, err := FromJSON([]byte(text))
		require.NoError(t, err, text)
		out, err := ToJSON(v)
		require.NoError(t, err, text)
		again, err := FromJSON(out)
		require.NoError(t, err, text)
		require.True(t, again.RawEquals(v), text)
	}

	huge := new(big.Float).SetMantExp(big.NewFloat(1), 400_000_000)
	_, err = ToJSON(cty.TupleVal([]cty.Value{cty.NumberVal(huge)}))
	require.ErrorContains(t, err, "too large to write out")
}

// TestFromJSONSkipsNumberSearch checks that FromJSON, which searches a
// decoded value for a number too large to write out only when the text
// of one may be (bounds.JSONProblem; the bound is TestNumberTextBound in
// bounds), refuses exactly the values that hold such a number, on both
// sides of the limit.
func TestFromJSONSkipsNumberSearch(t *testing.T) {
	t.Parallel()
	for _, n := range []int{9999, 10000, 10001} {
		for _, text := range []string{
			"1" + strings.Repeat("0", n), "-" + strings.Repeat("9", n), "0." + strings.Repeat("0", n) + "1",
			"1" + strings.Repeat("0", n/2) + "e" + fmt.Sprint(n/2), fmt.Sprintf("1e%d", n), fmt.Sprintf("-1e-%d", n),
		} {
			f, _, err := big.ParseFloat(text, 10, 512, big.ToNearestEven)
			require.NoError(t, err, "%.20s", text)
			_, err = FromJSON([]byte(`[1, 2.5, {"a": ` + text + `}]`))
			if bounds.NumberTooLarge(f) {
				require.ErrorContains(t, err, "exponent beyond 10000", "%.20s", text)
			} else {
				require.NoError(t, err, "%.20s", text)
			}
		}
	}
}
