package store

import (
	"context"
	"io"

	"github.com/lhengine/lhengine/ledger"
	"github.com/lhengine/lhengine/store/internal/blob"
	"github.com/lhengine/lhengine/store/internal/kv"
	"github.com/lhengine/lhengine/store/internal/snapshot"
)

// PrepareWorkspace records, under lease l, that the snapshot the unit is
// about to commit names the blobs sums (GC keeps them until the commit or
// the task's removal) and returns those the store does not hold
// (internal/snapshot).
func (s *Store) PrepareWorkspace(ctx context.Context, l ledger.Lease, sums []string) ([]string, error) {
	defer blob.Hold()()
	var missing []string
	err := s.update(ctx, func(t *kv.Tx) error {
		var err error
		missing, err = snapshot.Prepare(t, l, sums)
		return err
	})
	return missing, err
}

// PutWorkspaceBlob stores the size bytes read from r as the blob sum;
// bytes that are not sum store nothing and return an error wrapping
// ErrWorkspaceChanged.
func (s *Store) PutWorkspaceBlob(ctx context.Context, sum string, size int64, r io.Reader) error {
	return snapshot.Put(ctx, s.kv, s.update, sum, size, r)
}

// ReadWorkspaceBlob writes the blob sum to w, checked against its sha256.
func (s *Store) ReadWorkspaceBlob(sum string, w io.Writer) error {
	return snapshot.Read(s.kv, sum, w)
}

// WorkspaceSnapshot returns the task's latest workspace snapshot;
// ErrNotFound when it has none.
func (s *Store) WorkspaceSnapshot(task string) (*ledger.WorkspaceSnapshot, error) {
	var out *ledger.WorkspaceSnapshot
	err := s.view(func(t *kv.Tx) error {
		var err error
		out, err = snapshot.Latest(t, task)
		return err
	})
	return out, err
}

// WorkspaceSnapshots returns the snapshots the task keeps: for each step
// that recorded one, the latest, in step order.
func (s *Store) WorkspaceSnapshots(task string) ([]ledger.WorkspaceSnapshot, error) {
	var out []ledger.WorkspaceSnapshot
	err := s.view(func(t *kv.Tx) error {
		var err error
		out, err = snapshot.All(t, task)
		return err
	})
	return out, err
}
