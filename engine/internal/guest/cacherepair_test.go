package guest

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lhengine/lhengine/internal/testwasm"
)

// cacheEntries lists the files of a compilation cache directory.
func cacheEntries(t *testing.T, dir string) []string {
	t.Helper()
	var files []string
	require.NoError(t, filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			files = append(files, p)
		}
		return err
	}))
	return files
}

// TestDamagedCacheEntryIsCompiledAgain: an entry of the compilation cache
// that wazero cannot read (a disk fault, a copy cut short) no longer fails
// every load of its plugin in every home that shares the cache: the entry
// is found, removed and compiled again, and the plugin runs.
func TestDamagedCacheEntryIsCompiledAgain(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	path := testwasm.CGuest(t, "conformance")

	r1 := ownRuntime(t, Config{CacheDir: dir})
	_, err := r1.Load(ctx, path, "")
	require.NoError(t, err)
	require.NoError(t, r1.Close(ctx))
	entries := cacheEntries(t, dir)
	require.NotEmpty(t, entries)
	for _, f := range entries {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		require.Greater(t, len(b), 64)
		// Keep the header, damage what follows.
		require.NoError(t, os.WriteFile(f, b[:len(b)/3], 0o600))
	}

	r2 := ownRuntime(t, Config{CacheDir: dir})
	p, err := r2.Load(ctx, path, "")
	require.NoError(t, err, "a damaged cache entry is compiled again")
	res, err := p.Run(ctx, Request{Step: "s", Attempt: 1, Input: json.RawMessage(`{"mode":"echo"}`)}, Limits{}, nil)
	require.NoError(t, err)
	require.JSONEq(t, `{"input":{"mode":"echo"},"step":"s","attempt":1,"item":null}`, string(res.Output))

	// The entries are whole again: a third runtime loads from them.
	r3 := ownRuntime(t, Config{CacheDir: dir})
	_, err = r3.Load(ctx, path, "")
	require.NoError(t, err)
}

// TestBadModuleIsNotACacheFault: bytes that are no module fail as before,
// with or without a cache, and leave nothing in it.
func TestBadModuleIsNotACacheFault(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	r := ownRuntime(t, Config{CacheDir: dir})
	bad := filepath.Join(t.TempDir(), "bad.wasm")
	require.NoError(t, os.WriteFile(bad, []byte("\x00asm\x01\x00\x00\x00\x01\xff"), 0o600))
	_, err := r.Load(ctx, bad, "")
	require.Error(t, err)
	require.Empty(t, cacheEntries(t, dir))
}
