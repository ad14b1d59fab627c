package ledgertest

import (
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lhengine/lhengine/fault"
	"github.com/lhengine/lhengine/ledger"
)

// What agent tasks lean on: windows beside a fan-out, tolerated failures,
// environment facts, approvals that expire, failure budgets, and reading a
// long history in pages.

var _ = register("WindowUnitsRunBesideTheirAnchor", func(t *testing.T, open Factory) {
	b := newBench(t, open, planN(7))
	task := b.submit([]ledger.StepState{
		{Name: "list"},
		{Name: "each", FanOut: true, Limit: 2, Windows: 1},
		{Name: "summary", FanOut: true, Every: 3, Anchor: 1},
		{Name: "last"},
	})
	b.done(b.claim1("w"), `"listed"`)
	window := func(l ledger.Lease) ledger.WindowItem {
		var w ledger.WindowItem
		require.NoError(t, json.Unmarshal(l.Unit.Value, &w))
		return w
	}
	// Three anchor units commit (1, 0, 3): the first window opens beside
	// the anchor, which still runs.
	ls := b.claim("w", 2).Leases
	require.Len(t, ls, 2, "concurrency 2")
	b.done(ls[1], `"o1"`)
	b.done(ls[0], `"o0"`)
	ls = b.claim("w", 2).Leases
	require.Equal(t, []int{2, 3}, []int{ls[0].Item, ls[1].Item})
	b.done(ls[1], `"o3"`)
	held := ls[0]
	ls = b.claim("w", 10).Leases
	require.Len(t, ls, 2, "the window unit, and one anchor unit in the freed slot")
	require.Equal(t, 2, ls[0].Step, "the window unit comes first")
	require.Equal(t, ledger.WindowItem{From: 0, To: 3, Items: []int{1, 0, 3}}, window(ls[0]))
	b.read(func(r ledger.Reader) error {
		tk, err := r.Task(task.ID)
		require.NoError(t, err)
		out, err := r.WindowOutputs(tk, 1, window(ls[0]).Items, -1)
		require.NoError(t, err)
		require.JSONEq(t, `["o1","o0","o3"]`, string(out), "the window reads its items' outputs, in its order")
		return nil
	})
	b.done(ls[0], `"summary-0"`)
	b.done(ls[1], `"o4"`)
	b.done(held, `"o2"`)
	// Drive the rest to the end, whatever order units come in.
	for {
		c := b.claim("w", 10)
		if len(c.Leases) == 0 {
			break
		}
		for _, l := range c.Leases {
			b.done(l, fmt.Sprintf(`"s%d-i%d"`, l.Step, l.Item))
		}
	}
	got := b.task(task.ID)
	require.Equal(t, ledger.Succeeded, got.Status)
	b.read(func(r ledger.Reader) error {
		out, err := r.StepOutput(task.ID, 2)
		require.NoError(t, err)
		var summaries []string
		require.NoError(t, json.Unmarshal(out, &summaries))
		require.Len(t, summaries, 3, "7 items in windows of 3: 3, 3 and the last 1")
		require.Equal(t, "summary-0", summaries[0])
		return nil
	})
})

var _ = register("ToleratedFailuresLetAFanOutComplete", func(t *testing.T, open Factory) {
	b := newBench(t, open, planN(4))
	task := b.submit([]ledger.StepState{{Name: "each", FanOut: true, Limit: 4, AllowFailures: 1}, {Name: "after"}})
	ls := b.claim("w", 4).Leases
	require.Len(t, ls, 4)
	_, err := b.s.Commit(b.ctx, ledger.Result{Lease: ls[2], Failure: &ledger.Failure{Kind: fault.Trap, Message: "item 2 is bad"}})
	require.NoError(t, err)
	for _, l := range []ledger.Lease{ls[0], ls[1], ls[3]} {
		b.done(l, fmt.Sprint(l.Item))
	}
	got := b.task(task.ID)
	require.Equal(t, ledger.Running, got.Status, "one failure is tolerated")
	require.Equal(t, 1, got.Cursor)
	b.read(func(r ledger.Reader) error {
		out, err := r.StepOutput(task.ID, 0)
		require.NoError(t, err)
		require.JSONEq(t, `[0,1,3]`, string(out), "the output lists the items that succeeded")
		failed, err := r.FailedItems(task.ID)
		require.NoError(t, err)
		require.Len(t, failed, 1)
		require.Equal(t, 2, failed[0].Item)
		return nil
	})
})

var _ = register("ADriftedFactPausesTheTaskUncharged", func(t *testing.T, open Factory) {
	b := newBench(t, open, nil)
	task, _, err := b.s.Submit(b.ctx, ledger.NewTask{Name: "t", Steps: steps("a", "b"), Facts: map[string]string{"head": "aaa"}})
	require.NoError(t, err)
	b.read(func(r ledger.Reader) error {
		f, err := r.Facts(task.ID)
		require.NoError(t, err)
		require.Equal(t, map[string]string{"head": "aaa"}, f.Values)
		return nil
	})
	l := b.claim1("w")
	changes, run, _, err := b.s.CheckFacts(b.ctx, l, map[string]string{"head": "aaa"}, ledger.OnDrift{Pause: true, Name: "pause"})
	require.NoError(t, err)
	require.True(t, run)
	require.Empty(t, changes)
	b.done(l, `1`)

	l = b.claim1("w")
	changes, run, got, err := b.s.CheckFacts(b.ctx, l, map[string]string{"head": "bbb"}, ledger.OnDrift{Pause: true, Name: "pause"})
	require.NoError(t, err)
	require.False(t, run)
	require.Len(t, changes, 1)
	require.Equal(t, "bbb", changes[0].New)
	require.Equal(t, ledger.Paused, got.Status)
	require.Equal(t, ledger.PauseDrift, got.Pause.Kind)
	_, err = b.s.Commit(b.ctx, ledger.Result{Lease: l, Output: json.RawMessage(`2`)})
	require.ErrorIs(t, err, ledger.ErrLeaseLost, "the unit was given back")
	_, err = b.s.Resume(b.ctx, task.ID)
	require.NoError(t, err)
	again := b.claim1("w")
	require.Equal(t, l.Attempt, again.Attempt, "not charged")
	_, run, _, err = b.s.CheckFacts(b.ctx, again, map[string]string{"head": "bbb"}, ledger.OnDrift{Pause: true, Name: "pause"})
	require.NoError(t, err)
	require.True(t, run, "the new value is the recorded one now")
	require.Equal(t, ledger.Succeeded, b.done(again, `2`).Status)
	require.Contains(t, b.events(task.ID), ledger.EvDrift)
})

