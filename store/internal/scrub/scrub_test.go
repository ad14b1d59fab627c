package scrub

import (
	"errors"
	"testing"

	"github.com/dgraph-io/badger/v4"
	"github.com/stretchr/testify/require"

	"github.com/lhengine/lhengine/ledger"
	"github.com/lhengine/lhengine/store/internal/blob"
	"github.com/lhengine/lhengine/store/internal/kv"
)

func open(t *testing.T, fn func(*kv.Tx) error) *badger.DB {
	t.Helper()
	db, err := badger.Open(badger.DefaultOptions("").WithInMemory(true).WithLogger(nil))
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, db.Close()) })
	txn := db.NewTransaction(true)
	defer txn.Discard()
	require.NoError(t, kv.New(db, nil).Tx(txn, true, nil).Run(fn))
	require.NoError(t, txn.Commit())
	return db
}

func noReplay(string) (ledger.ReplayIndex, error) { return nil, ledger.ErrNotFound }

// TestAWholeStore: a task with its step records, unit and runnable mark
// is read and counted, and nothing is found.
func TestAWholeStore(t *testing.T) {
	t.Parallel()
	db := open(t, func(tx *kv.Tx) error {
		task := &ledger.Task{ID: "T", Status: ledger.Running, Steps: []ledger.StepState{{Name: "a"}, {Name: "b"}}}
		if err := tx.Put(kv.ActiveKey("T"), nil); err != nil {
			return err
		}
		if err := tx.PutJSON(kv.UnitKey("T", 0, 0), ledger.Unit{Task: "T"}); err != nil {
			return err
		}
		return tx.SaveTask(task)
	})
	res := Records(db, noReplay)
	require.Empty(t, res.Findings)
	require.Equal(t, 1, res.Tasks)
	require.Equal(t, 5, res.Keys)
	require.Positive(t, res.Bytes)
}

// TestFindings: each cross-reference that does not hold is a finding, in
// the order of the checks.
func TestFindings(t *testing.T) {
	t.Parallel()
	set := "5555555555555555555555555555555555555555555555555555555555555555"
	db := open(t, func(tx *kv.Tx) error {
		done := &ledger.Task{ID: "D", Status: ledger.Succeeded, Steps: []ledger.StepState{{Name: "a"}, {Name: "b"}}}
		if err := tx.SaveTask(done); err != nil {
			return err
		}
		for _, w := range []struct {
			key []byte
			val any
		}{
			{kv.ActiveKey("D"), nil},    // runnable mark of a finished task
			{kv.ActiveKey("gone"), nil}, // runnable mark of no task
			{kv.UnitKey("gone", 0, 0), ledger.Unit{}},
			{kv.BlobKey("ab"), blob.Meta{Size: 10, Chunks: 2}},
			{kv.ChunkKey("ab", 0), nil},
			{kv.ManifestKey("D"), ledger.Manifest{ModelReplay: &ledger.ReplayPin{SHA256: set}}},
		} {
			var err error
			if w.val == nil {
				err = tx.Put(w.key, nil)
			} else {
				err = tx.PutJSON(w.key, w.val)
			}
			if err != nil {
				return err
			}
		}
		if err := tx.Del(kv.StepKey("D", 1)); err != nil {
			return err
		}
		return tx.Put(kv.EventKey("D", 0), []byte("{not json"))
	})
	res := Records(db, func(string) (ledger.ReplayIndex, error) { return nil, errors.New("unused") })
	var got []string
	for _, f := range res.Findings {
		got = append(got, f.Check+" "+f.File)
	}
	require.Equal(t, []string{
		"record e/D/0000000000000000",
		"invariant a/D",
		"invariant a/gone",
		"invariant t/D",
		"invariant u/gone/0000/00000000",
		"invariant B/ab",
		"invariant m/D",
	}, got)
	require.Contains(t, res.Findings[5].Detail, "blob has 1 of its 2 chunks")
	require.Contains(t, res.Findings[6].Detail, "is not in the store")
}
