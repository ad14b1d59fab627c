package lease

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

type fixture struct {
	ls  *Leases
	now time.Time
}

func setup(t *testing.T) *fixture {
	t.Helper()
	db, err := badger.Open(badger.DefaultOptions("").WithInMemory(true).WithLogger(nil))
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, db.Close()) })
	d := kv.New(db, nil)
	x := index.New()
	f := &fixture{now: time.Unix(1000, 0)}
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
		x.Mu.Lock()
		defer x.Mu.Unlock()
		for _, fn := range tx.Afters() {
			fn(x)
		}
		return nil
	}
	ev := &outbox.Events{Update: update, Now: func() time.Time { return f.now }, Notify: func() {}}
	f.ls = &Leases{Idx: x, Events: ev, Session: "s1", Update: update}
	return f
}

// task writes a running task of one plain step with n ready units, in the
// index.
func (f *fixture) task(t *testing.T, id string, n int) {
	t.Helper()
	require.NoError(t, f.ls.Update(t.Context(), func(tx *kv.Tx) error {
		task := &ledger.Task{ID: id, Status: ledger.Queued, Steps: []ledger.StepState{{Name: "a", Pass: 1, Planned: true, Units: n, Written: n, Limit: 10}}}
		for i := range n {
			if err := tx.PutJSON(kv.UnitKey(id, 0, i), ledger.Unit{Task: id, Item: i, Pass: 1, State: ledger.UnitReady}); err != nil {
				return err
			}
			r := index.Ref{Task: id, Step: 0, Item: i}
			tx.After(func(x *index.Index) { x.AddReady(r, time.Time{}, false) })
		}
		tx.After(func(x *index.Index) { x.AddActive(id) })
		return tx.SaveTask(task)
	}))
}

func (f *fixture) claim(t *testing.T, owner string, max int) ledger.Claimed {
	t.Helper()
	var out ledger.Claimed
	require.NoError(t, f.ls.Update(t.Context(), func(tx *kv.Tx) error {
		var err error
		out, err = f.ls.Claim(tx, ledger.ClaimRequest{Owner: owner, Max: max, LeaseFor: time.Minute}, nil)
		return err
	}))
	return out
}

func (f *fixture) leased(t *testing.T, l ledger.Lease) error {
	return f.ls.Update(t.Context(), func(tx *kv.Tx) error { _, _, err := Leased(tx, l); return err })
}

// TestClaimTakesTheNextEpochs: each lease takes the task's next epoch; the
// first starts the task; a unit leased is not offered again.
func TestClaimTakesTheNextEpochs(t *testing.T) {
	t.Parallel()
	f := setup(t)
	f.task(t, "T", 3)
	c := f.claim(t, "s1/w", 2)
	require.Len(t, c.Leases, 2)
	require.Equal(t, []uint64{1, 2}, []uint64{c.Leases[0].Epoch, c.Leases[1].Epoch})
	require.Equal(t, "T", c.Leases[0].Snapshot.ID)
	require.NoError(t, f.leased(t, c.Leases[0]))
	c2 := f.claim(t, "s1/w", 5)
	require.Len(t, c2.Leases, 1)
	require.Equal(t, 2, c2.Leases[0].Item)
	require.Empty(t, f.claim(t, "s1/w", 5).Leases)
}

// TestExpiredAndDeadLeasesAreTakenBack: an expired lease, and one of an
// earlier session, go back to ready and are leased anew with a higher
// epoch; the old lease is fenced.
func TestExpiredAndDeadLeasesAreTakenBack(t *testing.T) {
	t.Parallel()
	f := setup(t)
	f.task(t, "T", 1)
	old := f.claim(t, "s0/w", 1).Leases[0] // another session's
	c := f.claim(t, "s1/w", 1)
	require.Equal(t, 1, c.Reclaimed)
	require.Len(t, c.Leases, 1)
	require.Greater(t, c.Leases[0].Epoch, old.Epoch)
	require.ErrorIs(t, f.leased(t, old), ledger.ErrLeaseLost)

	f.now = f.now.Add(2 * time.Minute) // past the lease
	c2 := f.claim(t, "s1/v", 1)
	require.Equal(t, 1, c2.Reclaimed)
	require.ErrorIs(t, f.leased(t, c.Leases[0]), ledger.ErrLeaseLost)
	require.NoError(t, f.leased(t, c2.Leases[0]))
}

// TestHeartbeatAndRelease: only the holder extends a lease; a release
// gives the unit back uncharged and the lease is lost.
func TestHeartbeatAndRelease(t *testing.T) {
	t.Parallel()
	f := setup(t)
	f.task(t, "T", 1)
	l := f.claim(t, "s1/w", 1).Leases[0]
	until, err := f.ls.Heartbeat(t.Context(), l, time.Hour)
	require.NoError(t, err)
	require.Equal(t, f.now.Add(time.Hour), until)
	wrong := l
	wrong.Epoch++
	_, err = f.ls.Heartbeat(t.Context(), wrong, time.Hour)
	require.ErrorIs(t, err, ledger.ErrLeaseLost)

	require.NoError(t, f.ls.Release(t.Context(), l))
	require.ErrorIs(t, f.ls.Release(t.Context(), l), ledger.ErrLeaseLost)
	again := f.claim(t, "s1/w", 1).Leases[0]
	require.Equal(t, l.Attempt, again.Attempt, "the attempt was not charged")
}

func TestHelpers(t *testing.T) {
	t.Parallel()
	require.Equal(t, "s1", OwnerSession("s1/worker-3"))
	require.Equal(t, "bare", OwnerSession("bare"))
	a, b := time.Unix(1, 0), time.Unix(2, 0)
	require.Equal(t, a, Earliest(a, b))
	require.Equal(t, a, Earliest(time.Time{}, a))
	require.Equal(t, a, Earliest(a, time.Time{}))
	ws := &ledger.StepState{Every: 5, Anchor: 1}
	require.True(t, WindowClaimable(ws, 2, 1))
	require.True(t, WindowClaimable(ws, 2, 2))
	require.False(t, WindowClaimable(ws, 2, 3), "the cursor passed it")
	require.False(t, WindowClaimable(ws, 2, 0), "its anchor has not run")
	require.False(t, WindowClaimable(&ledger.StepState{}, 2, 1))
}
