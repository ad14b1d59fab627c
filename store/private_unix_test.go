//go:build unix

package store

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/stretchr/testify/require"

	"github.com/lhengine/lhengine/store/internal/filecheck"
	"github.com/lhengine/lhengine/store/internal/storedir"
)

// TestStoreIsOwnerOnly: a new store's directory is 0700, and a store open
// to other users (made before the rule, or by hand) is closed at open,
// its directory 0700, its files and the lock and high-water mark beside it
// 0600, with a warning.
func TestStoreIsOwnerOnly(t *testing.T) {
	t.Parallel()
	f := newDiskFixture(t)
	f.build(t, 1)
	perm := func(p string) os.FileMode {
		fi, err := os.Stat(p)
		require.NoError(t, err)
		return fi.Mode().Perm()
	}
	require.Equal(t, os.FileMode(0o700), perm(f.dir))
	require.Equal(t, os.FileMode(0o600), perm(filecheck.MarkPath(f.dir)))
	require.Equal(t, os.FileMode(0o600), perm(storedir.LockPath(f.dir)))

	// Opened up, as a store made under umask 022 by an earlier version was.
	open := append([]string{filecheck.MarkPath(f.dir), storedir.LockPath(f.dir)}, filesWithSuffix(t, f.dir, "")...)
	for _, p := range open {
		require.NoError(t, os.Chmod(p, 0o644))
	}
	require.NoError(t, os.Chmod(f.dir, 0o755))
	var logs bytes.Buffer
	s := f.mustOpen(t, Options{Logger: hclog.New(&hclog.LoggerOptions{Output: &logs, Level: hclog.Warn})})
	require.Contains(t, logs.String(), "the store was readable by other users")
	require.Equal(t, os.FileMode(0o700), perm(f.dir))
	for _, p := range append(open, filesWithSuffix(t, f.dir, "")...) {
		if _, err := os.Stat(p); os.IsNotExist(err) {
			continue // Badger deleted it at open
		}
		require.Equal(t, os.FileMode(0o600), perm(p), filepath.Base(p))
	}
	require.NoError(t, s.Close())

	// A store that is owner-only opens without a word.
	logs.Reset()
	s = f.mustOpen(t, Options{Logger: hclog.New(&hclog.LoggerOptions{Output: &logs, Level: hclog.Warn})})
	require.NoError(t, s.Close())
	require.NotContains(t, logs.String(), "other users")
}
