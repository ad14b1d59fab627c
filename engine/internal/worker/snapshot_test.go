package worker

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lhengine/lhengine/ledger"
	"github.com/lhengine/lhengine/store"
)

// BenchmarkCommitWorkspaceSnapshot measures what a workspace snapshot adds
// to a unit's commit, as the worker does it on a store on disk (synced):
// a workspace of ten small files, one of them changed before each commit;
// "none" commits the unit alone, "snapshot" walks the tree, hashes the
// changed file, prepares, puts its blob and commits the manifest with the
// unit.
func BenchmarkCommitWorkspaceSnapshot(b *testing.B) {
	for _, with := range []bool{false, true} {
		name := "none"
		if with {
			name = "snapshot"
		}
		b.Run(name, func(b *testing.B) {
			ctx := context.Background()
			s, err := store.Open(filepath.Join(b.TempDir(), "store"), store.Options{})
			require.NoError(b, err)
			defer s.Close()
			dir := filepath.Join(b.TempDir(), "ws")
			require.NoError(b, os.MkdirAll(dir, 0o755))
			for i := range 10 {
				require.NoError(b, os.WriteFile(filepath.Join(dir, fmt.Sprintf("f%d.txt", i)), []byte(fmt.Sprintf("file %d, as first written", i)), 0o644))
			}
			u := &wsUse{dir: dir, write: true, t: &wsTask{mark: &marker{Files: map[string]cached{}}}}
			steps := make([]ledger.StepState, 5)
			for i := range steps {
				steps[i] = ledger.StepState{Name: "s"}
			}
			b.ResetTimer()
			for i := range b.N {
				if i%5 == 0 {
					_, _, err := s.Submit(ctx, ledger.NewTask{Name: "t", Steps: steps})
					require.NoError(b, err)
				}
				c, err := s.Claim(ctx, ledger.ClaimRequest{Owner: s.Owner("w"), Max: 1})
				require.NoError(b, err)
				require.Len(b, c.Leases, 1)
				require.NoError(b, os.WriteFile(filepath.Join(dir, "f0.txt"), []byte(fmt.Sprintf("changed %d", i)), 0o644))
				r := ledger.Result{Lease: c.Leases[0], Output: json.RawMessage(`{"ok":true}`)}
				var files map[string]cached
				if with {
					r.Workspace, files, err = u.snapshot(ctx, s, c.Leases[0], 1<<30)
					require.NoError(b, err)
				}
				task, err := s.Commit(ctx, r)
				require.NoError(b, err)
				if with {
					u.committed(task.WorkspaceSeq, r.Workspace.Digest(), files, testLog{b})
				}
			}
		})
	}
}

type testLog struct{ tb testing.TB }

func (l testLog) Warn(msg string, args ...any) { l.tb.Log(append([]any{msg}, args...)...) }

// TestWorkspaceQuotaFailsTheUnitWithoutASnapshot: a workspace past
// limits.workspace_bytes fails the snapshot with the quota error before
// anything is stored, and a snapshot within it hashes only what changed.
func TestWorkspaceQuotaFailsTheUnitWithoutASnapshot(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s, err := store.Open(filepath.Join(t.TempDir(), "store"), store.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, s.Close()) })
	task, _, err := s.Submit(ctx, ledger.NewTask{Name: "t", Steps: []ledger.StepState{{Name: "a"}}})
	require.NoError(t, err)
	dir := filepath.Join(t.TempDir(), "ws")
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "sub"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "sub", "big.bin"), make([]byte, 4096), 0o644))
	require.NoError(t, os.Symlink("sub/big.bin", filepath.Join(dir, "link")))
	u := &wsUse{dir: dir, write: true, t: &wsTask{mark: &marker{Files: map[string]cached{}}}}
	c, err := s.Claim(ctx, ledger.ClaimRequest{Owner: s.Owner("w"), Max: 1})
	require.NoError(t, err)
	require.Len(t, c.Leases, 1)

	_, _, err = u.snapshot(ctx, s, c.Leases[0], 4095)
	var q *errWorkspaceQuota
	require.ErrorAs(t, err, &q)
	require.Contains(t, err.Error(), "past limits.workspace_bytes 4095")
	require.Equal(t, ledger.Usage{}, usage(t, s, task.ID), "nothing was stored")

	snap, files, err := u.snapshot(ctx, s, c.Leases[0], 4096)
	require.NoError(t, err)
	require.Equal(t, int64(4096), snap.Bytes)
	require.Equal(t, []string{"link", "sub", "sub/big.bin"}, paths(snap))
	require.Equal(t, ledger.WorkspaceSymlink, snap.Entries[0].Type)
	require.Equal(t, "sub/big.bin", snap.Entries[0].Target)
	require.Contains(t, files, "sub/big.bin")
	done, err := s.Commit(ctx, ledger.Result{Lease: c.Leases[0], Output: json.RawMessage(`1`), Workspace: snap})
	require.NoError(t, err)
	require.Equal(t, uint64(1), done.WorkspaceSeq)
	require.Equal(t, int64(4096), usage(t, s, task.ID).Workspace)
}

