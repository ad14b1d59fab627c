package budget

import (
	"context"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/stretchr/testify/require"

	"github.com/lhengine/lhengine/ledger"
	"github.com/lhengine/lhengine/store/internal/index"
	"github.com/lhengine/lhengine/store/internal/kv"
	"github.com/lhengine/lhengine/store/internal/outbox"
)

func setup(t *testing.T) (*Budgets, *index.Index) {
	t.Helper()
	db, err := badger.Open(badger.DefaultOptions("").WithInMemory(true).WithLogger(nil))
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, db.Close()) })
	d := kv.New(db, nil)
	x := index.New()
	update := func(_ context.Context, fn func(*kv.Tx) error) error {
		txn := db.NewTransaction(true)
		defer txn.Discard()
		tx := d.Tx(txn, true, nil)
		if err := tx.Run(fn); err != nil {
			return err
		}
		if err := txn.Commit(); err != nil {
			return err
		}
		for _, fn := range tx.Afters() {
			fn(x)
		}
		return nil
	}
	now := time.Unix(1000, 0)
	ev := &outbox.Events{Update: update, Now: func() time.Time { return now }, Notify: func() {}}
	return &Budgets{Update: update, Events: ev}, x
}

// TestTickWall: the wall time counts while a unit of a runnable task is
// leased, and stops while none is.
func TestTickWall(t *testing.T) {
	t.Parallel()
	t0 := time.Unix(0, 0)
	task := &ledger.Task{Status: ledger.Running, Leases: 1, Budget: &ledger.Budget{}}
	TickWall(task, t0)
	TickWall(task, t0.Add(time.Minute))
	require.Equal(t, time.Minute, task.Budget.WallTime)
	task.Leases = 0
	TickWall(task, t0.Add(2*time.Minute))
	TickWall(task, t0.Add(time.Hour))
	require.Equal(t, 2*time.Minute, task.Budget.WallTime, "no lease: not counted")
	TickWall(&ledger.Task{}, t0) // no budget: nothing
}

// TestRefuseAndRoom: a result a reached budget no longer allows is
// refused; a claim's room is the units budget left.
func TestRefuseAndRoom(t *testing.T) {
	t.Parallel()
	task := &ledger.Task{ID: "T", Leases: 2, ConsecutiveFailures: 3, Budget: &ledger.Budget{Units: 5,
		Limits: ledger.BudgetLimits{Units: 10, ConsecutiveFailures: 3}}}
	require.Equal(t, 3, UnitsRoom(task))
	require.NoError(t, Refuse(task, &ledger.Result{}))
	require.ErrorIs(t, Refuse(task, &ledger.Result{Failure: &ledger.Failure{}}), ledger.ErrBudgetReached)
	require.NoError(t, Refuse(task, &ledger.Result{Repair: &ledger.Repair{}}))
	task.Budget.Units = 10
	require.ErrorIs(t, Refuse(task, &ledger.Result{}), ledger.ErrBudgetReached)
	require.Zero(t, UnitsRoom(task))
	require.Equal(t, -1, UnitsRoom(&ledger.Task{}))
}

// TestCheckPausesAndWarns: a budget past 80% is warned of once; a reached
// one pauses the task and takes it out of the claim index.
func TestCheckPausesAndWarns(t *testing.T) {
	t.Parallel()
	b, x := setup(t)
	task := &ledger.Task{ID: "T", Status: ledger.Running, Steps: []ledger.StepState{{Name: "a"}},
		Budget: &ledger.Budget{Units: 8, Limits: ledger.BudgetLimits{Units: 10}}}
	x.AddActive("T")
	check := func() {
		require.NoError(t, b.Update(t.Context(), func(tx *kv.Tx) error {
			if err := b.Check(tx, task); err != nil {
				return err
			}
			return tx.SaveTask(task)
		}))
	}
	check()
	check()
	require.Equal(t, []string{ledger.BudgetUnits}, task.Budget.Warned)
	require.EqualValues(t, 1, task.NextEvent, "warned once")
	require.Equal(t, ledger.Running, task.Status)
	task.Budget.Units = 10
	check()
	require.Equal(t, ledger.Paused, task.Status)
	require.Equal(t, ledger.PauseBudget, task.Pause.Kind)
	require.Empty(t, x.Active)
}

// TestRaise: a raise by a delta, or to a value, above the usage; below it,
// or on a finished task, it is refused.
func TestRaise(t *testing.T) {
	t.Parallel()
	b, _ := setup(t)
	task := &ledger.Task{ID: "T", Status: ledger.Paused, Steps: []ledger.StepState{{Name: "a"}},
		Budget: &ledger.Budget{Units: 10, Limits: ledger.BudgetLimits{Units: 10}, Warned: []string{ledger.BudgetUnits}}}
	require.NoError(t, b.Update(t.Context(), func(tx *kv.Tx) error { return tx.SaveTask(task) }))
	got, err := b.Raise(t.Context(), "T", []ledger.BudgetRaise{{Name: ledger.BudgetUnits, Value: 5, Delta: true}}, "ann")
	require.NoError(t, err)
	require.EqualValues(t, 15, got.Budget.Limits.Units)
	require.Empty(t, got.Budget.Warned, "warned again at the new limit")
	require.Len(t, got.Steps, 1)
	_, err = b.Raise(t.Context(), "T", []ledger.BudgetRaise{{Name: ledger.BudgetUnits, Value: 9}}, "ann")
	require.ErrorIs(t, err, ledger.ErrBudgetReached)
	got, err = b.Raise(t.Context(), "T", []ledger.BudgetRaise{{Name: ledger.BudgetWallTime, Value: 60, Delta: true}}, "")
	require.NoError(t, err)
	require.Equal(t, time.Minute, got.Budget.Limits.WallTime, "from no limit: the usage plus the delta")

	require.NoError(t, b.Update(t.Context(), func(tx *kv.Tx) error {
		got.Status = ledger.Succeeded
		return tx.SaveTask(got)
	}))
	_, err = b.Raise(t.Context(), "T", []ledger.BudgetRaise{{Name: ledger.BudgetUnits, Value: 100}}, "ann")
	require.ErrorIs(t, err, ledger.ErrTerminal)
	require.ErrorContains(t, err, "task T has already succeeded: there is nothing to raise a budget of")
}
