package store

import (
	"sync/atomic"

	"github.com/lhengine/lhengine/internal/holdpoint"
	"github.com/lhengine/lhengine/ledger"
	"github.com/lhengine/lhengine/store/internal/kv"
	"github.com/lhengine/lhengine/store/internal/read"
)

// syncedCommits tells what a reader saw apart from what is on disk.
// Badger makes a transaction visible when it commits; the store syncs it
// afterwards (group commit), so for a moment a reader of the process can
// see a commit that a crash would roll back. Inside the process that is
// what the group commit is for: a worker goes on from what it committed.
// Outside it, an answer must be at or below what is synced, or a client
// told "succeeded" could find the task running again after a crash
// (RATIONALE.md, "Why does a read answered outside the process wait for
// the sync?").
//
// Transactions commit one batch at a time (the group commit's leader runs
// one batch's transaction while the previous batch syncs), so numbering
// them needs no lock: started counts commits begun, done those finished
// (failed ones included), synced the commits the latest successful sync
// covered (every commit done when it began).
type syncedCommits struct {
	started atomic.Uint64
	done    atomic.Uint64
	synced  atomic.Uint64
}

// beginCommit numbers a transaction's commit; endCommit marks it finished.
func (c *syncedCommits) beginCommit() uint64 { return c.started.Add(1) }
func (c *syncedCommits) endCommit(n uint64)  { c.done.Store(n) }

// ReadSynced is Read for an answer that leaves the process (the
// control-plane API, the dashboard): once fn has read its snapshot, it
// waits until every commit that snapshot can show is on disk, syncing if
// none is under way. A store that does not sync answers at once. The
// error is fn's, or the store's failure if the sync failed (what fn saw
// may then be lost).
func (s *Store) ReadSynced(fn func(r ledger.Reader) error) error {
	var want uint64
	err := s.view(func(t *kv.Tx) error {
		// Read after the snapshot was taken: every commit it shows had
		// begun by now.
		want = s.commits.started.Load()
		return fn(read.New(t))
	})
	if werr := s.awaitSynced(want); werr != nil {
		return werr
	}
	return err
}

// awaitSynced returns once commit n and every commit before it are on
// disk.
func (s *Store) awaitSynced(n uint64) error {
	if !s.sync {
		return nil
	}
	for s.commits.synced.Load() < n {
		holdpoint.Reached(holdpoint.StoreReadWaits, s.dir)
		// A sync that starts from now on covers every commit done; one
		// still committing is caught by the next round.
		if err := s.syncer.Sync(s.syncDisk); err != nil {
			return s.failStore(err)
		}
	}
	return nil
}
