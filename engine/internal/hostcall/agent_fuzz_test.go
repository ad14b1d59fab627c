package hostcall

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/lhengine/lhengine/engine/internal/guest"
	"github.com/lhengine/lhengine/engine/internal/taskfile"
)

// FuzzAgentCalls: whatever a guest sends to approval.request,
// notes.list, notes.compact and handoff.get is answered with JSON or
// refused with a host status (a pause, for an approval asked); nothing
// panics, and a decision is never answered without one.
func FuzzAgentCalls(f *testing.F) {
	for _, seed := range []string{
		`{"prompt":"Deploy?","subject":{"env":"prod"},"expires_in":"24h"}`, `{"prompt":"x"}`, `{"prompt":"","subject":1}`,
		`{"prompt":"x","expires_in":"-1h"}`, `{"after":3,"limit":10}`, `{"after":-1}`, `{"limit":100000}`,
		`{"replaces":[0,1],"summary":"two"}`, `{"replaces":[],"summary":"x"}`, `{"replaces":[18446744073709551615],"summary":"x"}`,
		`{}`, `[]`, `null`, `"x"`, `{"prompt":"x","subject":{"a":` + "1e400" + `}}`,
	} {
		f.Add(seed)
	}
	a := setupFuzz(f, &taskfile.Step{Name: "s"})
	f.Fuzz(func(t *testing.T, req string) {
		for _, name := range []string{"approval.request", "notes.list", "notes.compact", "handoff.get"} {
			out, err := a.Call(context.Background(), name, []byte(req))
			var he *guest.HostError
			switch {
			case err == nil:
				if !json.Valid(out) {
					t.Fatalf("%s: answer %q is not JSON", name, out)
				}
				if name == "approval.request" {
					t.Fatalf("approval.request answered %s without a decision", out)
				}
			case !errors.As(err, &he):
				t.Fatalf("%s: not a host status: %v", name, err)
			}
		}
	})
}
