package main

import (
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lhengine/lhengine/internal/crashpoint"
	"github.com/lhengine/lhengine/ledger"
)

// TestBudgetUsageSurvivesSIGKILL: a 120-item fan-out under budget
// units = 50 is killed with SIGKILL twice on its way (after a commit,
// before one); the resume that reaches the budget pauses with exactly 50
// units committed and counted, exit code 3; a raise finishes it, and every
// item committed exactly once.
func TestBudgetUsageSurvivesSIGKILL(t *testing.T) {
	t.Parallel()
	bin := buildBinary(t)
	b := setupCLI(t, `
task "budgeted" {
  budget {
    units = 50
  }
  step "each" {
    plugin      = "step.wasm"
    for_each    = range(120)
    concurrency = 8
    input       = { mode = "item" }
  }
}
`)
	out, killed := runCrashing(t, bin, b.home, crashpoint.UnitAfterCommit+"@20", nil, "run", filepath.Join(b.dir, "task.hcl"))
	require.True(t, killed, out)
	id := taskID(out)
	require.Len(t, id, 26, out)
	usedAtKill := b.task(t, id).Budget.Units
	require.GreaterOrEqual(t, usedAtKill, int64(20))
	out, killed = runCrashing(t, bin, b.home, crashpoint.UnitBeforeCommit+"@10", nil, "resume", id)
	require.True(t, killed, out)
	tk := b.task(t, id)
	done, _ := tk.Progress()
	require.Equal(t, int64(done), tk.Budget.Units, "the usage is what committed: nothing counted twice or lost")

	code, rout, rerr := b.lh(t, "resume", id)
	require.Equal(t, 3, code, rout+rerr)
	require.Contains(t, rout, "budget units reached: 50 of 50")
	require.Contains(t, rout, "lhengine resume "+id+" --budget units=+50")
	tk = b.task(t, id)
	require.Equal(t, ledger.Paused, tk.Status)
	done, _ = tk.Progress()
	require.Equal(t, 50, done, "the pause came exactly at the limit")
	require.Equal(t, int64(50), tk.Budget.Units)

	code, rout, rerr = b.lh(t, "resume", id, "--budget", "units=+100")
	require.Equal(t, 0, code, rout+rerr)
	tk = b.task(t, id)
	require.Equal(t, ledger.Succeeded, tk.Status)
	require.Equal(t, int64(120), tk.Budget.Units)
	code, aout, aerr := b.lh(t, "-o", "json", "outputs", "--attempts", id)
	require.Equal(t, 0, code, aerr)
	var as []ledger.Attempt
	require.NoError(t, json.Unmarshal([]byte(aout), &as))
	committed := map[int]int{}
	for _, a := range as {
		if a.Failure == nil {
			committed[a.Item]++
		}
	}
	require.Len(t, committed, 120)
	for item, n := range committed {
		require.Equal(t, 1, n, "item %d committed %d times", item, n)
	}
}
