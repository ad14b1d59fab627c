package guest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lhengine/lhengine/fault"
	"github.com/lhengine/lhengine/internal/testwasm"
)

func TestCompilationCache(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	// A C guest: the Go one takes long to compile under the race detector.
	path := testwasm.CGuest(t, "conformance")

	r1 := ownRuntime(t, Config{CacheDir: dir})
	_, err := r1.Load(ctx, path, "")
	require.NoError(t, err)
	require.NoError(t, r1.Close(ctx))
	require.NoError(t, r1.Close(ctx), "Close twice")

	var files int
	require.NoError(t, filepath.WalkDir(dir, func(_ string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			files++
		}
		return err
	}))
	require.Positive(t, files, "cache dir is empty after a compile")

	r2 := ownRuntime(t, Config{CacheDir: dir})
	p, err := r2.Load(ctx, path, "")
	require.NoError(t, err)
	res, err := p.Run(ctx, Request{Step: "s", Attempt: 1, Input: json.RawMessage(`{"mode":"echo"}`)}, Limits{}, nil)
	require.NoError(t, err)
	require.JSONEq(t, `{"input":{"mode":"echo"},"step":"s","attempt":1,"item":null}`, string(res.Output))
}

func TestRuntimeClosed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	r := ownRuntime(t, Config{})
	p := loadAs(t, r, "envelope", testwasm.CGuest(t, "envelope"))
	require.NoError(t, r.Close(ctx))

	_, err := r.Load(ctx, testwasm.CGuest(t, "envelope"), "")
	requireKind(t, err, fault.Internal, "closed")
	res, err := p.Run(ctx, Request{}, Limits{}, nil)
	requireKind(t, err, fault.Internal, "closed")
	require.NotNil(t, res)
}

// TestLoadOnce loads one module from many goroutines: it is compiled once
// and every caller gets the same compiled module.
func TestLoadOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	r := ownRuntime(t, Config{})
	wasm, err := os.ReadFile(testwasm.CGuest(t, "conformance"))
	require.NoError(t, err)

	plugins := make([]*Plugin, 16)
	var wg sync.WaitGroup
	for i := range plugins {
		wg.Add(1)
		go func() {
			defer wg.Done()
			plugins[i], _ = r.LoadBytes(ctx, "conformance", wasm)
		}()
	}
	wg.Wait()
	for _, p := range plugins {
		require.NotNil(t, p)
		require.Equal(t, plugins[0].compiled, p.compiled)
	}
	require.Len(t, r.modules, 1)
}

func TestInspect(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	read := func(path string) []byte {
		b, err := os.ReadFile(path)
		require.NoError(t, err)
		return b
	}

	t.Run("host imports", func(t *testing.T) {
		t.Parallel()
		info, err := Inspect(ctx, read(testwasm.CGuest(t, "conformance")))
		require.NoError(t, err)
		require.Equal(t, "1", info.ABI)
		require.True(t, info.Command)
		require.Contains(t, info.Imports, Func{Module: "lhengine_v1", Name: "log", Params: []string{"i32", "i32", "i32"}, Results: []string{"i32"}})
		require.Contains(t, info.Imports, Func{Module: "lhengine_v1", Name: "heartbeat", Params: []string{}, Results: []string{"i32"}})
		require.Contains(t, info.Exports, Func{Name: "_start", Params: []string{}, Results: []string{}})
		require.EqualValues(t, 2, info.MemoryMinPages)
		require.Equal(t, "lhengine_v1.log(i32, i32, i32) -> (i32)", info.Imports[0].String())
	})
	t.Run("envelope only", func(t *testing.T) {
		t.Parallel()
		info, err := Inspect(ctx, read(testwasm.CGuest(t, "envelope")))
		require.NoError(t, err)
		require.Equal(t, "1 (envelope only)", info.ABI)
		for _, f := range info.Imports {
			require.Equal(t, "wasi_snapshot_preview1", f.Module)
		}
	})
	t.Run("go", func(t *testing.T) {
		t.Parallel()
		info, err := Inspect(ctx, read(testwasm.GoGuest(t, "conformance")))
		require.NoError(t, err)
		require.Equal(t, "1", info.ABI)
		require.Greater(t, info.MemoryMinPages, uint32(2))
	})
	t.Run("other major version", func(t *testing.T) {
		t.Parallel()
		info, err := Inspect(ctx, read(testwasm.CGuest(t, "abi_v2")))
		requireKind(t, err, fault.ABIMismatch, "lhengine_v2.log")
		require.Equal(t, "2", info.ABI)
		require.True(t, info.Command)
	})
	t.Run("garbage", func(t *testing.T) {
		t.Parallel()
		info, err := Inspect(ctx, []byte("\x00asm\x01\x00\x00\x00\x05\xff"))
		requireKind(t, err, fault.BadModule)
		require.Equal(t, Info{}, info)
	})
	t.Run("matches Load", func(t *testing.T) {
		t.Parallel()
		wasm := read(testwasm.CGuest(t, "conformance"))
		info, err := Inspect(ctx, wasm)
		require.NoError(t, err)
		p, err := sharedRuntime(t).LoadBytes(ctx, "conformance", wasm)
		require.NoError(t, err)
		require.Equal(t, info, p.Info)
	})
}

// TestLoadPinned loads a module by its sha256: the bytes are fetched only
// until it is compiled, and bytes with another sha256 are refused.
func TestLoadPinned(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	r := ownRuntime(t, Config{})
	wasm, err := os.ReadFile(testwasm.CGuest(t, "conformance"))
	require.NoError(t, err)
	sum := sha256.Sum256(wasm)
	hexSum := hex.EncodeToString(sum[:])

	_, err = r.LoadPinned(ctx, "conformance", hexSum, func() ([]byte, error) { return append(wasm[:len(wasm):len(wasm)], 0), nil })
	requireKind(t, err, fault.HashMismatch, hexSum)

	fetches := 0
	fetch := func() ([]byte, error) { fetches++; return wasm, nil }
	for range 3 {
		p, err := r.LoadPinned(ctx, "conformance", hexSum, fetch)
		require.NoError(t, err)
		require.Equal(t, hexSum, p.SHA256)
		require.Equal(t, len(wasm), p.Size)
		res, err := p.Run(ctx, Request{Step: "s", Attempt: 1, Input: json.RawMessage(`{"mode":"echo"}`)}, Limits{}, nil)
		require.NoError(t, err)
		require.Contains(t, string(res.Output), `"step":"s"`)
	}
	require.Equal(t, 1, fetches, "a compiled module is not fetched again")

	want := errors.New("no such module")
	_, err = r.LoadPinned(ctx, "other", strings.Repeat("0", 64), func() ([]byte, error) { return nil, want })
	require.ErrorIs(t, err, want)
}
