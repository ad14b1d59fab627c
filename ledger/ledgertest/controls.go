package ledgertest

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lhengine/lhengine/fault"
	"github.com/lhengine/lhengine/ledger"
)

// Controls: cancel, retry, pause and resume, budgets, approvals.

var _ = register("CancelFencesTheUnitsInFlight", func(t *testing.T, open Factory) {
	b := newBench(t, open, nil)
	task := b.submit(steps("a"))
	l := b.claim1("w")
	got, err := b.s.Cancel(b.ctx, task.ID, "changed my mind")
	require.NoError(t, err)
	require.Equal(t, ledger.Cancelled, got.Status)
	_, err = b.s.Commit(b.ctx, ledger.Result{Lease: l, Output: json.RawMessage(`1`)})
	require.ErrorIs(t, err, ledger.ErrLeaseLost)
	_, err = b.s.Heartbeat(b.ctx, l, time.Minute)
	require.ErrorIs(t, err, ledger.ErrLeaseLost)
	_, err = b.s.Cancel(b.ctx, task.ID, "")
	require.ErrorIs(t, err, ledger.ErrTerminal)
	require.Empty(t, b.claim("w", 1).Leases)
	_, err = b.s.Cancel(b.ctx, "no-such-task", "")
	require.ErrorIs(t, err, ledger.ErrNotFound)
})

var _ = register("RetryReopensAFailedTaskKeepingEarlierOutputs", func(t *testing.T, open Factory) {
	b := newBench(t, open, nil)
	task := b.submit(steps("a", "b"))
	b.done(b.claim1("w"), `"a-out"`)
	_, err := b.s.Commit(b.ctx, ledger.Result{Lease: b.claim1("w"), Failure: &ledger.Failure{Kind: fault.Trap, Message: "boom"}})
	require.NoError(t, err)
	require.Equal(t, ledger.Failed, b.task(task.ID).Status)
	got, err := b.s.Retry(b.ctx, task.ID, -1, "alice")
	require.NoError(t, err)
	require.False(t, got.Status.Terminal())
	l := b.claim1("w")
	require.Equal(t, 1, l.Step, "the retry starts at the failed step")
	require.Equal(t, ledger.Succeeded, b.done(l, `"b-out"`).Status)
	b.read(func(r ledger.Reader) error {
		out, err := r.StepOutput(task.ID, 0)
		require.NoError(t, err)
		require.JSONEq(t, `"a-out"`, string(out))
		return nil
	})
	require.Contains(t, b.events(task.ID), ledger.EvRetried)
	_, err = b.s.Retry(b.ctx, task.ID, -1, "alice")
	require.Error(t, err, "a succeeded task is not retried")
})

var _ = register("APausedTaskIsNotClaimedAndItsUnitInFlightCommits", func(t *testing.T, open Factory) {
	b := newBench(t, open, planN(3))
	task := b.submit([]ledger.StepState{{Name: "each", FanOut: true, Limit: 3}})
	l := b.claim1("w")
	got, err := b.s.PauseTask(b.ctx, task.ID, ledger.PauseReason{Kind: ledger.PauseOperator, By: "alice", Note: "maintenance"})
	require.NoError(t, err)
	require.Equal(t, ledger.Paused, got.Status)
	require.Equal(t, "alice", got.Pause.By)
	require.Empty(t, b.claim("w", 3).Leases, "nothing is claimed while paused")
	got, err = b.s.Commit(b.ctx, ledger.Result{Lease: l, Output: json.RawMessage(`1`)})
	require.NoError(t, err, "the unit in flight still commits")
	require.Equal(t, ledger.Paused, got.Status)
	got, err = b.s.ResumeAs(b.ctx, task.ID, "bob", "cli")
	require.NoError(t, err)
	require.Equal(t, ledger.Running, got.Status)
	require.Nil(t, got.Pause)
	require.Len(t, b.claim("w", 3).Leases, 2)
	ev := b.events(task.ID)
	require.Contains(t, ev, ledger.EvPaused)
	require.Contains(t, ev, ledger.EvResumed)
})

var _ = register("AUnitPausesItsTask", func(t *testing.T, open Factory) {
	b := newBench(t, open, nil)
	task := b.submit(steps("a"))
	l := b.claim1("w")
	got, err := b.s.PauseUnit(b.ctx, l, ledger.PauseReason{Kind: ledger.PauseDrift, Name: "git_head"})
	require.NoError(t, err)
	require.Equal(t, ledger.Paused, got.Status)
	require.Equal(t, 0, b.task(task.ID).Leases, "the pausing unit is given back")
	_, err = b.s.Resume(b.ctx, task.ID)
	require.NoError(t, err)
	again := b.claim1("w")
	require.Equal(t, l.Attempt+1, again.Attempt, "the next lease is the next attempt")
	require.Equal(t, l.Try, again.Try, "but the same try of the step's retry budget")
})

