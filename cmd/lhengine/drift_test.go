package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lhengine/lhengine/engine"
	"github.com/lhengine/lhengine/internal/crashpoint"
	"github.com/lhengine/lhengine/internal/testgit"
	"github.com/lhengine/lhengine/internal/testwasm"
	"github.com/lhengine/lhengine/ledger"
)

// driftTask: two steps, each echoing the environment facts of its
// request, over the git repository "repo" beside the task file.
const driftTask = `
task "migrate" {
  environment {
    fact "head"   { git_head = "repo" }
    fact "config" { file_sha256 = "repo/deploy.yaml" }
    on_drift = %q
  }
  step "rename" {
    plugin = "environ.wasm"
    input  = "rename"
  }
  step "deploy" {
    plugin = "environ.wasm"
    input  = "deploy"
  }
}
`

// lhExit runs the lhengine binary and returns its stdout and exit status;
// a death by SIGKILL is -9.
func lhExit(t *testing.T, bin, home, crashAt string, args ...string) (string, int) {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"--home", home, "--log-level", "off"}, args...)...)
	cmd.Env = append(os.Environ(), "LHENGINE_CRASH_AT="+crashAt)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return string(out), 0
	case errors.As(err, &ee):
		if ws := ee.Sys().(syscall.WaitStatus); ws.Signaled() && ws.Signal() == syscall.SIGKILL {
			return string(out), -9
		}
		return string(out) + stderr.String(), ee.ExitCode()
	default:
		require.NoError(t, err)
		return "", 0
	}
}

// TestDriftAcrossSIGKILL: the run is killed with SIGKILL after the first
// step commits; a commit lands in the task's git repository; the resume
// reads the facts again before the next unit and applies on_drift.
func TestDriftAcrossSIGKILL(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git not installed")
	}
	bin := buildBinary(t)
	wasm, err := os.ReadFile(testwasm.CGuest(t, "environ"))
	require.NoError(t, err)

	for _, onDrift := range []string{"pause", "restart:rename", "continue"} {
		t.Run(onDrift, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			home := filepath.Join(dir, "home")
			repo := filepath.Join(dir, "repo")
			require.NoError(t, os.Mkdir(repo, 0o755))
			require.NoError(t, os.WriteFile(filepath.Join(dir, "environ.wasm"), wasm, 0o644))
			require.NoError(t, os.WriteFile(filepath.Join(dir, "task.hcl"), fmt.Appendf(nil, driftTask, onDrift), 0o644))
			require.NoError(t, os.WriteFile(filepath.Join(repo, "deploy.yaml"), []byte("replicas: 2\n"), 0o644))
			testgit.Run(t, repo, "init", "-q")
			testgit.Run(t, repo, "add", ".")
			testgit.Run(t, repo, "commit", "-q", "-m", "first")
			before := testgit.Run(t, repo, "rev-parse", "HEAD")

			out, code := lhExit(t, bin, home, crashpoint.UnitAfterCommit+"@1", "run", filepath.Join(dir, "task.hcl"))
			require.Equal(t, -9, code, "the run dies after its first commit:\n%s", out)
			id := taskID(out)
			require.Len(t, id, 26, out)

			// The world changes while no process works the task.
			require.NoError(t, os.WriteFile(filepath.Join(repo, "api.go"), []byte("package api\n"), 0o644))
			testgit.Run(t, repo, "add", "api.go")
			testgit.Run(t, repo, "commit", "-q", "-m", "second")
			after := testgit.Run(t, repo, "rev-parse", "HEAD")
			require.NotEqual(t, before, after)

			out, code = lhExit(t, bin, home, "", "resume", id)
			read := func(fn func(r ledger.Reader) error) {
				waitUnlocked(t, home)
				e, err := engine.Open(context.Background(), engine.Config{Home: home})
				require.NoError(t, err)
				defer e.Close(context.Background())
				require.NoError(t, e.Read(fn))
			}
			var (
				task   *ledger.Task
				drifts []ledger.Event
			)
			load := func() {
				read(func(r ledger.Reader) error {
					var err error
					if task, err = r.Task(id); err != nil {
						return err
					}
					evs, err := r.Events(id, 0, 0)
					drifts = drifts[:0]
					for _, e := range evs {
						if e.Type == ledger.EvDrift {
							drifts = append(drifts, e)
						}
					}
					return err
				})
			}
			load()
			require.Len(t, drifts, 1, "one drift, of the fact head")
			require.Equal(t, "head", drifts[0].Fact.Name)
			require.Equal(t, before, drifts[0].Fact.Old)
			require.Equal(t, after, drifts[0].Fact.New)
			require.Equal(t, onDrift, drifts[0].Fact.Action)
			require.NotNil(t, task.Drift)
			require.Equal(t, after, task.Drift.New)
			status, statusCode := lhExit(t, bin, home, "", "status", id)
			require.Equal(t, 0, statusCode, status)
			require.Contains(t, status, "drift:       fact head changed from "+before+" to "+after)
			events, eventsCode := lhExit(t, bin, home, "", "events", id)
			require.Equal(t, 0, eventsCode, events)
			require.Contains(t, events, "environment fact head changed from "+before+" to "+after+" (on_drift "+onDrift+")")
			attempts, attemptsCode := lhExit(t, bin, home, "", "outputs", id, "--attempts")
			require.Equal(t, 0, attemptsCode, attempts)
			require.Contains(t, attempts, "   environment: config=")
			require.Contains(t, attempts, " head="+before+"\n", "the first step's attempt ran under the old head")

			if onDrift == "pause" {
				require.Equal(t, 3, code, "a paused task is exit status 3:\n%s", out)
				require.Equal(t, ledger.Paused, task.Status)
				require.Equal(t, ledger.PauseDrift, task.Pause.Kind)
				require.Equal(t, "head", task.Pause.Name)
				require.Contains(t, out, "environment fact head changed")
				require.Equal(t, 1, task.Steps[0].Done)
				require.Zero(t, task.Steps[1].Done, "nothing ran under the changed world")
				// Resumed by a person, the task goes on under the new values.
				out, code = lhExit(t, bin, home, "", "resume", id)
				load()
				require.Len(t, drifts, 1, "the resume does not see the same drift again")
			}
			require.Equal(t, 0, code, out)
			require.Equal(t, ledger.Succeeded, task.Status, task.Reason)

			var rename, deploy []*ledger.Attempt
			read(func(r ledger.Reader) error {
				var err error
				if rename, err = r.Attempts(id, 0); err != nil {
					return err
				}
				deploy, err = r.Attempts(id, 1)
				return err
			})
			envOf := func(a *ledger.Attempt) string {
				var o struct{ Environment map[string]string }
				require.NoError(t, json.Unmarshal(a.Output, &o))
				require.Equal(t, a.Environment, o.Environment, "the attempt records the values its request carried")
				return o.Environment["head"]
			}
			require.Equal(t, before, envOf(rename[0]))
			switch onDrift {
			case "restart:rename":
				require.Len(t, rename, 2, "rename ran again from the start")
				require.Equal(t, after, envOf(rename[1]))
			default:
				require.Len(t, rename, 1, "rename's commit is kept")
			}
			require.Len(t, deploy, 1)
			require.Equal(t, after, envOf(deploy[0]))
		})
	}
}
