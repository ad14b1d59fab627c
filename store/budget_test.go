package store

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lhengine/lhengine/ledger"
)

func (b *testBundle) submitBudget(t *testing.T, steps []ledger.StepState, l ledger.BudgetLimits) *ledger.Task {
	t.Helper()
	task, _, err := b.s.Submit(b.ctx, ledger.NewTask{Name: "t", Steps: steps, Budget: l})
	require.NoError(t, err)
	return task
}

func (b *testBundle) claimN(t *testing.T, n int) []ledger.Lease {
	t.Helper()
	c, err := b.s.Claim(b.ctx, ledger.ClaimRequest{Owner: b.s.Owner("w"), Max: n, LeaseFor: 30 * time.Second})
	require.NoError(t, err)
	return c.Leases
}

// TestUnitsBudgetPausesAtItsLimit: with units = 5, no more than five units
// are ever leased; the fifth commit pauses the task (budget units, 5 of
// 5), the fourth warned (80%); resume is refused until a raise, recorded
// with who; then exactly the raised number more run.
func TestUnitsBudgetPausesAtItsLimit(t *testing.T) {
	t.Parallel()
	b := setup(t, fanOutPlanner(10))
	task := b.submitBudget(t, []ledger.StepState{{Name: "each", FanOut: true, Limit: 10}}, ledger.BudgetLimits{Units: 5})
	ls := b.claimN(t, 10)
	require.Len(t, ls, 5, "the units budget bounds the claim")
	for _, l := range ls {
		task = b.done(t, l, `1`)
	}
	require.Equal(t, ledger.Paused, task.Status)
	require.Equal(t, ledger.PauseBudget, task.Pause.Kind)
	require.Equal(t, ledger.BudgetUnits, task.Pause.Name)
	require.Equal(t, 5.0, task.Pause.Used)
	require.Equal(t, 5.0, task.Pause.Limit)
	require.Equal(t, "budget units reached: 5 of 5", task.Reason)
	require.Len(t, b.events(t, task.ID, ledger.EvBudgetWarning), 1, "one warning at 80%")
	require.Empty(t, b.claimN(t, 10))

	_, err := b.s.Resume(b.ctx, task.ID)
	require.ErrorIs(t, err, ledger.ErrBudgetReached, "a resume without a raise would pause again at once")

	r, err := ledger.ParseBudgetRaise("units=+3")
	require.NoError(t, err)
	_, err = b.s.RaiseBudgets(b.ctx, task.ID, []ledger.BudgetRaise{r}, "alice")
	require.NoError(t, err)
	raised := b.events(t, task.ID, ledger.EvBudgetRaised)
	require.Len(t, raised, 1)
	require.Equal(t, "alice", raised[0].Owner)
	require.Contains(t, raised[0].Message, "budget units raised by alice from 5 to 8")
	task, err = b.s.Resume(b.ctx, task.ID)
	require.NoError(t, err)
	require.Equal(t, ledger.Running, task.Status)
	ls = b.claimN(t, 10)
	require.Len(t, ls, 3)
	for _, l := range ls {
		task = b.done(t, l, `1`)
	}
	require.Equal(t, ledger.Paused, task.Status)
	require.Equal(t, int64(8), task.Budget.Units)
}

// TestConsecutiveFailuresBudget: the second failure in a row pauses the
// task; a failure past
// consecutive_failures is refused (ErrBudgetReached) and changes nothing;
// the lease can then be given back uncharged.
func TestConsecutiveFailuresBudget(t *testing.T) {
	t.Parallel()
	b := setup(t, fanOutPlanner(4))
	b.submitBudget(t, []ledger.StepState{{Name: "each", FanOut: true, Limit: 4}}, ledger.BudgetLimits{ConsecutiveFailures: 2})
	ls := b.claimN(t, 4)
	require.Len(t, ls, 4)
	fail := func(l ledger.Lease) (*ledger.Task, error) {
		return b.s.Commit(b.ctx, ledger.Result{Lease: l, Failure: &ledger.Failure{Kind: "trap", Message: "boom"}, RetryAt: b.clock.Now().Add(time.Minute)})
	}
	_, err := fail(ls[0])
	require.NoError(t, err)
	task, err := fail(ls[1])
	require.NoError(t, err)
	require.Equal(t, ledger.Paused, task.Status)
	require.Equal(t, ledger.BudgetConsecutiveFailures, task.Pause.Name)
	_, err = fail(ls[2])
	require.True(t, errors.Is(err, ledger.ErrBudgetReached), "%v", err)
	require.NoError(t, b.s.Release(b.ctx, ls[2]))
	task, err = b.s.Commit(b.ctx, ledger.Result{Lease: ls[3], Output: []byte(`1`)})
	require.NoError(t, err, "a success in flight still commits")
	require.Equal(t, 2, task.Failures, "the refused failure is not counted")
}

