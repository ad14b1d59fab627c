package engine_test

import (
	"encoding/json"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lhengine/lhengine/engine"
	"github.com/lhengine/lhengine/internal/testgate"
	"github.com/lhengine/lhengine/internal/testpolicy"
	"github.com/lhengine/lhengine/internal/testwasm"
	"github.com/lhengine/lhengine/ledger"
)

// TestEveryInsertRunsWhileItsAnchorRuns: a policy inserts a step every 2
// committed units of a gated fan-out of 5. Its first window unit commits
// while the anchor's next units are still held at the gate, reading exactly
// the two outputs of its window; the rest follow, the last window shorter,
// and the task's output is still the anchor's.
func TestEveryInsertRunsWhileItsAnchorRuns(t *testing.T) {
	t.Parallel()
	g := testgate.New(t)
	b := setupGated(t, `task "windows" {
  policies = ["tally"]
`+g.Step("each", "gate.wasm", 5, 2)+`}`)
	writeFile(t, filepath.Join(b.dir, "policies", "tally.hcl"), testpolicy.Insert("tally", `    after  = "each"
    every  = 2
    plugin = "../step.wasm"
    input  = { mode = "echo", window = each.key, from = each.value.from, to = each.value.to, items = [for o in step.anchor.output : o.item] }`))
	task := b.submit(t, nil)
	worked := make(chan error, 1)
	go func() {
		worked <- b.e.Work(b.ctx, engine.WorkOptions{Task: task.ID, Concurrency: 4, ExitWhenIdle: true})
	}()

	arrive := func(n int) {
		t.Helper()
		for range n {
			select {
			case <-g.Arrived():
			case err := <-worked:
				t.Fatalf("Work returned early: %v", err)
			}
		}
	}
	steps := func() []ledger.StepState {
		t.Helper()
		got, err := b.e.Task(b.ctx, task.ID)
		require.NoError(t, err)
		return got.Steps
	}
	arrive(2)
	g.Release(2)
	arrive(2) // items 2 and 3 are held at the gate
	for {
		changed := b.e.Changed()
		if st := steps(); st[1].Done == 1 {
			require.Equal(t, "tally.tally@each", st[1].Name)
			require.Equal(t, 2, st[0].Done, "the anchor is held at its third and fourth items")
			require.Equal(t, 2, st[0].Leased)
			break
		}
		select {
		case <-changed:
		case err := <-worked:
			t.Fatalf("Work returned early: %v", err)
		case <-time.After(time.Minute):
			t.Fatal("the first window unit did not commit while its anchor was held")
		}
	}
	g.Open()
	require.NoError(t, <-worked)
	got, err := b.e.Task(b.ctx, task.ID)
	require.NoError(t, err)
	require.Equal(t, ledger.Succeeded, got.Status, got.Reason)

	var windows []struct {
		Window, From, To int
		Items            []int
	}
	require.NoError(t, json.Unmarshal([]byte(b.output(t, task.ID, "tally.tally@each")), &windows))
	require.Len(t, windows, 3)
	seen := map[int]bool{}
	for i, w := range windows {
		require.Equal(t, i, w.Window)
		require.Equal(t, 2*i, w.From)
		require.Equal(t, w.From+len(w.Items), w.To)
		for _, it := range w.Items {
			require.False(t, seen[it], "item %d in two windows", it)
			seen[it] = true
		}
	}
	require.ElementsMatch(t, []int{0, 1}, windows[0].Items)
	require.Len(t, windows[2].Items, 1, "the last window holds the rest")
	require.Len(t, seen, 5)
	var out []map[string]any
	require.NoError(t, json.Unmarshal(got.Output, &out))
	require.Len(t, out, 5, "the task's output is the anchor's, not the window step's")
}

// TestPeriodicSummaryEveryFiftyUnits runs the library's periodic-summary@2
// with the summary example plugin over a fan-out of 120 items: a summary
// for units 1-50, 51-100 and 101-120 of the fan-out, and one for the last
// step's single unit, each recorded as a progress finding.
func TestPeriodicSummaryEveryFiftyUnits(t *testing.T) {
	t.Parallel()
	b := setup(t, `
task "long" {
  step "each" {
    plugin      = "step.wasm"
    for_each    = range(120)
    concurrency = 4
    input       = { mode = "item" }
  }
  step "done" {
    plugin = "step.wasm"
    input  = { mode = "echo", n = length(step.each.output) }
  }
}`)
	root := testwasm.ModuleRoot(t)
	testwasm.Copy(t, testwasm.BuildGo(t, filepath.Join(root, "plugins/examples/summary")), filepath.Join(b.dir, "summary.wasm"))
	writeFile(t, filepath.Join(b.dir, "policies", "periodic-summary.hcl"),
		library(t, "periodic-summary", map[string]string{"../plugins/examples/summary/summary.wasm": "../summary.wasm"}))
	task, _, err := b.e.Submit(b.ctx, filepath.Join(b.dir, "task.hcl"), engine.SubmitOptions{Policies: []string{"periodic-summary@2"}})
	require.NoError(t, err)
	task = b.work(t, task.ID)
	require.Equal(t, ledger.Succeeded, task.Status, task.Reason)
	var names []string
	for _, s := range task.Steps {
		names = append(names, s.Name)
	}
	require.Equal(t, []string{"each", "periodic-summary.summary@each", "done", "periodic-summary.summary@done"}, names)
	require.JSONEq(t, `{"mode":"echo","n":120}`, string(task.Output))
	require.JSONEq(t, `[
		"units 1-50 of step each produced a list of 50 items",
		"units 51-100 of step each produced a list of 50 items",
		"units 101-120 of step each produced a list of 20 items"
	]`, b.output(t, task.ID, "periodic-summary.summary@each"))
	require.JSONEq(t, `["unit 1 of step done produced a list of 1 item"]`, b.output(t, task.ID, "periodic-summary.summary@done"))
	var notes []ledger.Note
	require.NoError(t, b.e.Read(func(r ledger.Reader) error {
		notes, err = r.Notes(task.ID)
		return err
	}))
	require.Len(t, notes, 4)
	for _, n := range notes {
		require.Contains(t, n.Text, " of step ")
	}
}
