package engine_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lhengine/lhengine/engine"
	"github.com/lhengine/lhengine/fault"
	"github.com/lhengine/lhengine/internal/testwasm"
	"github.com/lhengine/lhengine/ledger"
)

const workspaceTask = `
task "tiny" {
  step "a" {
    plugin = "step.wasm"
    input  = { mode = "echo", n = 0 }
  }
  step "b" {
    plugin = "step.wasm"
    input  = { mode = "echo", n = 1 }
  }
}`

// TestRemoveAndGCReclaimTheStore runs 25 tiny tasks, removes them all and
// collects garbage: nothing is listed, the workspaces and the module are
// gone. (The CLI test of rm and gc measures the store files, as Badger gives
// space back only once its in-memory table was written out at a close.)
func TestRemoveAndGCReclaimTheStore(t *testing.T) {
	t.Parallel()
	b := setup(t, workspaceTask)
	home := filepath.Join(b.dir, "home")
	ids := make([]string, 25)
	for i := range ids {
		ids[i] = b.submit(t, nil).ID
	}
	require.NoError(t, b.e.Work(b.ctx, engine.WorkOptions{Concurrency: 4, ExitWhenIdle: true}))
	for _, id := range ids {
		require.DirExists(t, filepath.Join(home, "workspaces", id))
		require.NoError(t, b.e.Remove(b.ctx, id))
		require.NoDirExists(t, filepath.Join(home, "workspaces", id))
	}
	rep, err := b.e.GC(b.ctx, engine.GCOptions{})
	require.NoError(t, err)
	require.Equal(t, 1, rep.Blobs, "the one module the tasks shared")
	require.Zero(t, rep.Orphans)
	require.NoError(t, b.e.Read(func(r ledger.Reader) error {
		tasks, err := r.Tasks()
		require.NoError(t, err)
		require.Empty(t, tasks)
		return nil
	}))
}

func TestRemoveRefusesATaskThatIsNotFinished(t *testing.T) {
	t.Parallel()
	b := setup(t, workspaceTask)
	task := b.submit(t, nil)
	err := b.e.Remove(b.ctx, task.ID)
	var nf *engine.NotFinishedError
	require.ErrorAs(t, err, &nf)
	require.Equal(t, ledger.Queued, nf.Status)
	got, err := b.e.Task(b.ctx, task.ID)
	require.NoError(t, err)
	require.Equal(t, ledger.Queued, got.Status)
}

// TestGCWorkspaces keeps the workspace of a finished task unless asked, and
// always removes one whose task is gone; a live task's is never touched.
func TestGCWorkspaces(t *testing.T) {
	t.Parallel()
	b := setup(t, workspaceTask)
	home := filepath.Join(b.dir, "home")
	done := b.submit(t, nil)
	require.Equal(t, ledger.Succeeded, b.work(t, done.ID).Status)
	live := b.submit(t, nil)
	for _, id := range []string{live.ID, "01GONE0000000000000000000A"} {
		require.NoError(t, os.MkdirAll(filepath.Join(home, "workspaces", id), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(home, "workspaces", id, "f"), []byte("12345"), 0o644))
	}
	rep, err := b.e.GC(b.ctx, engine.GCOptions{})
	require.NoError(t, err)
	require.Equal(t, 1, rep.Workspaces)
	require.Equal(t, int64(5), rep.WorkspaceBytes)
	require.DirExists(t, filepath.Join(home, "workspaces", done.ID))

	rep, err = b.e.GC(b.ctx, engine.GCOptions{Workspaces: true, OlderThan: 1 << 40})
	require.NoError(t, err)
	require.Zero(t, rep.Workspaces, "finished too recently")
	rep, err = b.e.GC(b.ctx, engine.GCOptions{Workspaces: true})
	require.NoError(t, err)
	require.Equal(t, 1, rep.Workspaces)
	require.NoDirExists(t, filepath.Join(home, "workspaces", done.ID))
	require.DirExists(t, filepath.Join(home, "workspaces", live.ID))
}