var _ = register("AUnitsBudgetPausesAndARaiseLetsItGoOn", func(t *testing.T, open Factory) {
	b := newBench(t, open, planN(6))
	task, _, err := b.s.Submit(b.ctx, ledger.NewTask{Name: "t", Steps: []ledger.StepState{{Name: "each", FanOut: true, Limit: 6}},
		Budget: ledger.BudgetLimits{Units: 4}})
	require.NoError(t, err)
	c := b.claim("w", 6)
	require.Len(t, c.Leases, 4, "the units budget bounds the claim")
	for _, l := range c.Leases {
		task = b.done(l, `1`)
	}
	require.Equal(t, ledger.Paused, task.Status)
	require.Equal(t, ledger.PauseBudget, task.Pause.Kind)
	require.Equal(t, ledger.BudgetUnits, task.Pause.Name)
	_, err = b.s.Resume(b.ctx, task.ID)
	require.ErrorIs(t, err, ledger.ErrBudgetReached, "a resume without a raise would pause again at once")
	raise, err := ledger.ParseBudgetRaise("units=+2")
	require.NoError(t, err)
	_, err = b.s.RaiseBudgets(b.ctx, task.ID, []ledger.BudgetRaise{raise}, "alice")
	require.NoError(t, err)
	_, err = b.s.Resume(b.ctx, task.ID)
	require.NoError(t, err)
	c = b.claim("w", 6)
	require.Len(t, c.Leases, 2)
	for _, l := range c.Leases {
		task = b.done(l, `1`)
	}
	require.Equal(t, ledger.Succeeded, task.Status)
	require.Contains(t, b.events(task.ID), ledger.EvBudgetRaised)
})

var _ = register("AnApprovalHoldsItsUnitUntilDecided", func(t *testing.T, open Factory) {
	b := newBench(t, open, planN(2))
	task := b.submit([]ledger.StepState{{Name: "each", FanOut: true, Limit: 2}})
	c := b.claim("w", 2)
	require.Len(t, c.Leases, 2)
	asked, other := c.Leases[0], c.Leases[1]
	got, a, err := b.s.RequestApproval(b.ctx, asked, ledger.Approval{Source: ledger.ApprovalFromStep, Prompt: "deploy?", Subject: json.RawMessage(`{"n":0}`)})
	require.NoError(t, err)
	require.Equal(t, ledger.ApprovalPending, a.State)
	require.Equal(t, 1, got.Waiting)
	got = b.done(other, `1`)
	require.Equal(t, ledger.WaitingApproval, got.Status, "nothing else can run")
	require.Empty(t, b.claim("w", 2).Leases, "a waiting unit without an expiry is never claimed")

	d, got, err := b.s.DecideApproval(b.ctx, task.ID, a.ID, true, "alice", "go")
	require.NoError(t, err)
	require.Equal(t, ledger.ApprovalApproved, d.State)
	require.Equal(t, ledger.Running, got.Status)
	_, _, err = b.s.DecideApproval(b.ctx, task.ID, a.ID, false, "bob", "")
	require.ErrorIs(t, err, ledger.ErrApprovalClosed, "a decision is taken once")

	l := b.claim1("w")
	require.Equal(t, asked.Item, l.Item)
	require.Equal(t, asked.Attempt, l.Attempt, "the attempt on the decision has the given-back number")
	require.Equal(t, a.ID, l.Unit.Approval)
	require.NoError(t, b.s.UseApproval(b.ctx, l, a.ID))
	require.Equal(t, ledger.Succeeded, b.done(l, `1`).Status)
	b.read(func(r ledger.Reader) error {
		as, err := r.Approvals(task.ID)
		require.NoError(t, err)
		require.Len(t, as, 1)
		require.Equal(t, "alice", as[0].DecidedBy)
		return nil
	})
})

var _ = register("TaskListPagesInSubmissionOrder", func(t *testing.T, open Factory) {
	b := newBench(t, open, nil)
	var ids, bs []string
	for i := range 7 {
		name := "a"
		if i%3 == 1 {
			name = "b"
		}
		task, _, err := b.s.Submit(b.ctx, ledger.NewTask{Name: name, Steps: steps("x", "y")})
		require.NoError(t, err)
		ids = append(ids, task.ID)
		if name == "b" {
			bs = append(bs, task.ID)
		}
		b.clock.Add(time.Millisecond) // ids follow submission
	}
	list := func(q ledger.TaskQuery) (got []string, total int) {
		b.read(func(r ledger.Reader) error {
			page, n, err := r.TaskList(q)
			for _, task := range page {
				require.Len(t, task.Steps, 2, "a task of the page is read whole")
				got = append(got, task.ID)
			}
			total = n
			return err
		})
		return got, total
	}
	got, total := list(ledger.TaskQuery{Limit: 3})
	require.Equal(t, ids[:3], got)
	require.Equal(t, 7, total)
	got, total = list(ledger.TaskQuery{Newest: true, Limit: 2})
	require.Equal(t, []string{ids[6], ids[5]}, got)
	require.Equal(t, 7, total)
	got, total = list(ledger.TaskQuery{})
	require.Equal(t, ids, got)
	require.Equal(t, 7, total)
	isB := func(task *ledger.Task) bool { return task.Name == "b" }
	got, total = list(ledger.TaskQuery{Limit: 1, Match: isB})
	require.Equal(t, bs[:1], got)
	require.Equal(t, len(bs), total)
	got, total = list(ledger.TaskQuery{Newest: true, Match: isB})
	require.Equal(t, []string{bs[1], bs[0]}, got)
	require.Equal(t, 2, total)
})
