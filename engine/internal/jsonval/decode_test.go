package jsonval

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"reflect"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/zclconf/go-cty/cty"
	ctyjson "github.com/zclconf/go-cty/cty/json"

	"github.com/lhengine/lhengine/engine/internal/bounds"
)

// fromJSONReference is FromJSON as it was before it decoded in one pass: a
// scan for the bounds, then go-cty's ImpliedType and Unmarshal (three
// passes through encoding/json's token decoder). FromJSON is held to its
// results.
func fromJSONReference(b []byte) (cty.Value, error) {
	problem, mayBeHuge := bounds.JSONProblem(b)
	if problem != "" {
		return cty.NilVal, fmt.Errorf("invalid JSON: it %s", problem)
	}
	if strings.TrimSpace(string(b)) == "null" {
		return cty.NullVal(cty.DynamicPseudoType), nil
	}
	ty, err := ctyjson.ImpliedType(b)
	if err != nil {
		return cty.NilVal, fmt.Errorf("invalid JSON: %w", err)
	}
	v, err := ctyjson.Unmarshal(b, ty)
	if err != nil {
		return cty.NilVal, fmt.Errorf("invalid JSON: %w", err)
	}
	if mayBeHuge && bounds.HoldsHugeNumber(v) {
		return cty.NilVal, fmt.Errorf("invalid JSON: it holds a number with an exponent beyond %d", bounds.MaxNumberExponent)
	}
	return v, nil
}

// normalisePanic is the panic of go-cty's ImpliedType on an object with two
// keys that NFC-normalise to the same text. FromJSON refuses such input, as
// it refuses every key not in NFC (which the reference does too, when it
// does not panic).
const normalisePanic = "multiple attributes that normalize to"

// referenceResult calls fromJSONReference, turning its panic on keys that
// normalise alike into panicked.
func referenceResult(b []byte) (v cty.Value, err error, panicked bool) {
	defer func() {
		if r := recover(); r != nil {
			if !strings.Contains(fmt.Sprint(r), normalisePanic) {
				panic(r)
			}
			panicked = true
		}
	}()
	v, err = fromJSONReference(b)
	return v, err, false
}

// requireSameAsReference checks that FromJSON and fromJSONReference agree
// on b: both refuse it, or both give the same value, of the same type, with
// numbers of the same precision, rounding mode, accuracy and digits, that
// ToJSON writes out alike. It returns FromJSON's value (cty.NilVal if
// refused).
func requireSameAsReference(t testing.TB, b []byte) cty.Value {
	t.Helper()
	want, wantErr, panicked := referenceResult(b)
	got, err := FromJSON(b)
	if panicked {
		if err == nil {
			t.Fatalf("%.300q: the reference panics on keys that normalise alike, but FromJSON gives %#v", b, got)
		}
		require.Contains(t, err.Error(), "normalization form C", "%.300q", b)
		return cty.NilVal
	}
	if (err != nil) != (wantErr != nil) {
		t.Fatalf("%.300q: FromJSON gives %#.300v, %v; the reference %#.300v, %v", b, got, err, want, wantErr)
	}
	if err != nil {
		require.True(t, strings.HasPrefix(err.Error(), "invalid JSON: "), "%.300q: %v", b, err)
		return cty.NilVal
	}
	requireSameValue(t, b, got, want)
	gotJSON, gotErr := ToJSON(got)
	wantJSON, wantErr := ToJSON(want)
	require.Equal(t, wantErr != nil, gotErr != nil, "%.300q", b)
	require.Equal(t, string(wantJSON), string(gotJSON), "%.300q", b)
	return got
}

// requireSameValue checks that got and want, decoded from doc, are the
// same value: RawEquals, of equal types, and with every number the same
// big.Float.
func requireSameValue(t testing.TB, doc []byte, got, want cty.Value) {
	t.Helper()
	if !got.Type().Equals(want.Type()) {
		t.Fatalf("%.200q: type %#v, want %#v", doc, got.Type(), want.Type())
	}
	if !got.RawEquals(want) {
		t.Fatalf("%.200q: %#v, want %#v", doc, got, want)
	}
	requireSameNumbers(t, doc, got, want, "")
}

