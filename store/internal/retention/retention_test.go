package retention

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/stretchr/testify/require"

	"github.com/lhengine/lhengine/ledger"
	"github.com/lhengine/lhengine/store/internal/blob"
	"github.com/lhengine/lhengine/store/internal/kv"
)

func setup(t *testing.T) *Retention {
	t.Helper()
	db, err := badger.Open(badger.DefaultOptions("").WithInMemory(true).WithLogger(nil))
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
	blobs := &blob.Store{DB: d, Update: update, Now: time.Now}
	return &Retention{DB: d, Badger: db, Update: update, Blobs: blobs}
}

func (r *Retention) keys(t *testing.T) []string {
	var out []string
	require.NoError(t, r.DB.View(func(tx *kv.Tx) error {
		for _, k := range tx.Keys(nil) {
			out = append(out, string(k))
		}
		return nil
	}))
	return out
}

func (r *Retention) task(t *testing.T, id string, status ledger.Status, key string) {
	require.NoError(t, r.Update(t.Context(), func(tx *kv.Tx) error {
		task := &ledger.Task{ID: id, Status: status, IdempotencyKey: key, Steps: []ledger.StepState{{Name: "a"}, {Name: "b"}}}
		for _, k := range [][]byte{kv.ManifestKey(id), kv.UnitKey(id, 0, 0), kv.EventKey(id, 0), kv.NoteKey(id, 0), kv.QuotaKey(id)} {
			if err := tx.Put(k, []byte(`{}`)); err != nil {
				return err
			}
		}
		if err := tx.Put(kv.IdemKey(key), []byte(id)); err != nil {
			return err
		}
		return tx.SaveTask(task)
	}))
}

// TestRemove: a finished task goes with every record of it and its
// idempotency key; another task's records stay; an unfinished or unknown
// task is refused.
func TestRemove(t *testing.T) {
	t.Parallel()
	r := setup(t)
	r.task(t, "A", ledger.Succeeded, "ka")
	r.task(t, "B", ledger.Running, "kb")
	before := len(r.keys(t))
	require.NoError(t, r.Remove(t.Context(), "A"))
	for _, k := range r.keys(t) {
		require.NotContains(t, k, "A", "every record of A is gone")
	}
	require.Len(t, r.keys(t), before/2)
	var nf *ledger.NotFinishedError
	require.ErrorAs(t, r.Remove(t.Context(), "B"), &nf)
	require.ErrorIs(t, r.Remove(t.Context(), "C"), ledger.ErrNotFound)
}

// TestDeleteAllInBatches: a deletion runs RemoveBatch keys at a time, and
// one cut short leaves the rest for the next.
func TestDeleteAllInBatches(t *testing.T) {
	t.Parallel()
	r := setup(t)
	require.NoError(t, r.Update(t.Context(), func(tx *kv.Tx) error {
		for i := range RemoveBatch + 5 {
			if err := tx.Put(fmt.Appendf(nil, "n/T/%08d", i), []byte("abc")); err != nil {
				return err
			}
		}
		return nil
	}))
	n, size, err := r.DeleteAll(t.Context(), 1, []byte("n/T/"))
	require.NoError(t, err)
	require.Equal(t, RemoveBatch, n)
	require.EqualValues(t, 3*RemoveBatch, size)
	require.Len(t, r.keys(t), 5)
	n, _, err = r.DeleteAll(t.Context(), 0, []byte("n/T/"))
	require.NoError(t, err)
	require.Equal(t, 5, n)
	require.Empty(t, r.keys(t))
}

// TestGC: blobs nothing refers to and chunks without a record go; a blob a
// manifest pins or a provenance names stays.
func TestGC(t *testing.T) {
	t.Parallel()
	r := setup(t)
	ctx := t.Context()
	sums := make([]string, 3)
	for i := range sums {
		data := []byte(fmt.Sprint("blob ", i))
		sum := sha256.Sum256(data)
		sums[i] = hex.EncodeToString(sum[:])
		_, err := r.Blobs.Put(ctx, sums[i], data)
		require.NoError(t, err)
	}
	orphan := fmt.Sprintf("%064x", 9)
	require.NoError(t, r.Update(ctx, func(tx *kv.Tx) error {
		m := ledger.Manifest{Plugins: map[string]ledger.PluginPin{"a": {SHA256: sums[0]}}}
		if err := tx.PutJSON(kv.ManifestKey("T"), m); err != nil {
			return err
		}
		if err := tx.PutJSON(kv.ProvKey("T", "a", 0, sums[1], "x"), ledger.Provenance{Ref: "sha256:" + sums[1]}); err != nil {
			return err
		}
		return tx.Put(kv.ChunkKey(orphan, 0), []byte("left by a put cut short"))
	}))
	st, err := r.GC(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, st.Blobs)
	require.EqualValues(t, len("blob 2"), st.BlobBytes)
	require.Equal(t, 1, st.Orphans)
	_, err = r.Blobs.Read(sums[2])
	require.ErrorIs(t, err, ledger.ErrNotFound)
	for _, sum := range sums[:2] {
		_, err := r.Blobs.Read(sum)
		require.NoError(t, err)
	}
}
