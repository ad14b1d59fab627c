package engine_test

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lhengine/lhengine/engine"
	"github.com/lhengine/lhengine/internal/testwasm"
)

// TestCompilationCacheSharedByHomes: two homes naming one CacheDir share
// the compiled plugins: the second home's submission writes no entry and
// keeps no cache of its own; the directory is owner-only (an existing one
// is narrowed) and its entries 0600; OnCompile hears each distinct plugin
// of a task start and end.
func TestCompilationCacheSharedByHomes(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, c := range []string{"pipeline", "trap"} {
		testwasm.Copy(t, testwasm.CGuest(t, c), filepath.Join(dir, c+".wasm"))
	}
	task := filepath.Join(dir, "task.hcl")
	require.NoError(t, os.WriteFile(task, []byte(`
task "two" {
  step "a" {
    plugin = "pipeline.wasm"
    input  = { mode = "echo" }
  }
  step "b" {
    plugin = "trap.wasm"
  }
  step "c" {
    plugin = "pipeline.wasm"
    input  = { mode = "echo" }
  }
}
`), 0o644))
	cache := filepath.Join(dir, "cache")
	require.NoError(t, os.Mkdir(cache, 0o755))

	var mu sync.Mutex
	var events []engine.CompileEvent
	submit := func(home string) {
		e, err := engine.Open(context.Background(), engine.Config{Home: filepath.Join(dir, home), CacheDir: cache,
			OnCompile: func(ev engine.CompileEvent) {
				mu.Lock()
				events = append(events, ev)
				mu.Unlock()
			}})
		require.NoError(t, err)
		_, _, err = e.Submit(context.Background(), task, engine.SubmitOptions{})
		require.NoError(t, err)
		require.NoError(t, e.Close(context.Background()))
		_, err = os.Stat(filepath.Join(dir, home, "cache"))
		require.ErrorIs(t, err, os.ErrNotExist, "the home keeps no cache of its own")
	}
	entries := func() map[string]os.FileMode {
		m := map[string]os.FileMode{}
		require.NoError(t, filepath.WalkDir(cache, func(p string, d os.DirEntry, err error) error {
			require.NoError(t, err)
			fi, err := d.Info()
			require.NoError(t, err)
			m[p] = fi.Mode().Perm()
			return nil
		}))
		return m
	}

	submit("first")
	first := entries()
	require.Equal(t, os.FileMode(0o700), first[cache], "the cache directory is narrowed to its owner")
	files := 0
	for p, mode := range first {
		if p == cache {
			continue
		}
		if fi, err := os.Stat(p); err == nil && fi.IsDir() {
			require.Equal(t, os.FileMode(0o700), mode, p)
			continue
		}
		require.Equal(t, os.FileMode(0o600), mode, p)
		files++
	}
	require.Equal(t, 2, files, "one entry per distinct plugin")
	require.Len(t, events, 4, "two plugins, each started and ended")
	for _, ev := range events {
		require.NoError(t, ev.Err)
		require.Positive(t, ev.Size)
	}

	infos := func() map[string]os.FileInfo {
		m := map[string]os.FileInfo{}
		for p := range entries() {
			fi, err := os.Stat(p)
			require.NoError(t, err)
			m[p] = fi
		}
		return m
	}
	before := infos()
	submit("second")
	after := infos()
	require.Len(t, after, len(before))
	for p, fi := range before {
		require.True(t, os.SameFile(fi, after[p]), "%s was written again: the second home compiled instead of reading the first's entries", p)
		require.Equal(t, fi.ModTime(), after[p].ModTime(), p)
	}
}

// TestCompilationCacheOfAnotherKindRefused: a cache path that is a file is
// refused, saying so.
func TestCompilationCacheOfAnotherKindRefused(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	require.NoError(t, os.WriteFile(file, nil, 0o600))
	_, err := engine.Open(context.Background(), engine.Config{Home: filepath.Join(dir, "home"), CacheDir: file})
	require.Error(t, err)
	require.Contains(t, err.Error(), "compilation cache "+file)
}
