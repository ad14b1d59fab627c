package store

import (
	"context"

	"github.com/lhengine/lhengine/ledger"
)

// Retention (internal/retention): Remove deletes a finished task's
// records, GC deletes the blobs no record refers to and gives the space of
// deleted values back.

// Remove deletes a finished task and every record of it: units, attempts,
// events, notes, effect journal, key/value entries, artifact provenance,
// quota keys, its idempotency key, manifest and task record (with its step
// records). The artifacts
// and modules it referred to stay until GC finds nothing else refers to them.
//
// Deletion runs in transactions of at most 1,000 keys, the task record last:
// a Remove cut short (a crash, ctx) leaves a finished task with fewer records,
// which a later Remove finishes. It returns an error wrapping ErrNotFound for
// an unknown task and a *NotFinishedError for one that is not finished.
func (s *Store) Remove(ctx context.Context, id string) error { return s.retention.Remove(ctx, id) }

// GC deletes the blobs (artifacts and modules) that no provenance record and
// no manifest refers to, the chunks left by puts that never finished, and
// then runs Badger's value-log GC until it has nothing left to rewrite.
//
// It is safe while workers of the same store run: blob writers hold the
// blob lock shared from their existence check until their referring record is
// committed, and GC holds it exclusively while it decides and deletes, so
// every chunk without a blob record that GC sees was left by a put that is
// over. Puts wait while GC deletes.
func (s *Store) GC(ctx context.Context) (ledger.GCStats, error) { return s.retention.GC(ctx) }

// ReclaimSpace compacts the store and rewrites the value-log files whose
// values were mostly deleted, until Badger finds none left; it returns how
// many files it rewrote.
//
// Badger counts a deleted value only when a compaction drops the record
// that pointed to it, and records deleted since the store was opened are
// still in the in-memory table, which is written out when full or at
// Close. So the space of the values GC itself deletes comes back at the
// next ReclaimSpace after the store was reopened: lhengine gc does that.
func (s *Store) ReclaimSpace(ctx context.Context) (files int, err error) {
	return s.retention.ReclaimSpace(ctx)
}
