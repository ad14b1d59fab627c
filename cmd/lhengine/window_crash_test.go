package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lhengine/lhengine/internal/crashpoint"
	"github.com/lhengine/lhengine/internal/testpolicy"
	"github.com/lhengine/lhengine/ledger"
)

const windowTask = `
task "windows" {
  policies = ["tally"]
  step "each" {
    plugin      = "step.wasm"
    for_each    = range(60)
    concurrency = 8
    input       = { mode = "item" }
  }
}
`

var tallyPolicy = testpolicy.Insert("tally", `    after  = "each"
    every  = 7
    plugin = "../step.wasm"
    input  = { mode = "echo", from = each.value.from, to = each.value.to, items = each.value.items, seen = [for o in step.anchor.output : o.item.index] }`)

// TestSIGKILLWhileWindowsFillLosesAndRepeatsNothing kills a real lhengine
// process twice while a step inserted every 7 units runs beside a fan-out
// of 60, resumes it, and checks by the records that the windows cover every
// anchor item exactly once, in commit order, each read exactly the outputs
// of its items, and nothing committed ran again.
func TestSIGKILLWhileWindowsFillLosesAndRepeatsNothing(t *testing.T) {
	t.Parallel()
	bin := buildBinary(t)
	b := setupCLI(t, windowTask)
	require.NoError(t, os.MkdirAll(filepath.Join(b.dir, "policies"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(b.dir, "policies", "tally.hcl"), []byte(tallyPolicy), 0o644))

	out, killed := runCrashing(t, bin, b.home, crashpoint.UnitAfterCommit+"@12", nil, "run", filepath.Join(b.dir, "task.hcl"))
	require.True(t, killed, "the run must die at its 12th commit:\n%s", out)
	id := taskID(out)
	require.Len(t, id, 26, out)
	out, killed = runCrashing(t, bin, b.home, crashpoint.UnitBeforeCommit+"@15", nil, "resume", id)
	require.True(t, killed, "the resume must die before its 15th commit:\n%s", out)
	out, killed = runCrashing(t, bin, b.home, "", nil, "resume", id)
	require.False(t, killed)
	require.Contains(t, out, "succeeded: 69/69 units", "60 items and 9 windows")

	withStore(t, b.home, func(r ledger.Reader) {
		succeededTask(t, r, id)
		for step := range 2 {
			committedOnce(t, r, id, step)
		}
		raw, err := r.StepOutput(id, 1)
		require.NoError(t, err)
		var windows []struct {
			From, To    int
			Items, Seen []int
		}
		require.NoError(t, json.Unmarshal(raw, &windows))
		require.Len(t, windows, 9)
		covered := map[int]bool{}
		for i, w := range windows {
			require.Equal(t, 7*i, w.From)
			require.Equal(t, w.From+len(w.Items), w.To)
			require.Equal(t, w.Items, w.Seen, "window %d read the outputs of its own items, in its order", i)
			for _, it := range w.Items {
				require.False(t, covered[it], "item %d in two windows", it)
				covered[it] = true
			}
		}
		require.Len(t, covered, 60)
		require.Len(t, windows[8].Items, 4, "the last window holds the rest")
	})
}
