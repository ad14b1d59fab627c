package store

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lhengine/lhengine/ledger"
	"github.com/lhengine/lhengine/store/internal/kv"
)

// module returns fake module bytes of n bytes (the store does not look
// inside) and their sha256.
func module(n int, seed byte) ([]byte, string) {
	b := bytes.Repeat([]byte{seed, seed + 1, seed + 2}, n/3+1)[:n]
	sum := sha256.Sum256(b)
	return b, hex.EncodeToString(sum[:])
}

// setupDisk is setup on disk: in-memory Badger cannot hold values of a
// chunk's size.
func setupDisk(t *testing.T) *testBundle {
	t.Helper()
	s, err := Open(t.TempDir(), Options{NoSync: true})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, s.Close()) })
	return &testBundle{s: s, ctx: t.Context()}
}

// submitPinned submits a one-step task pinning the given module.
func (b *testBundle) submitPinned(t *testing.T, wasm []byte, sum string) *ledger.Task {
	t.Helper()
	task, created, err := b.s.Submit(b.ctx, ledger.NewTask{Name: "t", Steps: plainSteps("a", "b"), Manifest: ledger.Manifest{
		Plugins: map[string]ledger.PluginPin{"a": {Path: "/gone/a.wasm", SHA256: sum}, "b": {Path: "/gone/b.wasm", SHA256: sum}},
	}, Modules: map[string][]byte{sum: wasm}})
	require.NoError(t, err)
	require.True(t, created)
	return task
}

func TestModulesAreStoredOnceChunkedAndVerified(t *testing.T) {
	t.Parallel()
	b := setupDisk(t)
	wasm, sum := module(2*ledger.ArtifactChunk+5, 7) // three chunks
	for range 3 {
		b.submitPinned(t, wasm, sum)
	}
	var blobs, chunks int
	require.NoError(t, b.s.view(func(tx *kv.Tx) error {
		blobs, chunks = len(tx.Keys([]byte("B/"))), len(tx.Keys([]byte("b/")))
		return nil
	}))
	require.Equal(t, 1, blobs, "a module pinned by three tasks is stored once")
	require.Equal(t, 3, chunks)

	got, err := b.s.Module(sum)
	require.NoError(t, err)
	require.True(t, bytes.Equal(wasm, got))

	_, other := module(10, 1)
	_, err = b.s.Module(other)
	require.ErrorIs(t, err, ledger.ErrNotFound)
	_, err = b.s.Module("nope")
	require.ErrorIs(t, err, ledger.ErrNotFound)

	// Bytes that are not the pinned module, or no bytes at all, are refused
	// before anything is written.
	_, _, err = b.s.Submit(b.ctx, ledger.NewTask{Name: "t", Steps: plainSteps("a"), Manifest: ledger.Manifest{
		Plugins: map[string]ledger.PluginPin{"a": {Path: "a.wasm", SHA256: other}},
	}, Modules: map[string][]byte{other: wasm}})
	require.ErrorContains(t, err, "do not have the pinned sha256")
	_, _, err = b.s.Submit(b.ctx, ledger.NewTask{Name: "t", Steps: plainSteps("a"), Manifest: ledger.Manifest{
		Plugins: map[string]ledger.PluginPin{"a": {Path: "a.wasm", SHA256: other}},
	}, Modules: map[string][]byte{}})
	require.ErrorContains(t, err, "was not given")

	// Damaged bytes are noticed when the module is read.
	require.NoError(t, b.s.update(b.ctx, func(tx *kv.Tx) error { return tx.Put(kv.ChunkKey(sum, 1), []byte("x")) }))
	_, err = b.s.Module(sum)
	require.ErrorContains(t, err, "damaged")
}