// TestRepairMaxPauses: a step's own repair.max reached pauses the task
// (reason repairs, the step) instead of failing it; the unit is ready
// again; a raise of repairs lets the next repair through.
func TestRepairMaxPauses(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.submit(t, plainSteps("a", "b"))
	l := b.claim1(t, "w")
	b.done(t, l, `1`)
	l = b.claim1(t, "w")
	task, err := b.s.Commit(b.ctx, ledger.Result{Lease: l, Repair: &ledger.Repair{RestartFrom: 0, Max: 0, Reason: "bad"}})
	require.NoError(t, err)
	require.Equal(t, ledger.Paused, task.Status, "repair.max reached pauses, never fails")
	require.Equal(t, ledger.PauseRepairs, task.Pause.Kind)
	require.Equal(t, "b", task.Pause.Name)
	require.Zero(t, task.Repairs)

	r, err := ledger.ParseBudgetRaise("repairs=+1")
	require.NoError(t, err)
	_, err = b.s.RaiseBudgets(b.ctx, task.ID, []ledger.BudgetRaise{r}, "bob")
	require.NoError(t, err)
	_, err = b.s.Resume(b.ctx, task.ID)
	require.NoError(t, err)
	l = b.claim1(t, "w")
	require.Equal(t, 1, l.Step, "the unit that asked is ready again")
	task, err = b.s.Commit(b.ctx, ledger.Result{Lease: l, Repair: &ledger.Repair{RestartFrom: 0, Max: 0, Reason: "bad"}})
	require.NoError(t, err)
	require.Equal(t, ledger.Running, task.Status, "the raise let one repair through")
	require.Equal(t, 1, task.Repairs)
	require.Equal(t, 0, task.Cursor)
}

// TestWallTimeBudget: only time with a unit leased counts; time while
// paused or with nothing leased does not; the commit that reaches the
// limit pauses the task.
func TestWallTimeBudget(t *testing.T) {
	t.Parallel()
	b := setup(t, fanOutPlanner(5))
	b.submitBudget(t, []ledger.StepState{{Name: "each", FanOut: true, Limit: 1}}, ledger.BudgetLimits{WallTime: 10 * time.Minute})
	b.clock.Add(time.Hour) // queued, nothing leased: not counted
	l := b.claimN(t, 1)[0]
	b.clock.Add(4 * time.Minute)
	task := b.done(t, l, `1`)
	require.Equal(t, 4*time.Minute, task.Budget.WallTime)
	b.clock.Add(time.Hour) // nothing leased
	l = b.claimN(t, 1)[0]
	b.clock.Add(5 * time.Minute)
	_, err := b.s.PauseTask(b.ctx, task.ID, ledger.PauseReason{Kind: ledger.PauseOperator})
	require.NoError(t, err)
	b.clock.Add(time.Hour) // paused: not counted, the unit in flight neither
	task = b.done(t, l, `1`)
	require.Equal(t, 9*time.Minute, task.Budget.WallTime)
	_, err = b.s.Resume(b.ctx, task.ID)
	require.NoError(t, err)
	l = b.claimN(t, 1)[0]
	b.clock.Add(2 * time.Minute)
	task = b.done(t, l, `1`)
	require.Equal(t, ledger.Paused, task.Status)
	require.Equal(t, ledger.BudgetWallTime, task.Pause.Name)
	require.Equal(t, "budget wall_time reached: 11m0s of 10m0s", task.Reason)
}

func TestParseBudgetRaise(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]ledger.BudgetRaise{
		"units=60000":   {Name: ledger.BudgetUnits, Value: 60000},
		"wall_time=+2h": {Name: ledger.BudgetWallTime, Value: 7200, Delta: true},
		"cost=2.5":      {Name: ledger.BudgetCost, Value: 2.5},
	} {
		got, err := ledger.ParseBudgetRaise(in)
		require.NoError(t, err, in)
		require.Equal(t, want, got, in)
	}
	for in, msg := range map[string]string{
		"unit=5":        `no budget named "unit"`,
		"units":         "NAME=VALUE",
		"units=x":       "whole number",
		"wall_time=+2x": "duration",
		"units=0":       "above 0",
	} {
		_, err := ledger.ParseBudgetRaise(in)
		require.ErrorContains(t, err, msg, in)
	}
}

// TestCostBudgetPausesAtTheCallThatReachesIt: the model call whose cost
// reaches the budget pauses the task in its own transaction; the units in
// flight still commit; nothing more is claimed.
func TestCostBudgetPausesAtTheCallThatReachesIt(t *testing.T) {
	t.Parallel()
	b := setup(t, fanOutPlanner(4))
	task := b.submitBudget(t, []ledger.StepState{{Name: "each", FanOut: true, Limit: 4}}, ledger.BudgetLimits{Cost: 1})
	ls := b.claimN(t, 2)
	require.Len(t, ls, 2)
	call := func(l ledger.Lease, cost float64) {
		_, recorded, err := b.s.RecordModelCall(b.ctx, l, &ledger.ModelCall{Task: l.Task, Step: l.Step, Item: l.Item, Key: "k",
			RequestSHA256: "sum", Model: "m", Response: []byte(`{}`), Cost: cost, Attempt: l.Attempt})
		require.NoError(t, err)
		require.True(t, recorded)
	}
	call(ls[0], 0.6)
	got, err := b.s.Task(b.ctx, task.ID)
	require.NoError(t, err)
	require.Equal(t, ledger.Running, got.Status)
	call(ls[1], 0.5)
	got, err = b.s.Task(b.ctx, task.ID)
	require.NoError(t, err)
	require.Equal(t, ledger.Paused, got.Status)
	require.Equal(t, ledger.BudgetCost, got.Pause.Name)
	require.InDelta(t, 1.1, got.Pause.Used, 1e-9)
	require.Len(t, b.events(t, task.ID, ledger.EvBudgetWarning), 0, "reached at once: the pause says it")
	for _, l := range ls {
		got = b.done(t, l, `1`)
	}
	require.Equal(t, 2, got.Steps[0].Done, "the units in flight committed")
	require.Empty(t, b.claimN(t, 4))
}
