package guest

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lhengine/lhengine/fault"
	"github.com/lhengine/lhengine/internal/testwasm"
)

// TestSDKsDecodeTheRequest: the Rust and AssemblyScript SDKs decode every
// field of the request envelope (specs/abi.md section 3), and give the
// documented defaults for the fields a request leaves out.
func TestSDKsDecodeTheRequest(t *testing.T) {
	t.Parallel()
	r := sharedRuntime(t)
	guests := map[string]func(t *testing.T) *Plugin{
		"rust":           func(t *testing.T) *Plugin { return loadAs(t, r, "conformance", buildRust(t, "conformance")) },
		"assemblyscript": func(t *testing.T) *Plugin { return loadAs(t, r, "conformance", buildAssemblyScript(t, "conformance")) },
	}
	full := Request{
		TaskID: "01J0", TaskName: "report", Step: "verify", Attempt: 4,
		Item:        &Item{Index: 7, Key: json.RawMessage(`"page-7"`), Value: json.RawMessage(`{"url":"/x"}`)},
		Repair:      &Repair{Count: 2, Reason: "missing \"Risks\""},
		Input:       json.RawMessage(`{"mode":"request","n":[1,-2.5e3]}`),
		Policy:      json.RawMessage(`{"single_tool":true,"few_shot":"v2"}`),
		Environment: map[string]string{"head": "abc123"},
		Objective:   "Write a report: ü",
		Constraints: []string{"no network", "be brief"},
		Now:         time.Date(2026, 3, 2, 9, 14, 7, 218345001, time.UTC),
	}
	fullWant := `{"task_id":"01J0","task_name":"report","step":"verify","attempt":4,
		"item":{"index":7,"key":"page-7","value":{"url":"/x"}},"repair":{"count":2,"reason":"missing \"Risks\""},
		"input":{"mode":"request","n":[1,-2.5e3]},"policy":{"single_tool":true,"few_shot":"v2"},"single_tool":true,
		"now":"2026-03-02T09:14:07.218345001Z","environment":{"head":"abc123"},"objective":"Write a report: ü",
		"constraints":["no network","be brief"]}`
	bare := Request{Step: "s", Attempt: 1, Input: json.RawMessage(`{"mode":"request"}`)}
	bareWant := `{"task_id":"","task_name":"","step":"s","attempt":1,"item":null,"repair":null,
		"input":{"mode":"request"},"policy":{},"single_tool":null,"now":"","environment":{},"objective":"","constraints":[]}`
	for gname, load := range guests {
		t.Run(gname, func(t *testing.T) {
			t.Parallel()
			p := load(t)
			for _, tc := range []struct {
				name string
				req  Request
				want string
			}{{"full", full, fullWant}, {"bare", bare, bareWant}} {
				res, err := p.Run(context.Background(), tc.req, Limits{}, &testHost{})
				require.NoError(t, err, tc.name)
				require.JSONEq(t, tc.want, string(res.Output), tc.name)
			}
		})
	}
}

// TestCHeaderHelpers: a C plugin written with lhengine.h's request, result
// and capability helpers alone reads request fields, makes well-formed
// requests (strings quoted and escaped) and writes well-formed results.
func TestCHeaderHelpers(t *testing.T) {
	t.Parallel()
	p := loadAs(t, sharedRuntime(t), "helpers", testwasm.CGuest(t, "helpers"))
	for _, tc := range []struct {
		mode, input string
		want        string // the output, or the failure "kind: message", or "repair: reason"
		calls       []string
	}{
		{mode: "fields", input: `{"mode":"fields","n":[1,{"a":"}"}]}`,
			want: `{"step":"s","attempt":2,"objective":"do \"it\"","n":[1,{"a":"}"}]}`},
		{mode: "kv", want: `{"cursor":{"found":true,"value":{"page":3}},"missing":{"found":false}}`,
			calls: []string{`kv.put {"key":"cursor","value":{"page":3}}`, `kv.get {"key":"cursor"}`, `kv.get {"key":"missing"}`}},
		{mode: "progress", want: `{"count":0,"note":0}`,
			calls: []string{`progress.count {"delta":2,"name":"pa\"ges"}`,
				`progress.note {"kind":"finding","text":"line one\nline \"two\""}`}},
		{mode: "refused", want: `{"status":-4,"message":"call kv.put: kv key \"denied\" is read-only"}`,
			calls: []string{`kv.put {"key":"denied","value":1}`}},
		// The engine puts a message on one line.
		{mode: "fail", want: `plugin_error: plugin helpers: bad "thing" second line`},
		{mode: "repair", want: `repair: why "x"`},
		{mode: "null", want: `null`},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			t.Parallel()
			input := tc.input
			if input == "" {
				input = `{"mode":"` + tc.mode + `"}`
			}
			host := &testHost{}
			res, err := p.Run(context.Background(), Request{Step: "s", Attempt: 2, Objective: `do "it"`,
				Input: json.RawMessage(input)}, Limits{}, host)
			switch {
			case err != nil:
				var se *fault.StepError
				require.ErrorAs(t, err, &se)
				require.Equal(t, tc.want, string(se.Kind)+": "+se.Message)
			case res.NeedsRepair:
				require.Equal(t, tc.want, "repair: "+res.RepairReason)
			default:
				require.JSONEq(t, tc.want, string(res.Output))
			}
			require.Equal(t, tc.calls, host.calls)
		})
	}
}
