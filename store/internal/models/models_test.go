package models

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

// setup is a journal over a store holding task T, running, whose unit 0
// of step 0 is leased by lease l.
func setup(t *testing.T) (*Journal, ledger.Lease) {
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
	ev := &outbox.Events{Update: update, Now: func() time.Time { return time.Unix(1000, 0) }, Notify: func() {}}
	j := &Journal{DB: d, Update: update, Events: ev, Budgets: &budget.Budgets{Update: update, Events: ev}}
	l := ledger.Lease{Task: "T", Step: 0, Item: 0, Attempt: 1, Owner: "s/w", Epoch: 1}
	require.NoError(t, update(t.Context(), func(tx *kv.Tx) error {
		task := &ledger.Task{ID: "T", Status: ledger.Running, Epoch: 1, Leases: 1, Steps: []ledger.StepState{{Name: "a", Pass: 1}},
			Budget: &ledger.Budget{Limits: ledger.BudgetLimits{Cost: 1}}}
		u := ledger.Unit{Task: "T", Pass: 1, State: ledger.UnitLeased, Owner: l.Owner, Epoch: 1, Attempt: 1}
		if err := tx.PutJSON(kv.UnitKey("T", 0, 0), u); err != nil {
			return err
		}
		return tx.SaveTask(task)
	}))
	return j, l
}

func (j *Journal) task(t *testing.T) *ledger.Task {
	var task *ledger.Task
	require.NoError(t, j.DB.View(func(tx *kv.Tx) error {
		var err error
		task, err = tx.LoadTask("T")
		return err
	}))
	return task
}

// TestACallSentTwice: an intent left by a send whose outcome no one saw
// is counted as possibly billed before the call is sent again; the
// response replaces the intent, is charged once, and answers the same call
// from then on.
func TestACallSentTwice(t *testing.T) {
	t.Parallel()
	j, l := setup(t)
	ctx := t.Context()
	call := func() *ledger.ModelCall {
		return &ledger.ModelCall{Task: "T", Key: "k", RequestSHA256: "r", Model: "m", RequestBytes: 100, MaxCost: 0.5}
	}
	rec, err := j.Start(ctx, l, call())
	require.NoError(t, err)
	require.Nil(t, rec, "send it")
	_, err = j.Call("T", 0, 0, "k", "r")
	require.ErrorIs(t, err, ledger.ErrNotFound, "an intent is not a response")
	rec, err = j.Start(ctx, l, call())
	require.NoError(t, err)
	require.Nil(t, rec)
	require.EqualValues(t, 1, j.task(t).ModelUsage.PossiblyBilled.Calls)

	c := call()
	c.Cost, c.InputTokens, c.Response = 0.25, 10, []byte(`{"ok":true}`)
	out, recorded, err := j.Record(ctx, l, c)
	require.NoError(t, err)
	require.True(t, recorded)
	require.Equal(t, c, out)
	_, recorded, err = j.Record(ctx, l, call())
	require.NoError(t, err)
	require.False(t, recorded, "recorded once")
	task := j.task(t)
	require.EqualValues(t, 1, task.ModelUsage.Calls)
	require.InDelta(t, 0.25, task.ModelUsage.Cost, 1e-9)

	rec, err = j.Start(ctx, l, call())
	require.NoError(t, err)
	require.NotNil(t, rec, "answered from the journal")
	got, err := j.Call("T", 0, 0, "k", "r")
	require.NoError(t, err)
	require.JSONEq(t, `{"ok":true}`, string(got.Response))
	require.NoError(t, j.Replayed(ctx, l, got))
}

// TestEnd: a send that ended without a response drops its intent, and
// counts its unknown sends as possibly billed; a zombie writes nothing.
func TestEnd(t *testing.T) {
	t.Parallel()
	j, l := setup(t)
	ctx := t.Context()
	c := &ledger.ModelCall{Task: "T", Key: "k", RequestSHA256: "r", RequestBytes: 10, MaxCost: 2}
	_, err := j.Start(ctx, l, c)
	require.NoError(t, err)
	require.NoError(t, j.End(ctx, l, c, 2))
	task := j.task(t)
	require.EqualValues(t, 2, task.ModelUsage.PossiblyBilled.Calls)
	var n int
	require.NoError(t, j.DB.View(func(tx *kv.Tx) error { n = len(tx.Keys([]byte("g/T/"))); return nil }))
	require.Zero(t, n, "the intent is dropped")

	zombie := l
	zombie.Epoch = 7
	_, err = j.Start(ctx, zombie, c)
	require.ErrorIs(t, err, ledger.ErrLeaseLost)
}
