package store

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lhengine/lhengine/ledger"
)

// windowSteps is list -> each (fan-out of n, concurrency 2) with a window
// step every 3 of its commits -> last.
func windowSteps() []ledger.StepState {
	return []ledger.StepState{
		{Name: "list"},
		{Name: "each", FanOut: true, Limit: 2, Windows: 1},
		{Name: "summary", FanOut: true, Every: 3, Anchor: 1},
		{Name: "last"},
	}
}

func claimAll(t *testing.T, s *Store, max int) []ledger.Lease {
	t.Helper()
	c, err := s.Claim(context.Background(), ledger.ClaimRequest{Owner: s.Owner("w"), Max: max, LeaseFor: 30 * time.Second})
	require.NoError(t, err)
	return c.Leases
}

func windowOf(t *testing.T, l ledger.Lease) ledger.WindowItem {
	t.Helper()
	var w ledger.WindowItem
	require.NoError(t, json.Unmarshal(l.Unit.Value, &w))
	return w
}

func TestWindowUnitsRunWhileTheirAnchorRuns(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ctx := context.Background()
	s, err := Open(dir, Options{Planner: fanOutPlanner(7)})
	require.NoError(t, err)
	task, _, err := s.Submit(ctx, ledger.NewTask{Name: "t", Steps: windowSteps()})
	require.NoError(t, err)
	commit := func(s *Store, l ledger.Lease, out string) *ledger.Task {
		t.Helper()
		task, err := s.Commit(ctx, ledger.Result{Lease: l, Output: json.RawMessage(out)})
		require.NoError(t, err)
		return task
	}
	ls := claimAll(t, s, 10)
	require.Len(t, ls, 1)
	commit(s, ls[0], `"listed"`)

	// Commit the anchor's items 1, 0, 3 (in that order): the third commit
	// closes the first window, whose unit is leased beside the anchor's.
	ls = claimAll(t, s, 2)
	require.Len(t, ls, 2, "concurrency 2")
	commit(s, ls[1], `"o1"`)
	commit(s, ls[0], `"o0"`)
	ls = claimAll(t, s, 2)
	require.Len(t, ls, 2)
	require.Equal(t, []int{2, 3}, []int{ls[0].Item, ls[1].Item})
	commit(s, ls[1], `"o3"`)
	held := ls[0] // item 2 stays leased

	ls = claimAll(t, s, 10)
	require.Len(t, ls, 2, "the window unit, ahead of the anchor's queue, plus one anchor unit in the freed slot")
	require.Equal(t, 2, ls[0].Step, "the window unit comes first")
	require.Nil(t, ls[0].Snapshot, "a window unit's worker reads the whole task")
	require.Equal(t, ledger.WindowItem{From: 0, To: 3, Items: []int{1, 0, 3}}, windowOf(t, ls[0]))
	require.NoError(t, s.Read(func(r ledger.Reader) error {
		tk, err := r.Task(task.ID)
		require.NoError(t, err)
		out, err := r.WindowOutputs(tk, 1, windowOf(t, ls[0]).Items, -1)
		require.NoError(t, err)
		require.JSONEq(t, `["o1","o0","o3"]`, string(out))
		return nil
	}))
	require.Equal(t, 1, ls[1].Step)
	require.Equal(t, 4, ls[1].Item)
	commit(s, ls[0], `"summary-0"`)
	commit(s, ls[1], `"o4"`)

	// A crash: the store is closed with item 2 leased and the window open
	// with item 4; the reopened store finds both.
	require.NoError(t, s.Close())
	s, err = Open(dir, Options{Planner: fanOutPlanner(7)})
	require.NoError(t, err)
	defer s.Close()
	commit(s, held, `"o2"`) // the lease of the earlier session is still valid: nobody took it
	var anchor []ledger.Lease
	for len(anchor) < 2 {
		for _, l := range claimAll(t, s, 10) {
			require.Equal(t, 1, l.Step)
			anchor = append(anchor, l)
		}
	}
	require.Equal(t, []int{5, 6}, []int{anchor[0].Item, anchor[1].Item})
	commit(s, anchor[0], `"o5"`)
	ls = claimAll(t, s, 10)
	require.Len(t, ls, 1)
	require.Equal(t, ledger.WindowItem{From: 3, To: 6, Items: []int{4, 2, 5}}, windowOf(t, ls[0]), "the window opened before the crash closed after it")
	w1 := ls[0]
	tk := commit(s, anchor[1], `"o6"`)
	require.Equal(t, 2, tk.Cursor, "the anchor completed: the cursor waits at the window step")
	require.Empty(t, claimAll(t, s, 10), "the last window waits for a slot: the window step's concurrency is 1")
	commit(s, w1, `"summary-1"`)
	ls = claimAll(t, s, 10)
	require.Len(t, ls, 1)
	require.Equal(t, ledger.WindowItem{From: 6, To: 7, Items: []int{6}}, windowOf(t, ls[0]), "the rest: a shorter last window")
	require.Empty(t, claimAll(t, s, 10), "the cursor stays until every window committed")
	tk = commit(s, ls[0], `"summary-2"`)
	require.Equal(t, 3, tk.Cursor)
	ls = claimAll(t, s, 10)
	require.Len(t, ls, 1)
	tk = commit(s, ls[0], `"done"`)
	require.Equal(t, ledger.Succeeded, tk.Status)
	require.JSONEq(t, `"done"`, string(tk.Output))
	require.NoError(t, s.Read(func(r ledger.Reader) error {
		out, err := r.StepOutput(task.ID, 2)
		require.NoError(t, err)
		require.JSONEq(t, `["summary-0","summary-1","summary-2"]`, string(out))
		return nil
	}))
}

