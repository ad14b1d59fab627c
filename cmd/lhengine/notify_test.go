//go:build unix

package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lhengine/lhengine/internal/crashpoint"
	"github.com/lhengine/lhengine/ledger"
)

// notifyCrashTask pauses after its first unit (budget units = 1), and its
// notify block sends the pause, the resume and the success.
const notifyCrashTask = `
task "notified" {
  budget {
    units = 1
  }
  notify {
    url    = %q
    events = ["paused", "resumed", "succeeded"]
  }
  step "a" {
    plugin = "step.wasm"
    input  = { mode = "echo", step = "a" }
  }
  step "b" {
    plugin = "step.wasm"
    input  = { mode = "echo", step = "b" }
  }
}
`

// TestNotifyAcrossSIGKILL: a real `lhengine run` of a task with a notify
// block dies by SIGKILL right after journaling the intent of its first
// notification (the pause), before sending it, or right after the
// receiver answered it, before the outcome is recorded; `resume` finishes
// the task. The receiver on 127.0.0.1 sees every listed event, each under
// one Idempotency-Key (deduplicated by key: exactly one delivery per
// event), the event sent again after the kill under the key it had, and
// the outbox ends empty with every delivery journaled.
func TestNotifyAcrossSIGKILL(t *testing.T) {
	t.Parallel()
	bin := buildBinary(t)
	for _, tc := range []struct {
		at     string
		pauses int // deliveries of the pause the receiver sees
	}{
		{crashpoint.NotifyAfterIntent, 1},
		{crashpoint.NotifyAfterSend, 2},
	} {
		t.Run(tc.at, func(t *testing.T) {
			t.Parallel()
			var mu sync.Mutex
			byKey := map[string][]ledger.Event{}
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
				var body struct {
					Task  string       `json:"task"`
					Event ledger.Event `json:"event"`
				}
				b, _ := io.ReadAll(req.Body)
				if err := json.Unmarshal(b, &body); err != nil || req.Header.Get("Idempotency-Key") == "" {
					http.Error(w, "want a JSON body and an Idempotency-Key", http.StatusBadRequest)
					return
				}
				mu.Lock()
				byKey[req.Header.Get("Idempotency-Key")] = append(byKey[req.Header.Get("Idempotency-Key")], body.Event)
				mu.Unlock()
			}))
			defer srv.Close()
			b := setupCLI(t, fmt.Sprintf(notifyCrashTask, srv.URL+"/hook"))

			out, code := lhExit(t, bin, b.home, tc.at, "run", filepath.Join(b.dir, "task.hcl"))
			require.Equal(t, -9, code, "the run dies at %s:\n%s", tc.at, out)
			id := taskID(out)
			require.Len(t, id, 26, out)
			mu.Lock()
			require.Len(t, byKey, tc.pauses-1, "sent before the kill: %v", byKey)
			mu.Unlock()

			out, code = lhExit(t, bin, b.home, "", "resume", id, "--budget", "units=+5")
			require.Equal(t, 0, code, "the resume finishes the task:\n%s", out)

			mu.Lock()
			defer mu.Unlock()
			var types []string
			for key, evs := range byKey {
				for _, e := range evs {
					require.Equal(t, evs[0], e, "every delivery under key %s is the same event", key)
				}
				require.Equal(t, fmt.Sprintf("%s/notify/%d", id, evs[0].Seq), key)
				types = append(types, string(evs[0].Type))
				want := 1
				if evs[0].Type == ledger.EvPaused {
					want = tc.pauses
				}
				require.Len(t, evs, want, "deliveries of %s", evs[0].Type)
			}
			sort.Strings(types)
			require.Equal(t, []string{"paused", "resumed", "succeeded"}, types, "every listed event, each once by key")

			list := lhOK(t, b, "effects", id)
			require.Equal(t, 3, strings.Count(list, "notify["), "lhengine effects lists the deliveries:\n%s", list)

			withStore(t, b.home, func(r ledger.Reader) {
				succeededTask(t, r, id)
				outbox, err := r.Notifications(id)
				require.NoError(t, err)
				require.Empty(t, outbox)
				effs, err := r.Effects(id)
				require.NoError(t, err)
				done := 0
				for _, f := range effs {
					if f.StepName == ledger.NotifyStep {
						require.Equal(t, ledger.EffectDone, f.State, "%+v", f)
						done++
					}
				}
				require.Equal(t, 3, done)
			})
		})
	}
}