var _ = register("AnExpiredApprovalMakesItsUnitClaimable", func(t *testing.T, open Factory) {
	b := newBench(t, open, nil)
	task := b.submit(steps("deploy"))
	l := b.claim1("w")
	exp := b.clock.Now().Add(time.Hour)
	got, a, err := b.s.RequestApproval(b.ctx, l, ledger.Approval{Prompt: "ok?", Expires: exp, OnExpiry: "reject"})
	require.NoError(t, err)
	require.Equal(t, ledger.WaitingApproval, got.Status)
	c := b.claim("w", 1)
	require.Empty(t, c.Leases)
	require.Equal(t, exp, c.Wake, "the claim says when to look again")
	b.clock.Add(time.Hour)
	_, _, err = b.s.DecideApproval(b.ctx, task.ID, a.ID, true, "alice", "")
	require.ErrorIs(t, err, ledger.ErrApprovalClosed, "too late")
	l2 := b.claim1("w")
	require.Equal(t, a.ID, l2.Unit.Approval)
	closed, err := b.s.CloseApproval(b.ctx, l2, a.ID, ledger.ApprovalExpired, "")
	require.NoError(t, err)
	require.Equal(t, ledger.ApprovalExpired, closed.State)
})

var _ = register("ConsecutiveFailuresPauseAtTheirBudget", func(t *testing.T, open Factory) {
	b := newBench(t, open, planN(4))
	_, _, err := b.s.Submit(b.ctx, ledger.NewTask{Name: "t", Steps: []ledger.StepState{{Name: "each", FanOut: true, Limit: 4}},
		Budget: ledger.BudgetLimits{ConsecutiveFailures: 2}})
	require.NoError(t, err)
	ls := b.claim("w", 4).Leases
	require.Len(t, ls, 4)
	fail := func(l ledger.Lease) (*ledger.Task, error) {
		return b.s.Commit(b.ctx, ledger.Result{Lease: l, Failure: &ledger.Failure{Kind: fault.Trap, Message: "boom"}, RetryAt: b.clock.Now().Add(time.Minute)})
	}
	_, err = fail(ls[0])
	require.NoError(t, err)
	got, err := fail(ls[1])
	require.NoError(t, err)
	require.Equal(t, ledger.Paused, got.Status)
	require.Equal(t, ledger.BudgetConsecutiveFailures, got.Pause.Name)
	_, err = fail(ls[2])
	require.True(t, errors.Is(err, ledger.ErrBudgetReached), "a failure past the budget is refused: %v", err)
	require.NoError(t, b.s.Release(b.ctx, ls[2]))
	got, err = b.s.Commit(b.ctx, ledger.Result{Lease: ls[3], Output: json.RawMessage(`1`)})
	require.NoError(t, err, "a success in flight still commits")
	require.Equal(t, 2, got.Failures, "the refused failure is not counted")
})

var _ = register("ALongHistoryReadsInPages", func(t *testing.T, open Factory) {
	b := newBench(t, open, planN(30))
	task := b.submit([]ledger.StepState{{Name: "each", FanOut: true, Limit: 30}})
	for _, l := range b.claim("w", 30).Leases {
		_, err := b.s.Commit(b.ctx, ledger.Result{Lease: l, Output: json.RawMessage(`1`),
			Notes: []ledger.Note{{Kind: ledger.NoteFinding, Text: fmt.Sprintf("finding %d", l.Item)}}})
		require.NoError(t, err)
	}
	b.read(func(r ledger.Reader) error {
		all, err := r.Events(task.ID, 0, 0)
		require.NoError(t, err)
		var seen []uint64
		require.NoError(t, r.EachEvent(task.ID, 10, func(e *ledger.Event) bool {
			seen = append(seen, e.Seq)
			return len(seen) < 5
		}))
		require.Equal(t, []uint64{10, 11, 12, 13, 14}, seen, "EachEvent starts where asked and stops when told")
		require.Greater(t, len(all), 30)

		var texts []string
		q := ledger.NoteQuery{Kind: ledger.NoteFinding, Limit: 12}
		for pages := 0; ; pages++ {
			require.Less(t, pages, 10)
			page, next, err := r.NotesPage(task.ID, q)
			require.NoError(t, err)
			for _, n := range page {
				texts = append(texts, n.Text)
			}
			if next == 0 {
				break
			}
			q.From = next
		}
		require.Len(t, texts, 30, "every note once across the pages")
		recent, err := r.RecentNotes(b.task(task.ID), 5, nil)
		require.NoError(t, err)
		require.Len(t, recent, 5)
		return nil
	})
})
