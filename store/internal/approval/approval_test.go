package approval

import (
	"context"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/stretchr/testify/require"

	"github.com/lhengine/lhengine/ledger"
	"github.com/lhengine/lhengine/store/internal/budget"
	"github.com/lhengine/lhengine/store/internal/index"
	"github.com/lhengine/lhengine/store/internal/kv"
	"github.com/lhengine/lhengine/store/internal/outbox"
)

type fixture struct {
	a   *Approvals
	db  *kv.DB
	x   *index.Index
	now time.Time
}

// setup is a store holding task T, running, one plain step whose unit is
// leased by the lease returned.
func setup(t *testing.T) (*fixture, ledger.Lease) {
	t.Helper()
	db, err := badger.Open(badger.DefaultOptions("").WithInMemory(true).WithLogger(nil))
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, db.Close()) })
	f := &fixture{db: kv.New(db, nil), x: index.New(), now: time.Unix(1000, 0)}
	update := func(_ context.Context, fn func(*kv.Tx) error) error {
		txn := db.NewTransaction(true)
		defer txn.Discard()
		tx := f.db.Tx(txn, true, nil)
		if err := tx.Run(fn); err != nil {
			return err
		}
		if err := txn.Commit(); err != nil {
			return err
		}
		for _, fn := range tx.Afters() {
			fn(f.x)
		}
		return nil
	}
	ev := &outbox.Events{Update: update, Now: func() time.Time { return f.now }, Notify: func() {}}
	f.a = &Approvals{Update: update, Events: ev, Budgets: &budget.Budgets{Update: update, Events: ev}}
	l := ledger.Lease{Task: "T", Owner: "s/w", Epoch: 1, Attempt: 1}
	require.NoError(t, update(t.Context(), func(tx *kv.Tx) error {
		task := &ledger.Task{ID: "T", Status: ledger.Running, Epoch: 1, Leases: 1, Attempts: 1,
			Steps: []ledger.StepState{{Name: "a", Pass: 1, Planned: true, Units: 1, Leased: 1, Limit: 1}}}
		u := ledger.Unit{Task: "T", Pass: 1, State: ledger.UnitLeased, Owner: l.Owner, Epoch: 1, Attempt: 1}
		if err := tx.PutJSON(kv.UnitKey("T", 0, 0), u); err != nil {
			return err
		}
		return tx.SaveTask(task)
	}))
	f.x.AddActive("T")
	return f, l
}

func (f *fixture) unit(t *testing.T) ledger.Unit {
	var u ledger.Unit
	require.NoError(t, f.db.View(func(tx *kv.Tx) error { return tx.GetJSON(kv.UnitKey("T", 0, 0), &u) }))
	return u
}

// TestRequestAndDecide: the unit waits, uncharged, and the task waits for
// approval when nothing else can run; a decision makes it ready again and
// closes the approval to any other.
func TestRequestAndDecide(t *testing.T) {
	t.Parallel()
	f, l := setup(t)
	ctx := t.Context()
	task, a, err := f.a.Request(ctx, l, ledger.Approval{Prompt: "ship it?"})
	require.NoError(t, err)
	require.Equal(t, "1", a.ID)
	require.Equal(t, ledger.WaitingApproval, task.Status)
	require.Zero(t, task.Attempts, "the attempt is given back")
	require.Equal(t, ledger.UnitWaiting, f.unit(t).State)
	require.Contains(t, task.Reason, "lhengine approve T 1")

	got, task, err := f.a.Decide(ctx, "T", "1", true, "ann", "ok")
	require.NoError(t, err)
	require.Equal(t, ledger.ApprovalApproved, got.State)
	require.Equal(t, ledger.Running, task.Status)
	require.Equal(t, ledger.UnitReady, f.unit(t).State)
	cands, _ := f.x.Candidates("T", f.now, 1, func(index.Ref) bool { return false })
	require.Len(t, cands, 1, "claimable again")
	_, _, err = f.a.Decide(ctx, "T", "1", false, "bob", "")
	require.ErrorIs(t, err, ledger.ErrApprovalClosed)
	_, _, err = f.a.Decide(ctx, "T", "9", false, "bob", "")
	require.ErrorIs(t, err, ledger.ErrNotFound)
}

// TestExpiry: a pending approval past its expiry takes no decision.
func TestExpiry(t *testing.T) {
	t.Parallel()
	f, l := setup(t)
	_, _, err := f.a.Request(t.Context(), l, ledger.Approval{Prompt: "p", Expires: f.now.Add(time.Hour)})
	require.NoError(t, err)
	f.now = f.now.Add(2 * time.Hour)
	_, _, err = f.a.Decide(t.Context(), "T", "1", true, "ann", "")
	require.ErrorIs(t, err, ledger.ErrApprovalClosed)
	require.ErrorContains(t, err, "expired")
}

// TestWaitEffect: a unit waiting for an effect to be settled, with nothing
// else of its task to run, pauses the task with the unit's reason; waking
// the unit makes it ready.
func TestWaitEffect(t *testing.T) {
	t.Parallel()
	f, l := setup(t)
	task, err := f.a.WaitEffect(t.Context(), l, "charge", "settle it: lhengine effects T")
	require.NoError(t, err)
	require.Equal(t, ledger.Paused, task.Status)
	require.Equal(t, ledger.PauseEffect, task.Pause.Kind)
	require.Equal(t, "settle it: lhengine effects T", task.Pause.Note)
	require.NoError(t, f.a.Update(t.Context(), func(tx *kv.Tx) error {
		tk := new(ledger.Task)
		if err := tx.GetJSON(kv.TaskKey("T"), tk); err != nil {
			return err
		}
		if err := f.a.WakeUnit(tx, tk, 0, 0, func(u *ledger.Unit) bool { return u.Effect == "charge" }); err != nil {
			return err
		}
		return tx.SaveTask(tk)
	}))
	u := f.unit(t)
	require.Equal(t, ledger.UnitReady, u.State)
	require.Empty(t, u.Effect)
}
