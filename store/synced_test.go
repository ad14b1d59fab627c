package store

import (
	"encoding/json"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lhengine/lhengine/internal/holdpoint"
	"github.com/lhengine/lhengine/ledger"
	"github.com/lhengine/lhengine/store/internal/kv"
)

// TestReadSyncedWaitsForTheSyncOfWhatItSees: the commit that finishes a
// task is visible inside the process while its sync is held; Read shows it
// (a worker goes on from it), ReadSynced does not answer until the sync
// that makes it durable is done, and then answers "succeeded".
func TestReadSyncedWaitsForTheSyncOfWhatItSees(t *testing.T) {
	t.Parallel()
	f := newDiskFixture(t)
	s := f.mustOpen(t, Options{})
	defer s.Close()
	task, _, err := s.Submit(f.ctx, ledger.NewTask{Name: "t", Steps: plainSteps("only")})
	require.NoError(t, err)
	c, err := s.Claim(f.ctx, ledger.ClaimRequest{Owner: s.Owner("w"), Max: 1})
	require.NoError(t, err)
	require.Len(t, c.Leases, 1)

	syncs, stopSyncs := holdpoint.Watch(holdpoint.StoreSync, f.dir)
	defer stopSyncs()
	waits, stopWaits := holdpoint.Watch(holdpoint.StoreReadWaits, f.dir)
	defer stopWaits()
	syncs.Hold()
	committed := make(chan error, 1)
	go func() {
		_, err := s.Commit(f.ctx, ledger.Result{Lease: c.Leases[0], Output: json.RawMessage(`1`)})
		committed <- err
	}()
	<-syncs.Arrived() // the final commit is in Badger; its sync is held

	var inside *ledger.Task
	require.NoError(t, s.Read(func(r ledger.Reader) error { inside, err = r.Task(task.ID); return err }))
	require.Equal(t, ledger.Succeeded, inside.Status, "inside the process the commit is visible at once")

	type answer struct {
		status ledger.Status
		err    error
	}
	answered := make(chan answer, 1)
	go func() {
		var st ledger.Status
		err := s.ReadSynced(func(r ledger.Reader) error {
			t, err := r.Task(task.ID)
			if err == nil {
				st = t.Status
			}
			return err
		})
		answered <- answer{st, err}
	}()
	select {
	case a := <-answered:
		t.Fatalf("ReadSynced answered %q (err %v) while the sync of that state was held", a.status, a.err)
	case <-waits.Arrived(): // it waits for the sync
	}
	select {
	case a := <-answered:
		t.Fatalf("ReadSynced answered %q (err %v) while the sync of that state was held", a.status, a.err)
	case err := <-committed:
		t.Fatalf("the commit returned (%v) before its sync", err)
	default:
	}
	syncs.Release()
	require.NoError(t, <-committed)
	a := <-answered
	require.NoError(t, a.err)
	require.Equal(t, ledger.Succeeded, a.status)
}

// TestReadSyncedOnASyncedStoreDoesNotSync: with every commit on disk a
// read answers at once, without a sync of its own.
func TestReadSyncedOnASyncedStoreDoesNotSync(t *testing.T) {
	t.Parallel()
	f := newDiskFixture(t)
	s := f.mustOpen(t, Options{})
	defer s.Close()
	_, _, err := s.Submit(f.ctx, ledger.NewTask{Name: "t", Steps: plainSteps("a", "b")})
	require.NoError(t, err)
	before, _ := s.SyncStats()
	for range 3 {
		require.NoError(t, s.ReadSynced(func(r ledger.Reader) error { _, err := r.Tasks(); return err }))
	}
	after, _ := s.SyncStats()
	require.Equal(t, before, after, "reads of a synced store sync nothing")
}

// TestReadSyncedSyncsACommitNobodySynced: a commit that did not ask for a
// sync (a lease renewal, say) is synced by the first read that can show it.
func TestReadSyncedSyncsACommitNobodySynced(t *testing.T) {
	t.Parallel()
	f := newDiskFixture(t)
	s := f.mustOpen(t, Options{})
	defer s.Close()
	require.NoError(t, s.update(f.ctx, func(t *kv.Tx) error { return t.Put([]byte("x/volatile"), []byte("1")) }))
	require.Less(t, s.commits.synced.Load(), s.commits.done.Load(), "the write is not synced")
	before, _ := s.SyncStats()
	require.NoError(t, s.ReadSynced(func(r ledger.Reader) error { return nil }))
	after, _ := s.SyncStats()
	require.Equal(t, before+1, after)
	require.Equal(t, s.commits.done.Load(), s.commits.synced.Load())
}

// TestReadSyncedReportsAFailedSync: when the sync of what a read saw
// fails, the read answers the store's failure, not what it saw.
func TestReadSyncedReportsAFailedSync(t *testing.T) {
	t.Parallel()
	f := newDiskFixture(t)
	var fail atomic.Bool
	s := f.mustOpen(t, Options{syncFn: func(sync func() error) error {
		if fail.Load() {
			return errors.New("disk on fire")
		}
		return sync()
	}})
	defer s.Close()
	require.NoError(t, s.update(f.ctx, func(t *kv.Tx) error { return t.Put([]byte("x/volatile"), []byte("1")) }))
	fail.Store(true)
	err := s.ReadSynced(func(r ledger.Reader) error { return nil })
	require.ErrorIs(t, err, ledger.ErrStoreFailed)
}