func usage(t *testing.T, s *store.Store, id string) ledger.Usage {
	t.Helper()
	var u ledger.Usage
	require.NoError(t, s.Read(func(r ledger.Reader) error {
		var err error
		u, err = r.Usage(id)
		return err
	}))
	return u
}

func paths(s *ledger.WorkspaceSnapshot) []string {
	var out []string
	for _, e := range s.Entries {
		out = append(out, e.Path)
	}
	return out
}

func TestUnderLinkRefusesPathsThroughARestoredSymlink(t *testing.T) {
	t.Parallel()
	links := map[string]bool{"a": true, "d/l": true}
	for path, want := range map[string]bool{
		"a": false, "a/x": true, "a/b/c": true, "ab/x": false,
		"d/l/y": true, "d/lx/y": false, "d/x": false, "x/a/y": false,
	} {
		require.Equal(t, want, underLink(path, links), path)
	}
}

// TestUnchangedTreeKeepsItsMarker: commits of units that leave the
// workspace as it was record snapshots (the task's seq moves on) without
// rewriting the marker beside the folder; a later process reading that
// marker finds the folder current by its tree's digest, and needs no
// restore. A change to a file rewrites it; a marker of another tree is
// not current.
func TestUnchangedTreeKeepsItsMarker(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s, err := store.Open(filepath.Join(t.TempDir(), "store"), store.Options{})
	require.NoError(t, err)
	defer s.Close()
	dir := filepath.Join(t.TempDir(), "ws")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("first"), 0o644))
	steps := make([]ledger.StepState, 6)
	for i := range steps {
		steps[i] = ledger.StepState{Name: fmt.Sprint("s", i)}
	}
	_, _, err = s.Submit(ctx, ledger.NewTask{Name: "t", Steps: steps})
	require.NoError(t, err)
	mark := readMarker(dir)
	u := &wsUse{dir: dir, write: true, t: &wsTask{mark: mark, saved: mark}}
	step := func() *ledger.Task {
		t.Helper()
		c, err := s.Claim(ctx, ledger.ClaimRequest{Owner: s.Owner("w"), Max: 1, LeaseFor: time.Minute})
		require.NoError(t, err)
		require.Len(t, c.Leases, 1)
		r := ledger.Result{Lease: c.Leases[0], Output: json.RawMessage(`1`)}
		var files map[string]cached
		r.Workspace, files, err = u.snapshot(ctx, s, c.Leases[0], 1<<20)
		require.NoError(t, err)
		task, err := s.Commit(ctx, r)
		require.NoError(t, err)
		u.committed(task.WorkspaceSeq, task.WorkspaceDigest, files, testLog{t})
		return task
	}
	onDisk := func() []byte {
		b, err := os.ReadFile(markerPath(dir))
		require.NoError(t, err)
		return b
	}
	task := step()
	require.Equal(t, uint64(1), task.WorkspaceSeq)
	first := onDisk()
	for range 3 {
		task = step()
	}
	require.Equal(t, uint64(4), task.WorkspaceSeq)
	require.Equal(t, string(first), string(onDisk()), "an unchanged tree leaves the marker as it was")
	later := readMarker(dir)
	require.Equal(t, uint64(1), later.Seq)
	require.True(t, later.current(task), "current by its tree's digest")

	require.NoError(t, os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("second, longer"), 0o644))
	task = step()
	later = readMarker(dir)
	require.Equal(t, task.WorkspaceSeq, later.Seq, "a changed tree is written at once")
	require.Equal(t, task.WorkspaceDigest, later.Digest)
	require.False(t, (&marker{Seq: 1, Digest: "another tree"}).current(task), "another tree, an older seq: restore")
}
