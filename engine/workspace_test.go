package engine_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lhengine/lhengine/engine"
	"github.com/lhengine/lhengine/internal/testwasm"
	"github.com/lhengine/lhengine/ledger"
)

// WASI error numbers the guest sees (wasi-libc uses them as errno).
const (
	wasiDquot = 19
	wasiNospc = 51
)

// fillResult is files.c's answer to mode "fill".
type fillResult struct {
	OK      bool   `json:"ok"`
	Errno   int    `json:"errno"`
	Error   string `json:"error"`
	Written int64  `json:"written"`
}

// filesBundle is setup with files.c as files.wasm beside the task.
func filesBundle(t *testing.T, task string) *testBundle {
	t.Helper()
	b := setup(t, task)
	testwasm.Copy(t, testwasm.CGuest(t, "files"), filepath.Join(b.dir, "files.wasm"))
	return b
}

// attemptLog is the log of the first attempt of step.
func (b *testBundle) attemptLog(t *testing.T, id string, step int) string {
	t.Helper()
	var log []byte
	require.NoError(t, b.e.Read(func(r ledger.Reader) error {
		as, err := r.Attempts(id, step)
		if err != nil {
			return err
		}
		require.NotEmpty(t, as)
		log = as[0].Log
		return nil
	}))
	return string(log)
}

// TestWorkspaceQuota: writes past limits.workspace_bytes fail with EDQUOT
// in the guest, at the quota and not a byte later, the attempt's log says
// why, and a step after it still runs and commits.
func TestWorkspaceQuota(t *testing.T) {
	t.Parallel()
	b := filesBundle(t, "")
	require.NoError(t, os.WriteFile(filepath.Join(b.dir, "task.hcl"), []byte(`
task "quota" {
  limits {
    workspace_bytes = "4MiB"
  }
  step "fill" {
    plugin = "files.wasm"
    input  = { mode = "fill", path = "/workspace/big", count = 10, size = 1048576 }
  }
  step "small" {
    plugin = "files.wasm"
    input  = { mode = "write", path = "/workspace/small", content = "fits" }
  }
}`), 0o644))
	task := b.submit(t, nil)
	got := b.work(t, task.ID)
	require.Equal(t, ledger.Succeeded, got.Status, got.Reason)
	var res fillResult
	require.NoError(t, json.Unmarshal([]byte(b.output(t, task.ID, "fill")), &res))
	require.False(t, res.OK)
	require.Equal(t, wasiDquot, res.Errno, res.Error)
	require.Equal(t, int64(4<<20), res.Written)
	log := b.attemptLog(t, task.ID, 0)
	require.Contains(t, log, "workspace write refused: disk quota exceeded")
	require.Contains(t, log, "limits.workspace_bytes")

	// The quota is on what the workspace holds, whichever step wrote it:
	// the next step's four bytes do not fit either.
	require.Contains(t, b.output(t, task.ID, "small"), `"ok":false`)
	fi, err := os.Stat(filepath.Join(b.dir, "home", "workspaces", task.ID, "big"))
	require.NoError(t, err)
	require.Equal(t, int64(4<<20), fi.Size())
}

// TestUnitsThatLeaveTheWorkspaceRecordNoSnapshot: a step whose units
// leave the workspace as they found it records one snapshot of it, for
// its first unit (what a fork at the next step takes), not one per unit;
// a unit that opens a file for writing, even to append nothing, records
// one, as does every unit that writes.
func TestUnitsThatLeaveTheWorkspaceRecordNoSnapshot(t *testing.T) {
	t.Parallel()
	b := filesBundle(t, "")
	require.NoError(t, os.WriteFile(filepath.Join(b.dir, "task.hcl"), []byte(`
task "snapshots" {
  step "write" {
    plugin = "files.wasm"
    input  = { mode = "write", path = "/workspace/a.txt", content = "one" }
  }
  step "read" {
    plugin   = "files.wasm"
    for_each = range(20)
    input    = { mode = "read", path = "/workspace/a.txt" }
  }
  step "touch" {
    plugin = "files.wasm"
    input  = { mode = "append", path = "/workspace/a.txt", content = "" }
  }
  step "write_b" {
    plugin = "files.wasm"
    input  = { mode = "write", path = "/workspace/b.txt", content = "two" }
  }
}`), 0o644))
	task := b.submit(t, nil)
	require.NoError(t, b.e.Work(b.ctx, engine.WorkOptions{Task: task.ID, Concurrency: 1, ExitWhenIdle: true}))
	got, err := b.e.Task(b.ctx, task.ID)
	require.NoError(t, err)
	require.Equal(t, ledger.Succeeded, got.Status, got.Reason)
	require.Contains(t, b.output(t, task.ID, "read"), `"data":"one"`)
	require.Equal(t, uint64(4), got.WorkspaceSeq, "write, the first read, touch, write_b")

	fork, err := b.e.Fork(b.ctx, task.ID, "touch", "test")
	require.NoError(t, err)
	got = b.work(t, fork.ID)
	require.Equal(t, ledger.Succeeded, got.Status, got.Reason)
	data, err := os.ReadFile(filepath.Join(b.dir, "home", "workspaces", fork.ID, "a.txt"))
	require.NoError(t, err)
	require.Equal(t, "one", string(data), "the fork at the step after the reads has their workspace")
}
