package outbox

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/stretchr/testify/require"

	"github.com/lhengine/lhengine/ledger"
	"github.com/lhengine/lhengine/store/internal/index"
	"github.com/lhengine/lhengine/store/internal/kv"
)

type fixture struct {
	db       *kv.DB
	events   *Events
	notified int
}

func setup(t *testing.T) *fixture {
	t.Helper()
	db, err := badger.Open(badger.DefaultOptions("").WithInMemory(true).WithLogger(nil))
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, db.Close()) })
	f := &fixture{db: kv.New(db, nil)}
	x := index.New()
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
			fn(x)
		}
		return nil
	}
	f.events = &Events{Update: update, Now: func() time.Time { return time.Unix(100, 0) }, Notify: func() { f.notified++ }}
	return f
}

// submit writes a task whose notify block lists succeeded and failed, and
// its events: submitted, then succeeded.
func (f *fixture) submit(t *testing.T, id string) {
	t.Helper()
	task := &ledger.Task{ID: id, Name: "n", Status: ledger.Running, Steps: []ledger.StepState{{Name: "a"}},
		Notify: &ledger.NotifySpec{URL: "http://x", Events: []ledger.EventType{ledger.EvSucceeded, ledger.EvFailed}}}
	require.NoError(t, f.events.Update(t.Context(), func(tx *kv.Tx) error {
		if err := f.events.Append(tx, task, ledger.Event{Type: ledger.EvSubmitted}); err != nil {
			return err
		}
		task.Status = ledger.Succeeded
		if err := f.events.Append(tx, task, ledger.Event{Type: ledger.EvSucceeded}); err != nil {
			return err
		}
		return tx.SaveTask(task)
	}))
}

func (f *fixture) pending(t *testing.T) []ledger.Notification {
	var out []ledger.Notification
	require.NoError(t, f.db.View(func(tx *kv.Tx) error {
		var err error
		out, err = Pending(tx, 0, nil)
		return err
	}))
	return out
}

// TestAppendQueuesListedEvents: events take the task's next seqs; an
// event of a listed type gets an outbox entry, and the waiters are woken
// once it committed.
func TestAppendQueuesListedEvents(t *testing.T) {
	t.Parallel()
	f := setup(t)
	f.submit(t, "A")
	require.Equal(t, 1, f.notified)
	var events []ledger.Event
	require.NoError(t, f.db.View(func(tx *kv.Tx) error {
		return tx.Scan([]byte("e/A/"), func(_, v []byte) (bool, error) {
			var e ledger.Event
			events = append(events, e)
			return true, json.Unmarshal(v, &events[len(events)-1])
		})
	}))
	require.Len(t, events, 2)
	require.EqualValues(t, 1, events[1].Seq)
	require.True(t, time.Unix(100, 0).Equal(events[1].Time))
	got := f.pending(t)
	require.Len(t, got, 1)
	require.Equal(t, ledger.EvSucceeded, got[0].Event.Type)
	require.Equal(t, ledger.Succeeded, got[0].Status)
}

// TestDelivery: an intent is journaled once and found again; the outcome
// closes the entry; a retry counts the attempt; a delivered notification
// is not found any more.
func TestDelivery(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := t.Context()
	f.submit(t, "A")
	f.submit(t, "B")
	pending := f.pending(t)
	require.Len(t, pending, 2, "one entry per task")
	n := &pending[0]

	e, err := f.events.Intent(ctx, n)
	require.NoError(t, err)
	require.Equal(t, ledger.EffectIntent, e.State)
	require.Equal(t, n.IdempotencyKey(), e.IdempotencyKey)
	again, err := f.events.Intent(ctx, n)
	require.NoError(t, err)
	require.True(t, e.IntentAt.Equal(again.IntentAt), "the intent a delivery before left")
	require.Equal(t, e.IdempotencyKey, again.IdempotencyKey)

	cur, err := f.events.Retry(ctx, n, true, "503")
	require.NoError(t, err)
	require.Equal(t, 1, cur.Attempts)
	require.Equal(t, "503", cur.LastError)

	require.NoError(t, f.events.Outcome(ctx, n, json.RawMessage(`{"status":200}`), "ok"))
	require.Len(t, f.pending(t), 1)
	require.ErrorIs(t, f.events.Outcome(ctx, n, nil, ""), ledger.ErrNotFound)
	_, err = f.events.Intent(ctx, n)
	require.ErrorIs(t, err, ledger.ErrNotFound)
	require.ErrorContains(t, f.events.Outcome(ctx, &pending[1], nil, ""), "no intent journaled")
}
