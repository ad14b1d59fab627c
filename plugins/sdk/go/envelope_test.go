package sdk

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
)

// engineEnvelopes are requests as the engine writes them
// (engine/internal/guest, TestRequestJSON), plus the fields it adds for
// some attempts.
var engineEnvelopes = []string{
	`{"abi":1,"task_id":"01J","task_name":"report","step":"draft","item":null,"attempt":1,"input":{"topic":"x"},"policy":{}}`,
	`{"abi":1,"task_id":"01J","task_name":"audit","step":"check","item":{"index":3,"key":"/about","value":{"url":"/about"}},"attempt":2,"repair":{"count":1,"reason":"missing section: Risks"},"input":null,"policy":{}}`,
	`{"abi":1,"task_id":"","task_name":"","step":"s","item":{"index":0,"key":null,"value":null},"attempt":0,"input":null,"policy":{}}`,
	`{"abi":1,"task_id":"","task_name":"","step":"draft","item":null,"attempt":1,"input":null,"policy":{"few_shot":"examples/v2","single_tool":true}}`,
	`{"abi":1,"task_id":"","task_name":"","step":"check","item":null,"attempt":1,"input":null,"policy":{},"objective":"Audit every page","constraints":["never write to the site","ask  first"]}`,
	`{"abi":1,"task_id":"t","task_name":"n","step":"s","item":{"index":7,"key":7,"value":[1,2.5e3,-0.5,"x\u00e9\n",true,false,null,{}]},"attempt":3,"input":{"a":"ü"},"policy":{"p":1},"now":"2026-12-03T21:00:00.123456789Z","environment":{"os":"linux","Ω":"ω"}}` + "\n",
}

// TestEngineEnvelopesTakeTheFastPath: what the engine sends is read
// without encoding/json, and read the same.
func TestEngineEnvelopesTakeTheFastPath(t *testing.T) {
	for _, s := range engineEnvelopes {
		got, ok := parseEnvelope([]byte(s))
		if !ok {
			t.Fatalf("not taken by the fast path: %s", s)
		}
		var want envelope
		if err := json.NewDecoder(bytes.NewReader([]byte(s))).Decode(&want); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%s\nfast path: %#v\nencoding/json: %#v", s, got, want)
		}
	}
}

// TestOddEnvelopesFallBack: what the fast path does not take is decoded
// by encoding/json, errors included.
func TestOddEnvelopesFallBack(t *testing.T) {
	for _, s := range []string{
		`{"ABI":1,"task_id":"t"}`,                       // encoding/json matches keys without case
		`{"abi":1,"task_id":"a\"b"}`,                    // escaped
		`{"abi":1.0}`,                                   // not an int: an error
		`{"abi":1,"unknown":{"x":1}}`,                   // ignored by encoding/json
		`{"abi":1,"task_id":null}`,                      // leaves the field alone
		`{"abi":1} trailing`,                            // json.Decoder reads one value
		`{"abi":1,"input":[1,]}`,                        // not JSON
		"{\"abi\":1,\"step\":\"\xff\"}",                 // invalid UTF-8 becomes U+FFFD
		`{"abi":99999999999999999999999}`,               // overflows
		`not json`,                                      // the error a plugin reports
		`{"abi":1,"environment":{"a":null}}`,            // null in a map of strings
		`{"abi":1,"item":{"index":1},"item":{"key":2}}`, // repeated keys
	} {
		var got, want envelope
		gotErr := decodeEnvelope([]byte(s), &got)
		wantErr := json.NewDecoder(bytes.NewReader([]byte(s))).Decode(&want)
		if (gotErr == nil) != (wantErr == nil) || (gotErr != nil && gotErr.Error() != wantErr.Error()) {
			t.Fatalf("%s: error %v, encoding/json %v", s, gotErr, wantErr)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%s\ngot: %#v\nencoding/json: %#v", s, got, want)
		}
	}
}

// FuzzParseEnvelope holds the fast path to encoding/json: whatever it
// takes, it reads as json.Decoder does.
func FuzzParseEnvelope(f *testing.F) {
	for _, s := range engineEnvelopes {
		f.Add([]byte(s))
	}
	f.Add([]byte(`{"abi":1,"item":{"index":1},"item":{"key":2},"repair":{"count":1},"repair":{"reason":"r"}}`))
	f.Add([]byte(`{"abi":-0,"policy":{"a":1},"policy":{"b":2},"constraints":["a"],"constraints":[]}`))
	f.Add([]byte(`{"abi":1,"input":"\ud800","policy":{"x":null},"environment":null}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		got, ok := parseEnvelope(b)
		if !ok {
			return
		}
		var want envelope
		if err := json.NewDecoder(bytes.NewReader(b)).Decode(&want); err != nil {
			t.Fatalf("fast path took %q, which encoding/json refuses: %v", b, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%q\nfast path: %#v\nencoding/json: %#v", b, got, want)
		}
	})
}

// TestOutputIsWrittenAsTheEncoderWrites: a success's result has the bytes
// json.Encoder gave it.
func TestOutputIsWrittenAsTheEncoderWrites(t *testing.T) {
	for _, v := range []any{
		nil, 1, "x", "<a&b>\u2028\u2029", map[string]any{"z": 1, "a": []any{"é", 2.5, nil}},
		json.RawMessage(`{"b": [1, 2] }`), struct {
			A string `json:"a"`
		}{"\x00"},
	} {
		raw, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		var want bytes.Buffer
		if err := json.NewEncoder(&want).Encode(result{Output: raw}); err != nil {
			t.Fatal(err)
		}
		if got := appendOutput(nil, raw); !bytes.Equal(got, want.Bytes()) {
			t.Fatalf("%#v: wrote %q, json.Encoder %q", v, got, want.Bytes())
		}
	}
}
