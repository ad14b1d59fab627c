package blob

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/stretchr/testify/require"

	"github.com/lhengine/lhengine/ledger"
	"github.com/lhengine/lhengine/store/internal/kv"
	"github.com/lhengine/lhengine/store/internal/quota"
)

func setup(t *testing.T) *Store {
	t.Helper()
	// On disk: chunks of a MiB go to the value log, which an in-memory
	// Badger does not have.
	db, err := badger.Open(badger.DefaultOptions(t.TempDir()).WithLogger(nil).
		WithValueThreshold(kv.ValueThreshold).WithMemTableSize(1 << 20).WithValueLogFileSize(16 << 20))
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, db.Close()) })
	d := kv.New(db, nil)
	update := func(_ context.Context, fn func(*kv.Tx) error) error {
		txn := db.NewTransaction(true)
		defer txn.Discard()
		if err := d.Tx(txn, true, nil).Run(fn); err != nil {
			return err
		}
		return txn.Commit()
	}
	return &Store{DB: d, Update: update, Now: func() time.Time { return time.Unix(1, 0) }}
}

func sumOf(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func (s *Store) keys(t *testing.T, prefix string) int {
	n := 0
	require.NoError(t, s.DB.View(func(tx *kv.Tx) error { n = len(tx.Keys([]byte(prefix))); return nil }))
	return n
}

// TestPutAndRead: a blob is stored once, in chunks, and read back whole;
// an empty blob has one empty chunk; a chunk gone is damage.
func TestPutAndRead(t *testing.T) {
	t.Parallel()
	s := setup(t)
	ctx := t.Context()
	data := []byte(strings.Repeat("x", ledger.ArtifactChunk+10))
	sum := sumOf(data)
	stored, err := s.Put(ctx, sum, data)
	require.NoError(t, err)
	require.True(t, stored)
	stored, err = s.Put(ctx, sum, data)
	require.NoError(t, err)
	require.False(t, stored, "once")
	require.Equal(t, 2, s.keys(t, "b/"+sum+"/"))
	got, err := s.Read(sum)
	require.NoError(t, err)
	require.Equal(t, data, got)

	empty := sumOf(nil)
	_, err = s.Put(ctx, empty, nil)
	require.NoError(t, err)
	got, err = s.Read(empty)
	require.NoError(t, err)
	require.Empty(t, got)

	_, err = s.Read(sumOf([]byte("none")))
	require.ErrorIs(t, err, ledger.ErrNotFound)
	require.NoError(t, s.Update(ctx, func(tx *kv.Tx) error { return tx.Del(kv.ChunkKey(sum, 1)) }))
	_, err = s.Read(sum)
	require.ErrorContains(t, err, "chunk 1 of 2 is missing: the store is damaged")
}

// TestArtifacts: an artifact is put with its provenance and charged once;
// ReadAt reads from any offset across chunks.
func TestArtifacts(t *testing.T) {
	t.Parallel()
	s := setup(t)
	var in quota.Inflight
	data := []byte(strings.Repeat("ab", ledger.ArtifactChunk))
	p := ledger.Provenance{Task: "T", Step: "s", Item: 2, Name: "out.txt"}
	ref, err := s.PutArtifact(t.Context(), &in, p, data, 1<<30)
	require.NoError(t, err)
	require.Equal(t, "sha256:"+sumOf(data), ref)
	_, err = s.PutArtifact(t.Context(), &in, p, data, 1<<30)
	require.NoError(t, err)
	require.Equal(t, 1, s.keys(t, "p/T/"), "one provenance record for the same put again")
	require.Zero(t, in.Tasks())
	_, err = s.PutArtifact(t.Context(), &in, ledger.Provenance{Task: "U"}, data, 10)
	require.ErrorAs(t, err, new(*ledger.QuotaError))

	buf := make([]byte, 4)
	n, size, err := s.ReadAt(ref, int64(ledger.ArtifactChunk)-2, buf)
	require.NoError(t, err)
	require.Equal(t, 4, n)
	require.EqualValues(t, len(data), size)
	require.Equal(t, "abab", string(buf))
	n, _, err = s.ReadAt(ref, size, buf)
	require.NoError(t, err)
	require.Zero(t, n, "at the end")
	_, _, err = s.ReadAt("md5:x", 0, buf)
	require.ErrorIs(t, err, ledger.ErrNotFound)
}

// TestModules: the modules a manifest pins are stored once each; a module
// missing or not matching its pin is refused.
func TestModules(t *testing.T) {
	t.Parallel()
	s := setup(t)
	wasm := []byte("\x00asm")
	sum := sumOf(wasm)
	nt := ledger.NewTask{Manifest: ledger.Manifest{Plugins: map[string]ledger.PluginPin{
		"a": {Path: "a.wasm", SHA256: sum}, "b": {Path: "a.wasm", SHA256: sum}}}}
	require.ErrorContains(t, s.PutModules(t.Context(), nt, nil), "was not given")
	require.ErrorContains(t, s.PutModules(t.Context(), nt, map[string][]byte{sum: []byte("other")}), "do not have the pinned sha256")
	require.NoError(t, s.PutModules(t.Context(), nt, map[string][]byte{sum: wasm}))
	got, err := s.Module(sum)
	require.NoError(t, err)
	require.Equal(t, wasm, got)
	_, err = s.Module("short")
	require.ErrorIs(t, err, ledger.ErrNotFound)
}

// TestReplaySets: a replay set is stored with its index, which the
// manifest must pin; its blobs are what gc keeps for it.
func TestReplaySets(t *testing.T) {
	t.Parallel()
	s := setup(t)
	req := sumOf([]byte("request"))
	set, err := ledger.NewReplaySet("/d", map[string][]byte{req: []byte(`{"response":1}`)})
	require.NoError(t, err)
	require.ErrorContains(t, s.PutReplay(t.Context(), ledger.NewTask{Replay: set}), "does not pin")
	pin := set.Pin()
	require.ErrorContains(t, s.PutReplay(t.Context(), ledger.NewTask{Manifest: ledger.Manifest{ModelReplay: &pin}}), "was not given")
	require.NoError(t, s.PutReplay(t.Context(), ledger.NewTask{Replay: set, Manifest: ledger.Manifest{ModelReplay: &pin}}))
	idx, err := s.ReplayIndex(pin.SHA256)
	require.NoError(t, err)
	require.Len(t, idx, 1)
	rec, err := s.ReplayRecording(idx[req])
	require.NoError(t, err)
	require.JSONEq(t, `{"response":1}`, string(rec))
	used := map[string]bool{}
	require.NoError(t, s.ReplayBlobs(pin.SHA256, used))
	require.Equal(t, map[string]bool{pin.SHA256: true, idx[req]: true}, used)

	_, err = ParseReplayIndex("x", []byte(strings.Repeat("a", 64)+"\n"))
	require.ErrorContains(t, err, "the store is damaged")
}
