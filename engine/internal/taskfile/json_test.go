package taskfile

import (
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/zclconf/go-cty/cty"
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
