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
	id := submit(t, b, filepath.Join(b.dir, "task.hcl"))
	require.NoError(t, os.Remove(filepath.Join(b.dir, "step.wasm")))
	lhOK(t, b, "worker", "--exit-when-idle")
	require.Contains(t, lhOK(t, b, "status", id), "succeeded")
}

// TestRmAndGCReclaimTheStore runs 25 tiny tasks, removes them all and
// collects garbage: ls is empty and the store files shrink.
func TestRmAndGCReclaimTheStore(t *testing.T) {
	t.Parallel()
	b := setupCLI(t, chainTask)
	var ids []string
	for range 25 {
		ids = append(ids, submit(t, b, filepath.Join(b.dir, "task.hcl")))
	}
	lhOK(t, b, "worker", "--concurrency", "4", "--exit-when-idle")
	before := dataFiles(t, b.home)

	require.Equal(t, 25, strings.Count(lhOK(t, b, append([]string{"rm"}, ids...)...), " removed\n"))
	_, err := os.Stat(filepath.Join(b.home, "workspaces", ids[0]))
	require.ErrorIs(t, err, fs.ErrNotExist)
	require.Contains(t, lhOK(t, b, "gc"), "blobs removed:      1 (", "the module the tasks shared")
	after := dataFiles(t, b.home)
	t.Logf("store tables and value logs: %d bytes before, %d after", before, after)
	require.Less(t, after, before/10)

	require.Contains(t, []string{"[]\n", "null\n"}, lhOK(t, b, "-o", "json", "ls"))
}

func TestRmRefusesATaskThatIsNotFinished(t *testing.T) {
	t.Parallel()
	b := setupCLI(t, chainTask)
	id := submit(t, b, filepath.Join(b.dir, "task.hcl"))
	code, _, errOut := b.lh(t, "rm", id)
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "is queued, not finished")
	require.Contains(t, errOut, "lhengine cancel "+id)
	code, _, errOut = b.lh(t, "rm", "nosuchtask")
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "not found")

	lhOK(t, b, "cancel", id)
	require.Contains(t, lhOK(t, b, "-o", "json", "rm", id[:10]), `"id": "`+id+`"`)
	code, _, errOut = b.lh(t, "status", id)
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "not found")
}

func TestGCWorkspacesOfFinishedTasks(t *testing.T) {
	t.Parallel()
	b := setupCLI(t, chainTask)
	out := lhOK(t, b, "run", filepath.Join(b.dir, "task.hcl"))
	id := taskID(out)
	ws := filepath.Join(b.home, "workspaces", id)
	require.DirExists(t, ws)
	require.Contains(t, lhOK(t, b, "gc"), "workspaces removed: 0")
	require.DirExists(t, ws, "kept without --workspaces")
	require.Contains(t, lhOK(t, b, "gc", "--workspaces", "--older-than", "1000h"), "workspaces removed: 0")
	require.Contains(t, lhOK(t, b, "-o", "json", "gc", "--workspaces"), `"workspaces": 1`)
	require.NoDirExists(t, ws)
	code, _, _ := b.lh(t, "gc", "--older-than", "-1h")
	require.Equal(t, 2, code)
}

// TestRmKilledMidwayIsFinishedByRm kills a real lhengine rm with SIGKILL
// after its second batch of deletions: the task is still there, finished,
// and a second rm removes it.
func TestRmKilledMidwayIsFinishedByRm(t *testing.T) {
	t.Parallel()
	bin := buildBinary(t)
	b := setupCLI(t, chainTask)
	out := lhOK(t, b, "run", filepath.Join(b.dir, "task.hcl"))
	id := taskID(out)

	cmd := exec.Command(bin, "--home", b.home, "rm", id)
	cmd.Env = append(os.Environ(), "LHENGINE_CRASH_AT=store.after_delete_batch@2")
	err := cmd.Run()
	var ee *exec.ExitError
	require.ErrorAs(t, err, &ee)
	ws := ee.Sys().(syscall.WaitStatus)
	require.True(t, ws.Signaled() && ws.Signal() == syscall.SIGKILL, "rm must die at its second batch: %v", err)

	code, out, _ := b.lh(t, "-o", "json", "status", id)
	require.Equal(t, 0, code, "the task record goes last")
	require.Contains(t, out, `"status": "succeeded"`)
	lhOK(t, b, "rm", id)
	code, out, _ = b.lh(t, "-o", "json", "ls")
	require.Equal(t, 0, code)
	require.Contains(t, []string{"[]\n", "null\n"}, out)
	require.NoDirExists(t, filepath.Join(b.home, "workspaces", id))
}
