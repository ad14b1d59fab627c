package engine_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lhengine/lhengine/ledger"
	"github.com/lhengine/lhengine/store"
)

// TestWorkspaceFullDisk fills the workspace on a real 300 MiB file system
// holding the whole home: the guest's writes fail with ENOSPC while the
// file system still has the store's floor and the workspace margin free,
// the attempt's log says why, the engine commits the attempt and runs the
// next step, and the store is whole after.
func TestWorkspaceFullDisk(t *testing.T) {
	t.Parallel()
	b := filesBundle(t, "")
	require.NoError(t, b.e.Close(b.ctx))
	b.e = nil
	mnt := mountTmpfs(t, 300<<20)
	home := filepath.Join(b.dir, "home")
	require.NoError(t, os.RemoveAll(home))
	require.NoError(t, os.Symlink(mnt, home))
	b.open(t)
	t.Cleanup(func() { // before the file system is unmounted
		if b.e != nil {
			require.NoError(t, b.e.Close(b.ctx))
			b.e = nil
		}
	})
	require.NoError(t, os.WriteFile(filepath.Join(b.dir, "task.hcl"), []byte(`
task "fill" {
  limits {
    workspace_bytes = "2GiB"
  }
  step "fill" {
    plugin = "files.wasm"
    input  = { mode = "fill", path = "/workspace/big", count = 1000, size = 1048576 }
  }
  step "after" {
    plugin    = "files.wasm"
    workspace = "none"
    input     = { mode = "read", path = "/nothing" }
  }
}`), 0o644))
	task := b.submit(t, nil)
	got := b.work(t, task.ID)
	require.Equal(t, ledger.Succeeded, got.Status, got.Reason)
	var res fillResult
	require.NoError(t, json.Unmarshal([]byte(b.output(t, task.ID, "fill")), &res))
	require.False(t, res.OK)
	require.Equal(t, wasiNospc, res.Errno, res.Error)
	require.Greater(t, res.Written, int64(32<<20), "the workspace got the room above the reserve")
	// The store's floor and the workspace margin above it (32 MiB) stay free.
	require.Less(t, res.Written, int64(300<<20-store.DefaultMinFreeBytes-32<<20))
	require.Contains(t, b.attemptLog(t, task.ID, 0), "workspace write refused: no space left on device")
	require.Contains(t, b.output(t, task.ID, "after"), `"ok":false`, "the next step ran")

	var st syscall.Statfs_t
	require.NoError(t, syscall.Statfs(mnt, &st))
	require.GreaterOrEqual(t, int64(st.Bavail)*st.Bsize, int64(store.DefaultMinFreeBytes), "the store's floor is still free")
	require.NoError(t, b.e.Close(b.ctx))
	b.e = nil
	rep, err := store.Verify(filepath.Join(mnt, "store"), nil)
	require.NoError(t, err)
	require.False(t, rep.Damaged(), "%v", rep.Findings)
}

// mountTmpfs mounts a tmpfs of size bytes on a new directory, unmounted when
// the test ends. Outside CI a test that cannot mount is skipped; in CI
// (CI=true) it fails.
func mountTmpfs(t *testing.T, size int64) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "mnt")
	require.NoError(t, os.Mkdir(dir, 0o755))
	err := syscall.Mount("tmpfs", dir, "tmpfs", 0, fmt.Sprintf("size=%d", size))
	if errors.Is(err, syscall.EPERM) && os.Getenv("CI") == "" {
		t.Skipf("cannot mount a tmpfs to fill (%v): run as root (CI must)", err)
	}
	require.NoError(t, err, "mount tmpfs on %s", dir)
	t.Cleanup(func() { require.NoError(t, syscall.Unmount(dir, 0)) })
	return dir
}
