// Package retention deletes what a store no longer needs: a finished
// task's records (Remove, in bounded transactions, the task record last so
// that one cut short is finished by the next), the blobs no record refers
// to (GC, holding the blob lock), and the space of deleted values (Badger's
// compaction and value-log GC, synced before a moved value's file goes).
package retention

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/dgraph-io/badger/v4"

	"github.com/lhengine/lhengine/internal/crashpoint"
	"github.com/lhengine/lhengine/ledger"
	"github.com/lhengine/lhengine/store/internal/blob"
	"github.com/lhengine/lhengine/store/internal/kv"
	"github.com/lhengine/lhengine/store/internal/logsync"
	"github.com/lhengine/lhengine/store/internal/snapshot"
)

// Retention deletes what a store no longer needs of its records and
// blobs: Remove, GC and ReclaimSpace of a store, through its group commit
// (Update) and its views (DB); Badger is its database, for compaction and
// the value log's GC, and Logs its disk sync, told of the values GC moves.
type Retention struct {
	DB     *kv.DB
	Badger *badger.DB
	Logs   *logsync.Logs
	Update kv.Update
	Blobs  *blob.Store
}

// RemoveBatch bounds the keys one transaction of Remove or GC deletes.
const RemoveBatch = 1000

// taskTables are the tables whose keys of one task share the prefix
// "<table>/<task>/". The task's own records (t/, m/, a/ and the idempotency
// key) are deleted apart.
var taskTables = []string{"u", "o", "e", "p", "j", "v", "n", "q", "g", "f", "r", "x", "w"}

// Remove deletes a finished task and every record of it: units, attempts,
// events, notes, effect journal, key/value entries, artifact provenance,
// quota keys, workspace snapshots, its idempotency key, manifest and task
// record (with its step records). The artifacts
// and modules it referred to stay until GC finds nothing else refers to them.
//
// Deletion runs in transactions of at most 1,000 keys, the task record last:
// a Remove cut short (a crash, ctx) leaves a finished task with fewer records,
// which a later Remove finishes. It returns an error wrapping ErrNotFound for
// an unknown task and a *NotFinishedError for one that is not finished.
func (s *Retention) Remove(ctx context.Context, id string) error {
	task := new(ledger.Task)
	if err := s.DB.View(func(t *kv.Tx) error { return t.GetJSON(kv.TaskKey(id), task) }); err != nil {
		return fmt.Errorf("task %s: %w", id, err)
	}
	if !task.Status.Terminal() {
		return &ledger.NotFinishedError{ID: id, Status: task.Status}
	}
	if err := s.MarkRemoving(ctx, id); err != nil {
		return err
	}
	for _, table := range taskTables {
		if _, _, err := s.DeleteAll(ctx, 0, []byte(table+"/"+id+"/")); err != nil {
			return fmt.Errorf("removing task %s: %w", id, err)
		}
	}
	return s.Update(ctx, func(t *kv.Tx) error {
		t.Durable = true
		if err := t.Del(kv.ManifestKey(id)); err != nil {
			return err
		}
		// The step records go with the task record, in one transaction:
		// a task record is never left without its steps.
		for _, k := range t.Keys(kv.StepPrefix(id)) {
			if err := t.Del(k); err != nil {
				return err
			}
		}
		return t.Del(kv.TaskKey(id))
	})
}

