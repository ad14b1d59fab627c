//go:build unix

package storedir

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lhengine/lhengine/ledger"
	"github.com/lhengine/lhengine/store/internal/filecheck"
)

// TestLock: a writer's lock keeps out every other open; readers share.
func TestLock(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "store")
	w, err := Acquire(dir, false)
	require.NoError(t, err)
	require.FileExists(t, LockPath(dir))
	_, err = Acquire(dir, false)
	require.ErrorIs(t, err, ledger.ErrInUse)
	_, err = Acquire(dir, true)
	require.ErrorIs(t, err, ledger.ErrInUse)
	w.Release()
	w.Release() // twice is nothing

	r1, err := Acquire(dir, true)
	require.NoError(t, err)
	r2, err := Acquire(dir, true)
	require.NoError(t, err)
	_, err = Acquire(dir, false)
	require.ErrorIs(t, err, ledger.ErrInUse)
	r1.Release()
	r2.Release()
	w, err = Acquire(dir, false)
	require.NoError(t, err)
	w.Release()
}

// TestPrivate: a store open to others is made owner-only, the lock and the
// high-water mark beside it too; a private one is left as it is.
func TestPrivate(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "store")
	require.NoError(t, os.Mkdir(dir, 0o700))
	require.NoError(t, os.Chmod(dir, 0o755))
	files := []string{filepath.Join(dir, "MANIFEST"), LockPath(dir), filecheck.MarkPath(dir)}
	for _, p := range files {
		require.NoError(t, os.WriteFile(p, nil, 0o600))
		require.NoError(t, os.Chmod(p, 0o644))
	}
	opened, err := Private(dir)
	require.NoError(t, err)
	require.True(t, opened)
	fi, err := os.Stat(dir)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o700), fi.Mode().Perm())
	for _, p := range files {
		fi, err := os.Stat(p)
		require.NoError(t, err)
		require.Equal(t, os.FileMode(0o600), fi.Mode().Perm(), p)
	}
	opened, err = Private(dir)
	require.NoError(t, err)
	require.False(t, opened)
}