func TestWindowStepLastGivesTheAnchorsOutputToTheTask(t *testing.T) {
	t.Parallel()
	b := setup(t, fanOutPlanner(2))
	b.submit(t, []ledger.StepState{{Name: "each", FanOut: true, Limit: 4, Windows: 1}, {Name: "w", FanOut: true, Every: 5, Anchor: 0}})
	for _, l := range claimAll(t, b.s, 10) {
		b.done(t, l, fmt.Sprintf(`"o%d"`, l.Item))
	}
	ls := claimAll(t, b.s, 10)
	require.Len(t, ls, 1)
	require.Equal(t, ledger.WindowItem{From: 0, To: 2, Items: []int{0, 1}}, windowOf(t, ls[0]))
	task := b.done(t, ls[0], `"sum"`)
	require.Equal(t, ledger.Succeeded, task.Status)
	require.JSONEq(t, `["o0","o1"]`, string(task.Output), "a window step observes; the task's output is its anchor's")
}

func TestEmptyAnchorLeavesItsWindowStepEmpty(t *testing.T) {
	t.Parallel()
	b := setup(t, fanOutPlanner(0))
	b.submit(t, []ledger.StepState{{Name: "a"}, {Name: "each", FanOut: true, Windows: 1}, {Name: "w", FanOut: true, Every: 2, Anchor: 1}, {Name: "z"}})
	b.done(t, b.claim1(t, "w"), `1`)
	l := b.claim1(t, "w")
	require.Equal(t, 3, l.Step, "no items: no windows, on to the next step")
	task := b.done(t, l, `"z"`)
	require.Equal(t, ledger.Succeeded, task.Status)
}

func TestRepairOfAWindowUnitRunsItsAnchorAgain(t *testing.T) {
	t.Parallel()
	b := setup(t, fanOutPlanner(2))
	task := b.submit(t, []ledger.StepState{{Name: "each", FanOut: true, Limit: 2, Windows: 1}, {Name: "w", FanOut: true, Every: 2, Anchor: 0}})
	for _, l := range claimAll(t, b.s, 10) {
		b.done(t, l, `"x"`)
	}
	ls := claimAll(t, b.s, 10)
	require.Len(t, ls, 1)
	tk, err := b.s.Commit(b.ctx, ledger.Result{Lease: ls[0], Repair: &ledger.Repair{RestartFrom: 1, Max: 1, Reason: "again"}})
	require.NoError(t, err)
	require.Equal(t, 0, tk.Cursor, "restarting a window step starts its anchor again")
	ls = claimAll(t, b.s, 10)
	require.Len(t, ls, 2)
	for _, l := range ls {
		require.Equal(t, 0, l.Step)
		b.done(t, l, `"y"`)
	}
	ls = claimAll(t, b.s, 10)
	require.Len(t, ls, 1)
	require.Equal(t, 2, ls[0].Unit.Pass)
	tk = b.done(t, ls[0], `"w"`)
	require.Equal(t, ledger.Succeeded, tk.Status)
	require.NoError(t, b.s.Read(func(r ledger.Reader) error {
		out, err := r.StepOutput(task.ID, 1)
		require.NoError(t, err)
		require.JSONEq(t, `["w"]`, string(out))
		return nil
	}))
}

func TestSubmitRefusesInconsistentWindowSteps(t *testing.T) {
	t.Parallel()
	b := setup(t, fanOutPlanner(1))
	for _, steps := range [][]ledger.StepState{
		{{Name: "a", Windows: 1}},
		{{Name: "a", Windows: 1}, {Name: "w", Every: 2, Anchor: 1}},
		{{Name: "a"}, {Name: "w", Every: 2}},
		{{Name: "a", Windows: 1}, {Name: "w", Every: ledger.MaxEvery + 1}},
	} {
		_, _, err := b.s.Submit(b.ctx, ledger.NewTask{Name: "t", Steps: steps})
		require.Error(t, err, "%+v", steps)
	}
}
