package main

import (
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
)

// dataFiles is the sum of the sizes of the store's tables and value logs
// (the store closed); the rest is fixed-size bookkeeping (DISCARD is 1 MiB
// from the start).
func dataFiles(t *testing.T, home string) int64 {
	t.Helper()
	var n int64
	require.NoError(t, filepath.WalkDir(filepath.Join(home, "store"), func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || (filepath.Ext(p) != ".sst" && filepath.Ext(p) != ".vlog") {
			return err
		}
		info, err := d.Info()
		if err == nil {
			n += info.Size()
		}
		return err
	}))
	return n
}

// TestQueuedTaskRunsAfterItsPluginFileIsRemoved: the task runs from the
// module kept in the store at submit.
func TestQueuedTaskRunsAfterItsPluginFileIsRemoved(t *testing.T) {
	t.Parallel()
	b := setupCLI(t, chainTask)
	code, out, errOut := b.lh(t, "submit", filepath.Join(b.dir, "task.hcl"))
	require.Equal(t, 0, code, errOut)
	id := strings.TrimSpace(out)
	require.NoError(t, os.Remove(filepath.Join(b.dir, "step.wasm")))
	code, _, errOut = b.lh(t, "worker", "--exit-when-idle")
	require.Equal(t, 0, code, errOut)
	code, out, _ = b.lh(t, "status", id)
	require.Equal(t, 0, code)
	require.Contains(t, out, "succeeded")
}

// TestRmAndGCReclaimTheStore runs 25 tiny tasks, removes them all and
// collects garbage: ls is empty and the store files shrink.
func TestRmAndGCReclaimTheStore(t *testing.T) {
	t.Parallel()
	b := setupCLI(t, chainTask)
	var ids []string
	for range 25 {
		code, out, errOut := b.lh(t, "submit", filepath.Join(b.dir, "task.hcl"))
		require.Equal(t, 0, code, errOut)
		ids = append(ids, strings.TrimSpace(out))
	}
	code, _, errOut := b.lh(t, "worker", "--concurrency", "4", "--exit-when-idle")
	require.Equal(t, 0, code, errOut)
	before := dataFiles(t, b.home)

	code, out, errOut := b.lh(t, append([]string{"rm"}, ids...)...)
	require.Equal(t, 0, code, errOut)
	require.Equal(t, 25, strings.Count(out, " removed\n"))
	_, err := os.Stat(filepath.Join(b.home, "workspaces", ids[0]))
	require.ErrorIs(t, err, fs.ErrNotExist)
	code, out, errOut = b.lh(t, "gc")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "blobs removed:      1 (", "the module the tasks shared")
	after := dataFiles(t, b.home)
	t.Logf("store tables and value logs: %d bytes before, %d after", before, after)
	require.Less(t, after, before/10)

	code, out, _ = b.lh(t, "-o", "json", "ls")
	require.Equal(t, 0, code)
	require.Contains(t, []string{"[]\n", "null\n"}, out)
}

func TestRmRefusesATaskThatIsNotFinished(t *testing.T) {
	t.Parallel()
	b := setupCLI(t, chainTask)
	code, out, errOut := b.lh(t, "submit", filepath.Join(b.dir, "task.hcl"))
	require.Equal(t, 0, code, errOut)
	id := strings.TrimSpace(out)
	code, _, errOut = b.lh(t, "rm", id)
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "is queued, not finished")
	require.Contains(t, errOut, "lhengine cancel "+id)
	code, _, errOut = b.lh(t, "rm", "nosuchtask")
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "not found")

	code, _, _ = b.lh(t, "cancel", id)
	require.Equal(t, 0, code)
	code, out, errOut = b.lh(t, "-o", "json", "rm", id[:10])
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, `"id": "`+id+`"`)
	code, _, errOut = b.lh(t, "status", id)
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "not found")
}

func TestGCWorkspacesOfFinishedTasks(t *testing.T) {
	t.Parallel()
	b := setupCLI(t, chainTask)
	code, out, errOut := b.lh(t, "run", filepath.Join(b.dir, "task.hcl"))
	require.Equal(t, 0, code, errOut)
	id := strings.TrimPrefix(strings.SplitN(out, "\n", 2)[0], "task ")
	ws := filepath.Join(b.home, "workspaces", id)
	require.DirExists(t, ws)
	code, out, _ = b.lh(t, "gc")
	require.Equal(t, 0, code)
	require.Contains(t, out, "workspaces removed: 0")
	require.DirExists(t, ws, "kept without --workspaces")
	code, out, _ = b.lh(t, "gc", "--workspaces", "--older-than", "1000h")
	require.Equal(t, 0, code)
	require.Contains(t, out, "workspaces removed: 0")
	code, out, _ = b.lh(t, "-o", "json", "gc", "--workspaces")
	require.Equal(t, 0, code)
	require.Contains(t, out, `"workspaces": 1`)
	require.NoDirExists(t, ws)
	code, _, _ = b.lh(t, "gc", "--older-than", "-1h")
	require.Equal(t, 2, code)
}

// TestRmKilledMidwayIsFinishedByRm kills a real lhengine rm with SIGKILL
// after its second batch of deletions: the task is still there, finished,
// and a second rm removes it.
func TestRmKilledMidwayIsFinishedByRm(t *testing.T) {
	t.Parallel()
	bin := buildBinary(t)
	b := setupCLI(t, chainTask)
	code, out, errOut := b.lh(t, "run", filepath.Join(b.dir, "task.hcl"))
	require.Equal(t, 0, code, errOut)
	id := strings.TrimPrefix(strings.SplitN(out, "\n", 2)[0], "task ")

	cmd := exec.Command(bin, "--home", b.home, "rm", id)
	cmd.Env = append(os.Environ(), "LHENGINE_CRASH_AT=store.after_delete_batch@2")
	err := cmd.Run()
	var ee *exec.ExitError
	require.ErrorAs(t, err, &ee)
	ws := ee.Sys().(syscall.WaitStatus)
	require.True(t, ws.Signaled() && ws.Signal() == syscall.SIGKILL, "rm must die at its second batch: %v", err)

	code, out, _ = b.lh(t, "-o", "json", "status", id)
	require.Equal(t, 0, code, "the task record goes last")
	require.Contains(t, out, `"status": "succeeded"`)
	code, _, errOut = b.lh(t, "rm", id)
	require.Equal(t, 0, code, errOut)
	code, out, _ = b.lh(t, "-o", "json", "ls")
	require.Equal(t, 0, code)
	require.Contains(t, []string{"[]\n", "null\n"}, out)
	require.NoDirExists(t, filepath.Join(b.home, "workspaces", id))
}