// requireSameNumbers checks that the numbers in got and want, values of
// the same type, are the same big.Float: precision, rounding mode,
// accuracy, sign and digits.
func requireSameNumbers(t testing.TB, doc []byte, got, want cty.Value, path string) {
	t.Helper()
	if got.IsNull() {
		return
	}
	switch ty := got.Type(); {
	case ty == cty.Number:
		g, w := got.AsBigFloat(), want.AsBigFloat()
		if g.Prec() != w.Prec() || g.Mode() != w.Mode() || g.Acc() != w.Acc() || g.Signbit() != w.Signbit() ||
			g.Text('p', 0) != w.Text('p', 0) || g.Text('f', -1) != w.Text('f', -1) || !reflect.DeepEqual(g, w) {
			t.Fatalf("%.200q at %q: number %s (prec %d, mode %v, acc %v), want %s (prec %d, mode %v, acc %v)", doc, path,
				g.Text('p', 0), g.Prec(), g.Mode(), g.Acc(), w.Text('p', 0), w.Prec(), w.Mode(), w.Acc())
		}
	case ty.IsObjectType():
		for name := range ty.AttributeTypes() {
			requireSameNumbers(t, doc, got.GetAttr(name), want.GetAttr(name), path+"."+name)
		}
	case ty.IsTupleType():
		for i := range ty.TupleElementTypes() {
			k := cty.NumberIntVal(int64(i))
			requireSameNumbers(t, doc, got.Index(k), want.Index(k), path+"["+strconv.Itoa(i)+"]")
		}
	}
}

