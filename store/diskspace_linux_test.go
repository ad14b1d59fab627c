package store

import (
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lhengine/lhengine/internal/diskfree"
	"github.com/lhengine/lhengine/ledger"
	"github.com/lhengine/lhengine/store/internal/kv"
)

// mountTmpfs mounts a tmpfs of size bytes on a new directory, unmounted when
// the test ends. Outside CI a test that cannot mount is skipped.
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

// TestFullDiskRefusesWritesAndKeepsData fills a real small file system.
// Badger writes through memory maps of files it does not allocate, so on a
// full disk a write would kill the process with SIGBUS: the floor must stop
// writes first, leave reads working, and lose nothing.
func TestFullDiskRefusesWritesAndKeepsData(t *testing.T) {
	t.Parallel()
	mnt := mountTmpfs(t, 48<<20)
	ballast := filepath.Join(mnt, "ballast")
	require.NoError(t, os.WriteFile(ballast, make([]byte, 8<<20), 0o644))
	f := &diskFixture{home: mnt, dir: filepath.Join(mnt, "store"), ctx: t.Context()}
	o := Options{MinFreeBytes: 16 << 20, memTable: 1 << 20}
	var s *Store // closed before the file system is unmounted
	t.Cleanup(func() {
		if s != nil {
			_ = s.Close()
		}
	})
	reopen := func() {
		t.Helper()
		if s != nil {
			require.NoError(t, s.Close())
		}
		s = nil
		s = f.mustOpen(t, o)
	}
	reopen()
	ids := f.commitTasks(t, s, 5)

	val := make([]byte, 60<<10)
	var err error
	n := 0
	for ; n < 10000; n++ {
		_, _ = rand.Read(val)
		err = s.update(f.ctx, func(t *kv.Tx) error {
			t.Durable = true
			return t.Put(fmt.Appendf(nil, "x/%08d", n), val)
		})
		if err != nil {
			break
		}
	}
	require.ErrorIs(t, err, ledger.ErrNoSpace, "after %d writes", n)
	require.Regexp(t, `no space left on device: \d+ MiB free in .*, floor 16 MiB`, err.Error())
	require.Positive(t, n)
	_, _, err = s.Submit(f.ctx, ledger.NewTask{Name: "t", Steps: plainSteps("a")})
	require.ErrorIs(t, err, ledger.ErrNoSpace)
	require.Equal(t, 5, countTasks(t, s), "reads still work")
	require.NoError(t, s.Close())
	s = nil

	// Reopened while the disk is still full (closing freed the log files:
	// fill it again), read-only, every task there.
	free, err := diskfree.Bytes(mnt)
	require.NoError(t, err)
	if free > 8<<20 {
		require.NoError(t, os.WriteFile(filepath.Join(mnt, "ballast2"), make([]byte, free-8<<20), 0o644))
	}
	reopen()
	require.Equal(t, 5, countTasks(t, s))
	_, err = s.Task(f.ctx, ids[4])
	require.NoError(t, err)
	_, _, err = s.Submit(f.ctx, ledger.NewTask{Name: "t", Steps: plainSteps("a")})
	require.ErrorIs(t, err, ledger.ErrNoSpace)

	// Space freed: writes resume, nothing was lost.
	require.NoError(t, os.Remove(ballast))
	_ = os.Remove(filepath.Join(mnt, "ballast2"))
	reopen()
	f.commitTasks(t, s, 1)
	require.Equal(t, 6, countTasks(t, s))
	require.NoError(t, s.view(func(tx *kv.Tx) error {
		_, err := tx.GetRaw(fmt.Appendf(nil, "x/%08d", n-1))
		return err
	}))
	require.NoError(t, s.Close())
	s = nil
	rep, err := Verify(f.dir, nil)
	require.NoError(t, err)
	require.False(t, rep.Damaged(), "%v", rep.Findings)
}
