package main

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lhengine/lhengine/internal/crashpoint"
	"github.com/lhengine/lhengine/internal/testwasm"
	"github.com/lhengine/lhengine/ledger"
	"github.com/lhengine/lhengine/plugins/examples/notify/sink/mailsink"
)

// serveLoopback serves h on a loopback port for the test's lifetime and
// returns its base URL.
func serveLoopback(t *testing.T, h http.Handler) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv := &http.Server{Handler: h}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(ln)
	}()
	t.Cleanup(func() {
		require.NoError(t, srv.Close())
		<-done
	})
	return "http://" + ln.Addr().String()
}

// startSink serves a mail sink on a loopback port for the test's lifetime.
func startSink(t *testing.T) (*mailsink.Sink, string) {
	t.Helper()
	sink := mailsink.New()
	return sink, serveLoopback(t, sink)
}

// setupNotify is setupCLI with the example's send plugin beside the task,
// as send.wasm.
func setupNotify(t *testing.T, task string) *cliBundle {
	t.Helper()
	b := setupCLI(t, task)
	testwasm.Copy(t, testwasm.BuildGo(t, filepath.Join(testwasm.ModuleRoot(t), "plugins/examples/notify/send")), filepath.Join(b.dir, "send.wasm"))
	return b
}

func notifyTask(mode, base string) string {
	check := ""
	if mode == "check" {
		check = fmt.Sprintf("\n      check_url = %q", base+"/applied")
	}
	return fmt.Sprintf(`
task "notify" {
  variable "recipients" {
    type    = list(string)
    default = ["ana@example.org", "bo@example.org", "cy@example.org"]
  }
  step "send" {
    plugin      = "send.wasm"
    for_each    = var.recipients
    concurrency = 1
    input = {
      to      = each.value
      subject = "ready"
      body    = "the report is ready"
      sink    = %q
    }
    effect "http" {
      hosts = ["127.0.0.1:*"]
      mode  = %q%s
    }
  }
}
`, base+"/mail", mode, check)
}

// TestCrashMatrix kills a real lhengine process at every durable boundary
// of a work unit and of the effect journal, for every reconciliation mode,
// restarts it, and checks against a loopback receiver that counts requests
// per idempotency key: exactly one applied email per recipient (resend,
// check), or a task paused for a human (manual) that a confirm or retry
// then finishes; and no artifact, count or note lost or doubled.
func TestCrashMatrix(t *testing.T) {
	t.Parallel()
	bin := buildBinary(t)
	for _, mode := range []string{"resend", "check", "manual"} {
		for _, point := range crashpoint.Points {
			t.Run(mode+"/"+point, func(t *testing.T) {
				t.Parallel()
				sink, base := startSink(t)
				b := setupNotify(t, notifyTask(mode, base))

				// First run: dies at the crash point.
				out, killed := runCrashing(t, bin, b.home, point, nil, "run", filepath.Join(b.dir, "task.hcl"))
				require.True(t, killed, "the process must die at %s; output:\n%s", point, out)
				id := taskID(out)
				require.Len(t, id, 26)

				// Restart.
				code, rout, rerr := b.lh(t, "resume", id)
				task := b.task(t, id)
				if mode == "manual" && (point == crashpoint.EffectAfterIntent || point == crashpoint.EffectAfterPerform) {
					// The outcome of the first email is unknown: a human decides
					// (resume returns on the pause with exit status 3).
					require.Equal(t, 3, code, rout+rerr)
					require.Equal(t, ledger.Paused, task.Status, task.Reason)
					require.Contains(t, task.Reason, "outcome unknown")
					_, ecode := b.effects(t, id)
					require.Equal(t, 0, ecode)
					verb := "retry" // after_intent: it was never sent
					if point == crashpoint.EffectAfterPerform {
						verb = "confirm" // it was sent
					}
					ecode, _, errOut := b.lh(t, "effect", verb, id, "send", "email-ana@example.org")
					require.Equal(t, 0, ecode, errOut)
					code, rout, rerr = b.lh(t, "resume", id)
					task = b.task(t, id)
				}
				require.Equal(t, 0, code, rout+rerr)
				require.Equal(t, ledger.Succeeded, task.Status, task.Reason)

				st := sink.Stats()
				require.Len(t, st.Applied, 3, "one applied email per recipient")
				effects, _ := b.effects(t, id)
				for _, e := range effects {
					require.Equal(t, ledger.EffectDone, e.State)
					require.Contains(t, st.Applied, e.IdempotencyKey, "the journal's key is the one the receiver applied")
					if mode != "resend" {
						// check asks before sending again; manual never re-sends on its own.
						require.Equal(t, 1, st.Received[e.IdempotencyKey], "key %s sent more than once", e.Key)
					}
				}
				require.Equal(t, int64(3), task.Counters["emails"], "counts are committed with the unit, once")
				require.EqualValues(t, 3, task.Notes, "notes are committed with the unit, once")
				code, aout, _ := b.lh(t, "-o", "json", "artifacts", id)
				require.Equal(t, 0, code)
				var arts []ledger.Provenance
				require.NoError(t, json.Unmarshal([]byte(aout), &arts))
				require.Len(t, arts, 3, "one message artifact per recipient, never doubled")
			})
		}
	}
}

func (b *cliBundle) task(t *testing.T, id string) *ledger.Task {
	t.Helper()
	return lhJSON[struct{ Task *ledger.Task }](t, b, "status", id).Task
}

func (b *cliBundle) effects(t *testing.T, id string) ([]ledger.Effect, int) {
	t.Helper()
	code, out, _ := b.lh(t, "-o", "json", "effects", id)
	var es []ledger.Effect
	if code == 0 {
		require.NoError(t, json.Unmarshal([]byte(out), &es))
	}
	return es, code
}