// TestTaskOfAnOlderEngineRunsFromItsPath: a task whose module is not in the
// store (submitted before modules were kept) runs from the pinned path,
// checked against the pinned sha256.
func TestTaskOfAnOlderEngineRunsFromItsPath(t *testing.T) {
	t.Parallel()
	b := setup(t, workspaceTask)
	first := b.submit(t, nil)
	var m *ledger.Manifest
	var steps []ledger.StepState
	require.NoError(t, b.e.Read(func(r ledger.Reader) error {
		var err error
		m, err = r.Manifest(first.ID)
		return err
	}))
	for _, s := range first.Steps {
		steps = append(steps, ledger.StepState{Name: s.Name, Limit: s.Limit})
	}
	_, err := b.e.Cancel(b.ctx, first.ID, "")
	require.NoError(t, err)
	require.NoError(t, b.e.Remove(b.ctx, first.ID))
	rep, err := b.e.GC(b.ctx, engine.GCOptions{})
	require.NoError(t, err)
	require.Equal(t, 1, rep.Blobs)

	old, _, err := engine.StoreOf(b.e).Submit(b.ctx, ledger.NewTask{Name: "old", Steps: steps, Manifest: *m})
	require.NoError(t, err)
	_, err = engine.StoreOf(b.e).Module(m.Plugins["a"].SHA256)
	require.ErrorIs(t, err, ledger.ErrNotFound)
	require.NoError(t, b.e.CheckPlugins(old.ID))

	f, err := os.OpenFile(filepath.Join(b.dir, "step.wasm"), os.O_APPEND|os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = f.Write([]byte{0})
	require.NoError(t, err)
	require.NoError(t, f.Close())
	err = b.e.CheckPlugins(old.ID)
	require.ErrorIs(t, err, engine.ErrPluginChanged)
	require.ErrorContains(t, err, `step "a"`)
	b.reopen(t) // a fresh process, which has not compiled the module
	got := b.work(t, old.ID)
	require.Equal(t, ledger.Failed, got.Status)
	require.Equal(t, fault.HashMismatch, got.Failure.Kind)
	require.Equal(t, 1, got.Attempts, "a hash mismatch is not retried")
}

// TestGCWhileAWorkerRuns collects garbage in a loop while a worker of the
// same engine runs units that store and read back a 2 MiB artifact: every
// unit reads back what it stored, and the artifact and module stay.
func TestGCWhileAWorkerRuns(t *testing.T) {
	t.Parallel()
	b := setup(t, "")
	caps := testwasm.CGuest(t, "caps")
	testwasm.Copy(t, caps, filepath.Join(b.dir, "caps.wasm"))
	require.NoError(t, os.WriteFile(filepath.Join(b.dir, "task.hcl"), []byte(`
task "artifacts" {
  step "each" {
    plugin      = "caps.wasm"
    for_each    = range(6)
    concurrency = 3
    input       = { mode = "artifact" }
  }
}`), 0o644))
	task := b.submit(t, nil)

	stop := make(chan struct{})
	gcDone := make(chan error, 1)
	go func() {
		for {
			select {
			case <-stop:
				gcDone <- nil
				return
			default:
			}
			if _, err := b.e.GC(b.ctx, engine.GCOptions{}); err != nil {
				gcDone <- err
				return
			}
		}
	}()
	got := b.work(t, task.ID)
	close(stop)
	require.NoError(t, <-gcDone)
	require.Equal(t, ledger.Succeeded, got.Status, got.Reason)
	var items []struct {
		Same bool   `json:"same"`
		Ref  string `json:"ref"`
	}
	require.NoError(t, json.Unmarshal(got.Output, &items))
	require.Len(t, items, 6)
	for _, it := range items {
		require.True(t, it.Same, "a unit read back what it stored")
	}
	rep, err := b.e.GC(b.ctx, engine.GCOptions{})
	require.NoError(t, err)
	require.Zero(t, rep.Blobs+rep.Orphans, "the artifact and the module are referred to")
	n, size, err := b.e.ReadArtifact(items[0].Ref, 0, make([]byte, 16))
	require.NoError(t, err)
	require.Equal(t, 16, n)
	require.Equal(t, int64(2<<20), size)
}
