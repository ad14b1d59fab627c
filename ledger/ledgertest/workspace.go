package ledgertest

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lhengine/lhengine/fault"
	"github.com/lhengine/lhengine/ledger"
)

// Workspace snapshots and forks (ledger.Workspaces).

func sumOf(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// snapOf is a snapshot of one directory and the files named, with the
// contents given.
func snapOf(files map[string]string) *ledger.WorkspaceSnapshot {
	s := &ledger.WorkspaceSnapshot{Entries: []ledger.WorkspaceEntry{{Path: "d", Type: ledger.WorkspaceDir, Mode: 0o755}}}
	for _, name := range []string{"d/a.txt", "d/b.txt", "d/c.txt"} {
		c, ok := files[name]
		if !ok {
			continue
		}
		s.Entries = append(s.Entries, ledger.WorkspaceEntry{Path: name, Type: ledger.WorkspaceFile, Mode: 0o644, Size: int64(len(c)), SHA256: sumOf([]byte(c))})
		s.Bytes += int64(len(c))
	}
	return s
}

// commitWith prepares, puts and commits the workspace files with the
// unit of l's output.
func (b *bench) commitWith(l ledger.Lease, out string, files map[string]string) *ledger.Task {
	b.t.Helper()
	snap := snapOf(files)
	missing, err := b.s.PrepareWorkspace(b.ctx, l, snap.Sums())
	require.NoError(b.t, err)
	for _, c := range files {
		if sum := sumOf([]byte(c)); contains(missing, sum) {
			require.NoError(b.t, b.s.PutWorkspaceBlob(b.ctx, sum, int64(len(c)), strings.NewReader(c)))
		}
	}
	task, err := b.s.Commit(b.ctx, ledger.Result{Lease: l, Output: json.RawMessage(out), Workspace: snap})
	require.NoError(b.t, err)
	return task
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func (b *bench) blob(sum string) string {
	b.t.Helper()
	var buf bytes.Buffer
	require.NoError(b.t, b.s.ReadWorkspaceBlob(sum, &buf))
	return buf.String()
}

var _ = register("WorkspaceSnapshotRidesInTheCommit", func(t *testing.T, open Factory) {
	b := newBench(t, open, nil)
	task := b.submit(steps("a", "b"))
	l := b.claim1("w")
	files := map[string]string{"d/a.txt": "alpha", "d/b.txt": "beta"}
	snap := snapOf(files)
	missing, err := b.s.PrepareWorkspace(b.ctx, l, snap.Sums())
	require.NoError(t, err)
	require.ElementsMatch(t, snap.Sums(), missing, "a store holds none of a new snapshot's blobs")
	err = b.s.PutWorkspaceBlob(b.ctx, sumOf([]byte("alpha")), 5, strings.NewReader("alphX"))
	require.ErrorIs(t, err, ledger.ErrWorkspaceChanged, "bytes that are not the sum store nothing")
	require.Error(t, b.s.ReadWorkspaceBlob(sumOf([]byte("alpha")), &bytes.Buffer{}))
	for _, c := range files {
		require.NoError(t, b.s.PutWorkspaceBlob(b.ctx, sumOf([]byte(c)), int64(len(c)), strings.NewReader(c)))
	}
	got, err := b.s.Commit(b.ctx, ledger.Result{Lease: l, Output: json.RawMessage(`1`), Workspace: snap})
	require.NoError(t, err)
	require.Equal(t, uint64(1), got.WorkspaceSeq, "the commit recorded snapshot 1")

	latest, err := b.s.WorkspaceSnapshot(task.ID)
	require.NoError(t, err)
	require.Equal(t, uint64(1), latest.Seq)
	require.Equal(t, 0, latest.Step, "the snapshot names the unit whose commit recorded it")
	require.Equal(t, snap.Entries, latest.Entries)
	require.Equal(t, "alpha", b.blob(sumOf([]byte("alpha"))))
	b.read(func(r ledger.Reader) error {
		u, err := r.Usage(task.ID)
		require.NoError(t, err)
		require.Equal(t, int64(len("alpha")+len("beta")), u.Workspace, "its blobs count in the task's usage")
		return nil
	})

	// The next unit: one file changed, one the same (not put again), and
	// a failure records no snapshot.
	l = b.claim1("w")
	zombie := l
	zombie.Epoch--
	_, err = b.s.PrepareWorkspace(b.ctx, zombie, nil)
	require.ErrorIs(t, err, ledger.ErrLeaseLost)
	next := map[string]string{"d/a.txt": "alpha", "d/c.txt": "gamma"}
	missing, err = b.s.PrepareWorkspace(b.ctx, l, snapOf(next).Sums())
	require.NoError(t, err)
	require.Equal(t, []string{sumOf([]byte("gamma"))}, missing, "content the store holds is not put again")
	failed, err := b.s.Commit(b.ctx, ledger.Result{Lease: l, Failure: &ledger.Failure{Kind: fault.PluginError, Message: "x"},
		RetryAt: b.clock.Now(), Workspace: snapOf(next)})
	require.NoError(t, err)
	require.Equal(t, uint64(1), failed.WorkspaceSeq, "a failed attempt checkpoints nothing")
	l = b.claim1("w")
	got = b.commitWith(l, `2`, next)
	require.Equal(t, ledger.Succeeded, got.Status)
	require.Equal(t, uint64(2), got.WorkspaceSeq)
	all, err := b.s.WorkspaceSnapshots(task.ID)
	require.NoError(t, err)
	require.Len(t, all, 2, "one snapshot kept per step")
	require.Equal(t, []uint64{1, 2}, []uint64{all[0].Seq, all[1].Seq})
	_, err = b.s.WorkspaceSnapshot("no-such-task")
	require.ErrorIs(t, err, ledger.ErrNotFound)
})

var _ = register("GCKeepsWorkspaceBlobsUntilTheTaskIsRemoved", func(t *testing.T, open Factory) {
	b := newBench(t, open, nil)
	task := b.submit(steps("a", "b"))
	l := b.claim1("w")
	// Prepared and put, not yet committed: GC keeps it.
	missing, err := b.s.PrepareWorkspace(b.ctx, l, []string{sumOf([]byte("kept"))})
	require.NoError(t, err)
	require.Len(t, missing, 1)
	require.NoError(t, b.s.PutWorkspaceBlob(b.ctx, missing[0], 4, strings.NewReader("kept")))
	_, err = b.s.GC(b.ctx)
	require.NoError(t, err)
	require.Equal(t, "kept", b.blob(missing[0]), "GC keeps the blobs of a snapshot about to be committed")
	b.commitWith(l, `1`, map[string]string{"d/a.txt": "kept"})
	_, err = b.s.GC(b.ctx)
	require.NoError(t, err)
	require.Equal(t, "kept", b.blob(missing[0]), "GC keeps the blobs of a snapshot")
	b.commitWith(b.claim1("w"), `2`, map[string]string{"d/a.txt": "kept", "d/b.txt": "more"})

	require.NoError(t, b.s.Remove(b.ctx, task.ID))
	_, err = b.s.WorkspaceSnapshot(task.ID)
	require.ErrorIs(t, err, ledger.ErrNotFound, "Remove deletes the task's snapshots")
	_, err = b.s.GC(b.ctx)
	require.NoError(t, err)
	require.ErrorIs(t, b.s.ReadWorkspaceBlob(missing[0], &bytes.Buffer{}), ledger.ErrNotFound, "and GC then their blobs")
})

var _ = register("ForkStartsFromACheckpointWithItsOutputsAndWorkspace", func(t *testing.T, open Factory) {
	b := newBench(t, open, planN(3))
	task := b.submit([]ledger.StepState{{Name: "a"}, {Name: "each", FanOut: true, Limit: 3}, {Name: "c"}})
	b.commitWith(b.claim1("w"), `"a-out"`, map[string]string{"d/a.txt": "after a"})
	for range 3 {
		l := b.claim1("w")
		b.commitWith(l, `"item"`, map[string]string{"d/a.txt": "after a", "d/b.txt": "after each"})
	}
	orig := b.commitWith(b.claim1("w"), `"c-out"`, map[string]string{"d/c.txt": "after c"})
	require.Equal(t, ledger.Succeeded, orig.Status)
	require.Equal(t, uint64(5), orig.WorkspaceSeq)

	// At step 2 ("each"): a's output and the workspace as a left it.
	f, err := b.s.Fork(b.ctx, task.ID, 1, "tester")
	require.NoError(t, err)
	require.NotEqual(t, task.ID, f.ID)
	require.Equal(t, ledger.Queued, f.Status)
	require.Equal(t, 1, f.Cursor)
	require.Equal(t, &ledger.ForkOrigin{Task: task.ID, Step: "each", StepIndex: 1, Workspace: 1, By: "tester"}, f.ForkedFrom)
	require.Equal(t, uint64(1), f.WorkspaceSeq)
	snap, err := b.s.WorkspaceSnapshot(f.ID)
	require.NoError(t, err)
	require.Equal(t, snapOf(map[string]string{"d/a.txt": "after a"}).Entries, snap.Entries)
	b.read(func(r ledger.Reader) error {
		out, err := r.StepOutput(f.ID, 0)
		require.NoError(t, err)
		require.JSONEq(t, `"a-out"`, string(out))
		_, err = r.StepOutput(f.ID, 1)
		require.ErrorIs(t, err, ledger.ErrNotFound, "the step the fork starts at runs again")
		return nil
	})
	require.Contains(t, b.events(f.ID), ledger.EvForked)
	// It runs like any other: its three items, then c.
	for range 3 {
		l := b.claim1("w")
		require.Equal(t, f.ID, l.Task)
		b.done(l, `"again"`)
	}
	l := b.claim1("w")
	require.Equal(t, 2, l.Step)
	require.Equal(t, ledger.Succeeded, b.done(l, `"c-again"`).Status)

	// At its end: every output, the last workspace, succeeded at once.
	end, err := b.s.Fork(b.ctx, task.ID, -1, "")
	require.NoError(t, err)
	require.Equal(t, ledger.Succeeded, end.Status)
	require.Equal(t, 3, end.ForkedFrom.StepIndex)
	require.JSONEq(t, `"c-out"`, string(end.Output))
	snap, err = b.s.WorkspaceSnapshot(end.ID)
	require.NoError(t, err)
	require.Equal(t, snapOf(map[string]string{"d/c.txt": "after c"}).Entries, snap.Entries)
	b.read(func(r ledger.Reader) error {
		out, err := r.StepOutput(end.ID, 1)
		require.NoError(t, err)
		require.JSONEq(t, `["item","item","item"]`, string(out), "a fan-out's items are copied")
		return nil
	})

	// The original is unchanged.
	now := b.task(task.ID)
	require.Equal(t, ledger.Succeeded, now.Status)
	require.Equal(t, uint64(5), now.WorkspaceSeq)
	require.Nil(t, now.ForkedFrom)
	require.NotContains(t, b.events(task.ID), ledger.EvForked)

	// Not past where a task is.
	running := b.submit(steps("x", "y"))
	_, err = b.s.Fork(b.ctx, running.ID, 1, "")
	require.Error(t, err, "a task that has not completed step 1 cannot be forked after it")
	_, err = b.s.Fork(b.ctx, "no-such-task", -1, "")
	require.ErrorIs(t, err, ledger.ErrNotFound)
})
