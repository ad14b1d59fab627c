package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lhengine/lhengine/internal/crashpoint"
	"github.com/lhengine/lhengine/ledger"
)

// buildBinary builds the real lhengine command once per test binary.
func buildBinary(t testing.TB) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "lhengine")
	cmd := exec.Command("go", "build", "-o", out, ".")
	cmd.Stderr = os.Stderr
	require.NoError(t, cmd.Run(), "go build")
	return out
}

// fanOutTask is a 200-item fan-out of the pipeline guest between two
// steps.
const fanOutTask = `
task "crashy" {
  step "list" {
    plugin = "step.wasm"
    input  = { mode = "echo", n = 200 }
  }
  step "each" {
    plugin      = "step.wasm"
    for_each    = range(step.list.output.n)
    concurrency = 8
    input       = { mode = "item" }
  }
  step "count" {
    plugin = "step.wasm"
    input  = { mode = "echo", units = length(step.each.output) }
  }
}
`

// runCrashing runs the lhengine binary on home with
// LHENGINE_CRASH_AT=crashAt ("" for none) and the variables in env, and
// returns its stdout and whether it died by SIGKILL. Any other way of
// failing fails the test.
func runCrashing(t *testing.T, bin, home, crashAt string, env []string, args ...string) (string, bool) {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"--home", home, "--log-level", "off"}, args...)...)
	cmd.Env = append(append(os.Environ(), "LHENGINE_CRASH_AT="+crashAt), env...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err == nil {
		return string(out), false
	}
	var ee *exec.ExitError
	require.ErrorAs(t, err, &ee)
	ws := ee.Sys().(syscall.WaitStatus)
	require.True(t, ws.Signaled() && ws.Signal() == syscall.SIGKILL, "lhengine %v failed on its own: %v\n%s%s", args, err, out, stderr.String())
	return string(out), true
}

// TestSIGKILLAtChosenPointsLosesAndRepeatsNothing runs a 200-unit fan-out
// in a real lhengine process, kills it with SIGKILL at chosen hits of
// durable boundaries (after a commit, before one, after another), resumes
// it each time, and checks by the committed records that it was killed
// exactly as planned and that every unit ran to completion exactly once.
func TestSIGKILLAtChosenPointsLosesAndRepeatsNothing(t *testing.T) {
	t.Parallel()
	bin := buildBinary(t)
	b := setupCLI(t, fanOutTask)

	lh := func(crashAt string, args ...string) (string, bool) {
		return runCrashing(t, bin, b.home, crashAt, nil, args...)
	}
	done := func(id string) int {
		d, _ := b.task(t, id).Progress()
		return d
	}

	// The first commit is the list step's; then the items'.
	out, killed := lh(crashpoint.UnitAfterCommit+"@5", "run", filepath.Join(b.dir, "task.hcl"))
	require.True(t, killed, "the run must die at its 5th commit:\n%s", out)
	id := taskID(out)
	require.Len(t, id, 26, out)
	require.GreaterOrEqual(t, done(id), 5, "the 5th commit was synced before the kill")
	kills := 1

	for _, at := range []string{crashpoint.UnitBeforeCommit + "@20", crashpoint.UnitAfterCommit + "@30"} {
		before := done(id)
		out, killed = lh(at, "resume", id)
		require.True(t, killed, "resume must die at %s:\n%s", at, out)
		kills++
		require.Greater(t, done(id), before, "the resume committed work before dying at %s", at)
		require.Less(t, done(id), 202, "the task was not finished when killed at %s", at)
	}
	out, killed = lh("", "resume", id)
	require.False(t, killed)
	require.Contains(t, out, "succeeded: 202/202 units")
	require.Equal(t, 3, kills)

	withStore(t, b.home, func(r ledger.Reader) {
		task := succeededTask(t, r, id)
		require.JSONEq(t, `{"mode":"echo","units":200}`, string(task.Output))
		require.Len(t, committedOnce(t, r, id, 1), 200)
		units, err := r.Units(id, 1)
		require.NoError(t, err)
		require.Len(t, units, 200)
		for _, u := range units {
			require.Equal(t, ledger.UnitDone, u.State)
		}
		out, err := r.StepOutput(id, 1)
		require.NoError(t, err)
		var items []struct {
			Item struct{ Index int } `json:"item"`
		}
		require.NoError(t, json.Unmarshal(out, &items))
		for i, it := range items {
			require.Equal(t, i, it.Item.Index, fmt.Sprintf("output %d out of order", i))
		}
		// Attempts beyond one per unit are the ones the kills abandoned:
		// one at least for the kill before a commit.
		require.Greater(t, task.Attempts, 202)
	})
}