// DeleteAll deletes every key under prefix, RemoveBatch keys per
// transaction, and returns how many it deleted and the bytes of their
// values. It stops after maxBatches transactions unless maxBatches is 0
// (tests cut a deletion short).
func (s *Retention) DeleteAll(ctx context.Context, maxBatches int, prefix []byte) (n int, size int64, err error) {
	for batch := 0; maxBatches == 0 || batch < maxBatches; batch++ {
		var keys [][]byte
		if err := s.DB.View(func(t *kv.Tx) error {
			keys, size = t.KeysLimit(prefix, RemoveBatch, size)
			return nil
		}); err != nil {
			return n, size, err
		}
		if len(keys) == 0 {
			return n, size, nil
		}
		if err := s.Update(ctx, func(t *kv.Tx) error {
			for _, k := range keys {
				if err := t.Del(k); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			return n, size, err
		}
		n += len(keys)
		crashpoint.Reached(crashAfterDeleteBatch)
	}
	return n, size, nil
}

// crashAfterDeleteBatch is the crash point (see internal/crashpoint) after
// each committed batch of deletions of Remove and GC: a process killed there
// must leave a task that Remove finishes, and blobs that GC collects.
const crashAfterDeleteBatch = "store.after_delete_batch"

// GC deletes the blobs (artifacts, modules and workspace files) that no
// provenance record, manifest or workspace snapshot refers to, the chunks left by puts that never finished, and
// then runs Badger's value-log GC until it has nothing left to rewrite.
//
// It is safe while workers of the same store run: blob writers hold the
// blob lock (blob.Hold) shared from their existence check until their referring record is
// committed, and GC holds it exclusively while it decides and deletes, so
// every chunk without a blob record that GC sees was left by a put that is
// over. Puts wait while GC deletes.
func (s *Retention) GC(ctx context.Context) (ledger.GCStats, error) {
	var st ledger.GCStats
	if err := s.collectBlobs(ctx, &st); err != nil {
		return st, err
	}
	var err error
	st.VlogFiles, err = s.ReclaimSpace(ctx)
	return st, err
}

// ReclaimSpace compacts the store and rewrites the value-log files whose
// values were mostly deleted, until Badger finds none left; it returns how
// many files it rewrote.
//
// Badger counts a deleted value only when a compaction drops the record
// that pointed to it, and records deleted since the store was opened are
// still in the in-memory table, which is written out when full or at
// Close. So the space of the values GC itself deletes comes back at the
// next ReclaimSpace after the store was reopened: lhengine gc does that.
func (s *Retention) ReclaimSpace(ctx context.Context) (files int, err error) {
	if s.Badger == nil {
		return 0, nil // PostgreSQL: its autovacuum gives space back
	}
	if err := s.Badger.Flatten(1); err != nil {
		return 0, fmt.Errorf("compacting: %w", err)
	}
	for {
		if err := ctx.Err(); err != nil {
			return files, err
		}
		err := s.valueLogGC(ctx)
		if errors.Is(err, badger.ErrNoRewrite) || errors.Is(err, badger.ErrGCInMemoryMode) {
			return files, nil
		}
		if err != nil {
			return files, fmt.Errorf("value log gc: %w", err)
		}
		files++
	}
}

// valueLogGC runs one round of Badger's value-log GC and makes what it
// moved durable before the file it moved it from is deleted. Badger
// writes the moved values and their new pointers without a sync, then
// deletes the old file at once unless an iterator is open; so an iterator
// is held open across the round, the store syncs, and closing the
// iterator deletes the file. Without that, a power loss right after a
// round could keep neither copy of a moved value.
func (s *Retention) valueLogGC(ctx context.Context) error {
	txn := s.Badger.NewTransaction(false)
	it := txn.NewIterator(badger.IteratorOptions{})
	defer txn.Discard()
	defer it.Close()
	err := s.Badger.RunValueLogGC(0.5)
	s.Logs.ValuesWritten() // it may have moved values to the newest value log
	if err != nil {
		return err
	}
	return s.Update(context.WithoutCancel(ctx), func(t *kv.Tx) error {
		t.Durable = true
		return nil
	})
}

func (s *Retention) collectBlobs(ctx context.Context, st *ledger.GCStats) error {
	defer blob.LockAll()()
	used := map[string]bool{}
	blobs := map[string]blob.Meta{}
	chunked := map[string]bool{}
	replays := map[string]bool{} // replay sets pinned (internal/blob)
	err := s.DB.View(func(t *kv.Tx) error {
		if err := t.Scan([]byte("m/"), func(_, val []byte) (bool, error) {
			var m ledger.Manifest
			if err := json.Unmarshal(val, &m); err != nil {
				return false, err
			}
			for _, pin := range m.Plugins {
				used[pin.SHA256] = true
			}
			if m.ModelReplay != nil {
				replays[m.ModelReplay.SHA256] = true
			}
			return true, nil
		}); err != nil {
			return err
		}
		if err := t.Scan([]byte("p/"), func(_, val []byte) (bool, error) {
			var p ledger.Provenance
			if err := json.Unmarshal(val, &p); err != nil {
				return false, err
			}
			used[strings.TrimPrefix(p.Ref, "sha256:")] = true
			return true, nil
		}); err != nil {
			return err
		}
		// Workspace snapshots, and the blobs of snapshots about to be
		// committed (internal/snapshot).
		if err := snapshot.Referenced(t, used); err != nil {
			return err
		}
		if err := t.Scan([]byte("B/"), func(key, val []byte) (bool, error) {
			var m blob.Meta
			if err := json.Unmarshal(val, &m); err != nil {
				return false, err
			}
			blobs[string(key[2:])] = m
			return true, nil
		}); err != nil {
			return err
		}
		// Chunk keys are b/<sha256>/<n>: one seek per blob.
		it := t.Iterate(kv.IterOptions{Prefix: []byte("b/"), KeysOnly: true})
		defer it.Close()
		for it.Rewind(); it.Valid(); {
			k := it.Key()
			sum, _, ok := strings.Cut(string(k[2:]), "/")
			if !ok {
				it.Next()
				continue
			}
			chunked[sum] = true
			it.Seek([]byte("b/" + sum + "/\xff"))
		}
		return it.Err()
	})
	if err != nil {
		return err
	}
	for set := range replays {
		if err := s.Blobs.ReplayBlobs(set, used); err != nil {
			return err
		}
	}
	for sum, m := range blobs {
		if used[sum] {
			continue
		}
		// The record goes first: a GC cut short leaves chunks without a
		// record, which the next GC collects as orphans.
		if err := s.Update(ctx, func(t *kv.Tx) error { return t.Del(kv.BlobKey(sum)) }); err != nil {
			return err
		}
		if _, _, err := s.DeleteAll(ctx, 0, []byte("b/"+sum+"/")); err != nil {
			return err
		}
		st.Blobs++
		st.BlobBytes += m.Size
	}
	for sum := range chunked {
		if _, ok := blobs[sum]; ok {
			continue
		}
		_, size, err := s.DeleteAll(ctx, 0, []byte("b/"+sum+"/"))
		if err != nil {
			return err
		}
		st.Orphans++
		st.OrphanBytes += size
	}
	return s.Update(ctx, func(t *kv.Tx) error { t.Durable = true; return nil })
}

// MarkRemoving starts a removal: it checks, in the transaction that writes
// the mark, that the task is finished, marks it as being removed (so that
// Retry never re-opens it), and deletes what would let anyone find it anew:
// a submit with its idempotency key now creates another task.
func (s *Retention) MarkRemoving(ctx context.Context, id string) error {
	task := new(ledger.Task)
	return s.Update(ctx, func(t *kv.Tx) error {
		// Checked again where the runnable mark is deleted: the status read
		// above may be stale.
		if err := t.GetJSON(kv.TaskKey(id), task); err != nil {
			return fmt.Errorf("task %s: %w", id, err)
		}
		if !task.Status.Terminal() {
			return &ledger.NotFinishedError{ID: id, Status: task.Status}
		}
		if task.IdempotencyKey != "" {
			owner, err := t.GetRaw(kv.IdemKey(task.IdempotencyKey))
			if err == nil && string(owner) == id {
				if err := t.Del(kv.IdemKey(task.IdempotencyKey)); err != nil {
					return err
				}
			} else if err != nil && !errors.Is(err, ledger.ErrNotFound) {
				return err
			}
		}
		if err := t.Del(kv.ActiveKey(id)); err != nil {
			return err
		}
		task.Removing = true
		return t.SaveTask(task)
	})
}