// jsonSeeds are inputs at the edges of JSON and of what FromJSON has
// always accepted; FuzzFromJSON starts from them.
func jsonSeeds() []string {
	deep := func(open, mid, close string, n int) string {
		return strings.Repeat(open, n) + mid + strings.Repeat(close, n)
	}
	var wide strings.Builder
	wide.WriteString("{")
	for i := range 100 {
		fmt.Fprintf(&wide, `"k%d":%d,`, i, i)
	}
	wide.WriteString(`"k7":"again"}`)
	return []string{
		// literals and space
		``, ` `, "\n", `null`, " \t\r\nnull\n", "\u00a0null\u2003", "\vnull\f", `null]`, `nul`, `nulll`, `NULL`,
		`true`, `false`, `true]`, `tru`, `truex`, `[true,false,null]`, " \t\r\n[ 1 , 2 ]\n", "\f1", "\u00a01", "\ufeff{}",
		// numbers
		`0`, `-0`, `-0.0`, `0.0`, `0e5`, `-0e-5`, `1`, `-1`, `01`, `-01`, `00`, `1.`, `.5`, `-.5`, `1.5`, `-2.5e-3`, `1e400`,
		`1E+2`, `1e-2`, `1e+`, `1e`, `1e+-2`, `-`, `--1`, `+1`, `0x10`, `1_000`, `NaN`, `Infinity`, `-Infinity`,
		`9007199254740993`, `999999999999999999`, `-999999999999999999`, `1000000000000000000`,
		`9223372036854775807`, `-9223372036854775808`, `9223372036854775808`, `18446744073709551616`,
		`12345678901234567890123456789012345678901234567890`, `0.1`, `0.30000000000000004`, `1023`, `1024`, `-1024`,
		`3.141592653589793238462643383279502884197169399375105820974944592307816406286208998628034825342117067982148086513282306647`,
		`1e10000`, `1e10001`, `1e-10000`, `-1e-10001`, `1e+0010000`, `0.5e-9996`, `123456789012345678901234567890e9970`,
		"1" + strings.Repeat("0", bounds.MaxNumberExponent+1), "0." + strings.Repeat("0", 10500) + "1",
		"1" + strings.Repeat("0", bounds.MaxNumberLength), `[1e100000000]`, `[-1e100000000]`, `[1, 2.5, {"a": 1e-7}]`,
		// strings
		`""`, `"plain"`, `"\"\\\/\b\f\n\r\t"`, `"\u0000"`, `"\u0041\u00e9\u4e16"`, `"\u00C5"`, `"\u00e9"`, `"e\u0301"`,
		"\"e\u0301\"", "\"\u212b\"", "\"\u212a\"", `"\ud800"`, `"\udc00"`, `"\ud800\udc00"`, `"\ud83d\ude00"`,
		`"\ud800\ud800\udc00"`, `"\udc00\ud800"`, `"\ud800x"`, `"\ud800\u0041"`, `"\ud800\\"`, `"\ud800\u12"`,
		`"\u12"`, `"\u12g4"`, `"\u2028"`, `"\uD83D\uDE00"`, `"\x"`, `"\'"`, `"\a"`, "\"\xff\"", "\"a\xffb\xfe\"", "\"\xe2\x82\"",
		"\"\xed\xa0\x80\"", "\"\xf4\x90\x80\x80\"", "\"\xc0\xaf\"", "\"a\tb\"", "\"a\nb\"", "\"\x7f\"", `"unterminated`,
		`"\`, `"\u`, `"ab\"`, `"a\u2028b"`, `"<html>&amp;"`, "\"\ufffd\"",
		// arrays and objects
		`[]`, `{}`, `[ ]`, `{ }`, `[[]]`, `[{}]`, `{"a":{}}`, `{"a":[]}`, `[null]`, `[null,null,1]`, `{"a":null}`,
		`{"a":null,"b":[null,{"c":null}]}`, `[1,]`, `[,1]`, `[,]`, `[1 2]`, `[1,,2]`, `{"a":1,}`, `{,}`, `{"a" 1}`, `{"a"::1}`,
		`{a:1}`, `{'a':1}`, `{"a":1 "b":2}`, `{1:2}`, `{"a"}`, `{"a":}`, `[`, `{`, `]`, `}`, `[}`, `{]`, `[1}`, `{"a":1]`,
		`[[[[]]]]`, `{"a":[1,2.5,"x",true,null]}`, `[1,"two",null,[3],{"four":4}]`, wide.String(),
		// what follows the value
		`1]`, `1 ]x`, `[1]]`, `[1]] [`, `{}}{`, `{"a":1}}`, `"a"]"`, `1}1e100000000`, `[1]x`, `1 x`, `[1] [2]`, `{}{}`,
		`1 2`, "[]\x00", `[]]` + strings.Repeat("[", bounds.MaxJSONDepth+1), `1]` + strings.Repeat("[", bounds.MaxJSONDepth+1),
		`1]` + strings.Repeat("[", bounds.MaxJSONDepth),
		// repeated keys
		`{"a":1,"a":2}`, `{"a":1,"a":"x"}`, `{"a":null,"a":null}`, `{"a":null,"a":1}`, `{"a":1,"a":null}`,
		`{"a":[1],"a":[2]}`, `{"a":[1],"a":[2,3]}`, `{"a":{"b":1},"a":{"b":2}}`, `{"a":{"b":1},"a":{"c":2}}`,
		`{"a":{"b":1,"b":2},"a":{"b":3}}`, `{"a":1,"b":2,"a":3}`, `{"a":1,"\u0061":2}`, `{"a":1,"a":2,"a":"x"}`,
		`{"a":1` + strings.Repeat("0", 10500) + `,"a":1}`, `{"a":1,"a":1` + strings.Repeat("0", 10500) + `}`,
		// keys that are the same text once normalised
		"{\"\u00e9\":1,\"e\u0301\":1}", "{\"\u00e9\":1,\"e\u0301\":\"x\"}", "{\"\u212a\":1,\"K\":2}", `{"\u212a":1,"K":2}`,
		`{"\u00e9":1,"e\u0301":2}`, "{\"e\u0301\":1,\"e\u0301\":2}", "[{\"\u00c5\":1},{\"\u212b\":2}]",
		"{\"\u00e9\":1,\"\u00e8\":2}",
		// nesting at the bound
		deep("[", "", "]", bounds.MaxJSONDepth), deep("[", "", "]", bounds.MaxJSONDepth+1), deep("[", "1", "]", bounds.MaxJSONDepth),
		deep(`{"a":`, "1", "}", bounds.MaxJSONDepth), deep(`{"a":`, "1", "}", bounds.MaxJSONDepth+1),
		deep("[", `"[[[\"{{{"`, "]", bounds.MaxJSONDepth), deep("[", "", "", bounds.MaxJSONDepth+1), deep("[", "", "]", 300),
		// fan-out items
		`[{"item":{"index":4998,"key":4998,"value":998},"attempt":1},{"item":{"index":4999,"key":4999,"value":999},"attempt":1}]`,
		`{"item":{"index":-1,"key":"k","value":[1,2]},"attempt":2}`,
	}
}

