package main

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestCacheFlag: --cache names the shared cache, off keeps none, and by
// default it is lhengine in the user's cache directory.
func TestCacheFlag(t *testing.T) {
	t.Parallel()
	user, err := os.UserCacheDir()
	require.NoError(t, err)
	for _, c := range []struct {
		flag string
		dir  string
		off  bool
	}{
		{"", filepath.Join(user, "lhengine"), false},
		{"/some/dir", "/some/dir", false},
		{"off", "", true},
	} {
		a := &app{cache: c.flag}
		dir, off := a.cacheConfig()
		require.Equal(t, c.dir, dir, c.flag)
		require.Equal(t, c.off, off, c.flag)
	}
}

// TestSharedCacheUsedByTwoProcessesAtOnce: two submits into two fresh
// homes start at once with one empty --cache: both compile and write the
// same entries at once, and a third home then loads them; with --cache off
// nothing is written.
func TestSharedCacheUsedByTwoProcessesAtOnce(t *testing.T) {
	t.Parallel()
	b := setupProcs(t)
	path := filepath.Join(b.dir, "task.hcl")
	require.NoError(t, os.WriteFile(path, []byte(`
task "cached" {
  step "a" {
    plugin = "gate.wasm"
  }
}
`), 0o644))
	cache := filepath.Join(b.dir, "shared")
	lh := func(home string, args ...string) (int, string, string) {
		c := *b
		c.home = filepath.Join(b.dir, home)
		return c.lh(t, append([]string{"--cache", cache}, args...)...)
	}
	var wg sync.WaitGroup
	for _, home := range []string{"one", "two"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			code, out, errOut := lh(home, "submit", path)
			if code != 0 || len(strings.TrimSpace(out)) != 26 {
				t.Errorf("submit into %s: exit %d: %s%s", home, code, out, errOut)
			}
		}()
	}
	wg.Wait()
	require.False(t, t.Failed())
	var entries []string
	require.NoError(t, filepath.WalkDir(cache, func(p string, d os.DirEntry, err error) error {
		require.NoError(t, err)
		fi, err := d.Info()
		require.NoError(t, err)
		if d.IsDir() {
			require.Equal(t, os.FileMode(0o700), fi.Mode().Perm(), p)
		} else {
			require.Equal(t, os.FileMode(0o600), fi.Mode().Perm(), p)
			entries = append(entries, p)
		}
		return nil
	}))
	require.Len(t, entries, 1, "one whole entry, no temporary file left: %v", entries)

	before, err := os.Stat(entries[0])
	require.NoError(t, err)
	code, out, errOut := lh("three", "submit", path)
	require.Equal(t, 0, code, errOut)
	after, err := os.Stat(entries[0])
	require.NoError(t, err)
	require.True(t, os.SameFile(before, after) && before.ModTime().Equal(after.ModTime()), "the third home compiled again")
	id := strings.TrimSpace(out)
	code, out, errOut = lh("three", "status", id)
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, `"cached": queued`)

	code, _, errOut = lh("four", "--cache", "off", "submit", path)
	require.Equal(t, 0, code, errOut)
	_, err = os.Stat(filepath.Join(b.dir, "four", "cache"))
	require.ErrorIs(t, err, os.ErrNotExist)
}
