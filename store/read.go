package store

import (
	"context"

	"github.com/lhengine/lhengine/ledger"
	"github.com/lhengine/lhengine/store/internal/kv"
	"github.com/lhengine/lhengine/store/internal/read"
)

// Read runs fn with a Reader over a consistent snapshot.
func (s *Store) Read(fn func(r ledger.Reader) error) error {
	return s.view(func(t *kv.Tx) error { return fn(read.New(t)) })
}

// Pending reports whether any task is queued or running, that is whether a
// worker may still find work (now, after a backoff, or after a lease expires).
func (s *Store) Pending() bool {
	s.idx.Mu.Lock()
	defer s.idx.Mu.Unlock()
	return len(s.idx.Active) > 0
}

// ctx-free convenience wrappers.

// Task returns one task record.
func (s *Store) Task(_ context.Context, id string) (*ledger.Task, error) {
	var out *ledger.Task
	err := s.Read(func(r ledger.Reader) error {
		var err error
		out, err = r.Task(id)
		return err
	})
	return out, err
}