// FuzzFromJSON holds FromJSON to fromJSONReference on any input, and checks
// that what it decodes ToJSON writes out as JSON that decodes to the same
// value. The seeds alone run as a test.
func FuzzFromJSON(f *testing.F) {
	for _, seed := range jsonSeeds() {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		v := requireSameAsReference(t, b)
		if v == cty.NilVal {
			return
		}
		out, err := ToJSON(v)
		if err != nil {
			t.Fatalf("decoded %q but cannot encode it: %v", b, err)
		}
		again, err := FromJSON(out)
		if err != nil {
			t.Fatalf("encoded %q as %q, which does not decode: %v", b, out, err)
		}
		if !again.RawEquals(v) {
			t.Fatalf("%q decodes to %#v, encoded as %q decodes to %#v", b, v, out, again)
		}
	})
}

// TestFromJSONIntegers checks the integers FromJSON makes without math/big's
// parser against cty.ParseNumberVal, across the range the decoder takes
// them in and just beyond, including the shared and recently read ones.
func TestFromJSONIntegers(t *testing.T) {
	t.Parallel()
	texts := []string{"0", "1", "-1", "1023", "1024", "-1023", "-1024", "999999999999999999", "-999999999999999999",
		"1000000000000000000", "-1000000000000000000", "9223372036854775807", "-9223372036854775808"}
	for e := range 19 {
		p := "1" + strings.Repeat("0", e)
		texts = append(texts, p, "-"+p, strings.Repeat("9", e+1), "-"+strings.Repeat("9", e+1))
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 2000 {
		texts = append(texts, strconv.FormatInt(r.Int64N(1<<62)-1<<61, 10), strconv.FormatInt(r.Int64N(4096)-2048, 10))
	}
	// Each twice in a row, so that the second is the one read just before.
	var twice []string
	for _, text := range texts {
		twice = append(twice, text, text)
	}
	doc := []byte("[" + strings.Join(twice, ",") + "]")
	got, err := FromJSON(doc)
	require.NoError(t, err)
	for i, text := range twice {
		requireSameValue(t, []byte(text), got.Index(cty.NumberIntVal(int64(i))), cty.MustParseNumberVal(text))
	}
	requireSameAsReference(t, doc)
}

// TestFromJSONSharedNumbers checks that numbers shared between decoded
// values cannot be changed through one of them.
func TestFromJSONSharedNumbers(t *testing.T) {
	t.Parallel()
	v, err := FromJSON([]byte(`[1, 1, 123456789, 123456789]`))
	require.NoError(t, err)
	v.Index(cty.NumberIntVal(0)).AsBigFloat().SetInt64(5)
	v.Index(cty.NumberIntVal(2)).AsBigFloat().SetInt64(5)
	again, err := FromJSON([]byte(`[1, 1, 123456789, 123456789]`))
	require.NoError(t, err)
	require.True(t, v.RawEquals(again))
	require.True(t, v.Index(cty.NumberIntVal(1)).RawEquals(cty.NumberIntVal(1)))
	require.True(t, v.Index(cty.NumberIntVal(3)).RawEquals(cty.NumberIntVal(123456789)))
}

func TestFromJSONErrors(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ in, want string }{
		{``, "invalid JSON: unexpected end of JSON input"},
		{`[1,]`, "invalid JSON: invalid character ']' looking for beginning of value (at byte 3)"},
		{`{"a":1} x`, "invalid JSON: invalid character 'x' after top-level value (at byte 8)"},
		{`"\q"`, `invalid JSON: invalid character 'q' in string escape code (at byte 2)`},
		{"\"\x01\"", `invalid JSON: invalid character '\x01' in string literal (at byte 1)`},
		{`01`, "invalid JSON: invalid character '1' after top-level value (at byte 1)"},
		{`{"a":1,"a":"x"}`, `invalid JSON: duplicate "a" property in JSON object, with values of different types`},
		{"{\"\u00e9\":1,\"e\u0301\":2}", "invalid JSON: the object key \"e\u0301\" is not in Unicode normalization form C"},
		{strings.Repeat("[", bounds.MaxJSONDepth+1), "invalid JSON: it nests more than 1000 levels deep; the limit is 1000"},
		{`[1e100000000]`, "invalid JSON: it holds a number more than 11000 characters long or with an exponent beyond 10000"},
		{"1" + strings.Repeat("0", 10500), "invalid JSON: it holds a number with an exponent beyond 10000"},
		{`[]]` + strings.Repeat("[", bounds.MaxJSONDepth+2), "invalid JSON: it nests more than 1000 levels deep; the limit is 1000"},
	} {
		_, err := FromJSON([]byte(tt.in))
		require.EqualError(t, err, tt.want, "%.40q", tt.in)
	}
}

