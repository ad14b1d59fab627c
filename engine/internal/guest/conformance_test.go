package guest

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lhengine/lhengine/fault"
	"github.com/lhengine/lhengine/internal/testwasm"
)

// outcome is a classified attempt, as the engine sees it.
type outcome struct {
	Kind        fault.Kind // "" for success
	Message     string
	Output      string // JSON, compared semantically
	NeedsRepair bool
	Reason      string
	HostLogs    []string
	Beats       int
}

// buildAssemblyScript builds testdata/guests/assemblyscript/NAME/index.ts
// with asc and the WASI shim.
func buildAssemblyScript(t testing.TB, name string) string {
	t.Helper()
	return testwasm.BuildAssemblyScript(t, guestPath(t, filepath.Join("assemblyscript", name, "index.ts")))
}

// TestConformance runs one table of behaviours against the Go guest (with
// the SDK; plain, and declared stateless so that one instance serves many
// attempts), the C guest (without it, and with lhengine.h), the Rust guest
// (with the Rust SDK) and the AssemblyScript guest (with its SDK): every
// guest must give the same classified result.
func TestConformance(t *testing.T) {
	t.Parallel()
	r := sharedRuntime(t)
	guests := map[string]func(t *testing.T) *Plugin{
		"go": func(t *testing.T) *Plugin { return loadAs(t, r, "conformance", testwasm.GoGuest(t, "conformance")) },
		"go+stateless": func(t *testing.T) *Plugin {
			p := loadAs(t, r, "conformance", testwasm.GoGuest(t, "stateless"))
			require.True(t, p.reuse)
			return p
		},
		"c": func(t *testing.T) *Plugin { return loadAs(t, r, "conformance", testwasm.CGuest(t, "conformance")) },
		"c+header": func(t *testing.T) *Plugin {
			return loadAs(t, r, "conformance", testwasm.CGuest(t, "conformance", "-DUSE_LHENGINE_H"))
		},
		"rust":           func(t *testing.T) *Plugin { return loadAs(t, r, "conformance", buildRust(t, "conformance")) },
		"assemblyscript": func(t *testing.T) *Plugin { return loadAs(t, r, "conformance", buildAssemblyScript(t, "conformance")) },
	}
	item := &Item{Index: 3, Key: json.RawMessage(`"page-3"`), Value: json.RawMessage(`{"url":"/a?b=<c>"}`)}
	large := `{"mode":"echo","s":"` + strings.Repeat(`abcdé\"fghi\u00e9`, 20000) + `"}`
	cases := []struct {
		name string
		req  Request
		want outcome
	}{
		{
			name: "echo",
			req: Request{TaskID: "t1", TaskName: "report", Step: "verify", Attempt: 2, Item: item,
				Repair: &Repair{Count: 1, Reason: "missing section"},
				Input:  json.RawMessage(`{"mode":"echo","n":[1,2.5,"ü\"x"],"nested":{"a":null}}`)},
			want: outcome{Output: `{"input":{"mode":"echo","n":[1,2.5,"ü\"x"],"nested":{"a":null}},"step":"verify","attempt":2,"item":{"index":3,"key":"page-3","value":{"url":"/a?b=<c>"}}}`},
		},
		{
			// 330 KB: more than one read of stdin and one write of stdout.
			name: "echo large",
			req:  Request{TaskID: "t1", Step: "draft", Attempt: 1, Input: json.RawMessage(large)},
			want: outcome{Output: `{"input":` + large + `,"step":"draft","attempt":1,"item":null}`},
		},
		{
			name: "echo without item",
			req:  Request{TaskID: "t1", Step: "draft", Attempt: 1, Input: json.RawMessage(`{"mode":"echo"}`)},
			want: outcome{Output: `{"input":{"mode":"echo"},"step":"draft","attempt":1,"item":null}`},
		},
		{
			name: "error",
			req:  Request{Step: "s", Attempt: 1, Input: json.RawMessage(`{"mode":"error"}`)},
			want: outcome{Kind: fault.PluginError, Message: "plugin conformance: requested error"},
		},
		{
			name: "repair",
			req:  Request{Step: "s", Attempt: 1, Input: json.RawMessage(`{"mode":"repair"}`)},
			want: outcome{NeedsRepair: true, Reason: "requested repair"},
		},
		{
			name: "log",
			req:  Request{Step: "s", Attempt: 1, Input: json.RawMessage(`{"mode":"log"}`)},
			want: outcome{Output: `{"logged":true,"lease":"ok"}`, HostLogs: []string{"info: hello from guest"}, Beats: 1},
		},
		{
			name: "exit3",
			req:  Request{Step: "s", Attempt: 1, Input: json.RawMessage(`{"mode":"exit3"}`)},
			want: outcome{Kind: fault.PluginError, Message: "plugin conformance exited with code 3: exit3: failing on purpose"},
		},
		{
			name: "unknown mode",
			req:  Request{Step: "s", Attempt: 1, Input: json.RawMessage(`{"mode":"dance"}`)},
			want: outcome{Kind: fault.PluginError, Message: "plugin conformance: unknown mode"},
		},
		{
			name: "null input",
			req:  Request{Step: "s", Attempt: 1},
			want: outcome{Kind: fault.PluginError, Message: "plugin conformance: unknown mode"},
		},
	}
	for gname, load := range guests {
		t.Run(gname, func(t *testing.T) {
			t.Parallel()
			p := load(t)
			for _, tc := range cases {
				t.Run(tc.name, func(t *testing.T) {
					t.Parallel()
					host := &testHost{}
					res, err := p.Run(context.Background(), tc.req, Limits{}, host)
					require.NotNil(t, res)
					got := outcome{HostLogs: host.logs, Beats: host.beats}
					if err != nil {
						var se *fault.StepError
						require.ErrorAs(t, err, &se)
						got.Kind, got.Message = se.Kind, se.Message
					} else {
						got.NeedsRepair, got.Reason = res.NeedsRepair, res.RepairReason
						if !res.NeedsRepair {
							got.Output = string(res.Output)
						}
					}
					if tc.want.Output != "" && got.Output != "" {
						require.JSONEq(t, tc.want.Output, got.Output)
						got.Output = tc.want.Output
					}
					require.Equal(t, tc.want, got)
					for _, l := range tc.want.HostLogs {
						require.Contains(t, string(res.Log), "[info] hello from guest\n", l)
					}
				})
			}
		})
	}
}