// fanOutOutput is the output of a fan-out of n items as a later step reads
// it.
func fanOutOutput(n int) []byte {
	var b bytes.Buffer
	b.WriteByte('[')
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"item":{"index":%d,"key":%d,"value":%d},"attempt":1}`, i, i, i%1000)
	}
	b.WriteByte(']')
	return b.Bytes()
}

// TestFromJSONLarge holds FromJSON to the reference on documents larger
// than the fuzzer makes: more keys and strings than it remembers for
// sharing, objects too wide for its reused map, with repeated keys.
func TestFromJSONLarge(t *testing.T) {
	t.Parallel()
	var wide, strs, nested strings.Builder
	wide.WriteString("{")
	for i := range 3000 {
		fmt.Fprintf(&wide, `"key-%d":%d,`, i, i)
	}
	wide.WriteString(`"key-17":-1,"key-2999":1}`)
	strs.WriteString("[")
	for i := range 3000 {
		fmt.Fprintf(&strs, `"s%d","ok","\u00e9t\u00e9","e\u0301","%s",{"k%d":"v","ok":"ok"},`, i, strings.Repeat("x", i%100), i%1500)
	}
	strs.WriteString(`""]`)
	nested.WriteString("[")
	for i := range 500 {
		fmt.Fprintf(&nested, `{"a":[{"b":[%d,-%d,%d.5,null,true]},{"b":[]}],"c":{"d":{},"e":"f"},"a":[{"b":[0,0,0,null,false]},{"b":[]}]},`, i, i, i)
	}
	nested.WriteString("null]")
	for _, doc := range []string{wide.String(), strs.String(), nested.String()} {
		require.NotEqual(t, cty.NilVal, requireSameAsReference(t, []byte(doc)), "%.40s", doc)
	}
	_, err := FromJSON([]byte(strings.Replace(wide.String(), `"key-2999":1}`, `"key-2999":"x"}`, 1)))
	require.ErrorContains(t, err, `duplicate "key-2999" property`)
}

func TestFromJSONFanOutOutput(t *testing.T) {
	t.Parallel()
	requireSameAsReference(t, fanOutOutput(3000))
}

// BenchmarkFromJSONFanOutOutput decodes the output of a 100,000-item
// fan-out with FromJSON and with the decoder it replaced. B/item-live is
// the heap the decoded value keeps alive, per item.
func BenchmarkFromJSONFanOutOutput(b *testing.B) {
	const items = 100_000
	doc := fanOutOutput(items)
	for _, impl := range []struct {
		name   string
		decode func([]byte) (cty.Value, error)
	}{{"reference", fromJSONReference}, {"new", FromJSON}} {
		b.Run(impl.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(doc)))
			for b.Loop() {
				if _, err := impl.decode(doc); err != nil {
					b.Fatal(err)
				}
			}
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			v, err := impl.decode(doc)
			runtime.GC()
			runtime.ReadMemStats(&after)
			if err != nil || v.LengthInt() != items {
				b.Fatal(err)
			}
			runtime.KeepAlive(v)
			b.ReportMetric(float64(int64(after.HeapAlloc)-int64(before.HeapAlloc))/items, "B/item-live")
		})
	}
}
