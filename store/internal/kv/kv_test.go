package kv

import (
	"bytes"
	"encoding/json"
	"errors"
	"slices"
	"testing"

	"github.com/dgraph-io/badger/v4"
	"github.com/stretchr/testify/require"

	"github.com/lhengine/lhengine/ledger"
	"github.com/lhengine/lhengine/store/internal/index"
)

func open(t *testing.T) *DB {
	t.Helper()
	db, err := badger.Open(badger.DefaultOptions("").WithInMemory(true).WithLogger(nil))
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, db.Close()) })
	return New(db, nil)
}

// update runs fn in a read-write transaction of its own and commits it,
// applying its index changes to x once committed, as the store's group
// commit does.
func update(t *testing.T, d *DB, x *index.Index, fn func(*Tx) error) error {
	t.Helper()
	txn := badgerOf(d).NewTransaction(true)
	defer txn.Discard()
	tx := d.Tx(txn, true, nil)
	if err := tx.Run(fn); err != nil {
		return err
	}
	require.NoError(t, txn.Commit())
	tx.CacheWritten()
	for _, fn := range tx.Afters() {
		fn(x)
	}
	return nil
}

// TestKeysSortNumerically: fixed-width hex keeps byte order numeric order,
// and each table's records of a task are under one prefix.
func TestKeysSortNumerically(t *testing.T) {
	t.Parallel()
	for _, pair := range [][2][]byte{
		{StepKey("T", 9), StepKey("T", 10)},
		{UnitKey("T", 1, 255), UnitKey("T", 1, 256)},
		{UnitKey("T", 1, 1<<20), UnitKey("T", 2, 0)},
		{AttemptKey("T", 0, 1, 15), AttemptKey("T", 0, 1, 16)},
		{EventKey("T", 99), EventKey("T", 100)},
		{NoteKey("T", 1), NoteKey("T", 1<<40)},
		{ApprovalKey("T", 9), ApprovalKey("T", 10)},
		{ChunkKey("s", 9), ChunkKey("s", 10)},
	} {
		require.Negative(t, bytes.Compare(pair[0], pair[1]), "%s < %s", pair[0], pair[1])
	}
	require.True(t, bytes.HasPrefix(UnitKey("T", 3, 4), UnitStepPrefix("T", 3)))
	require.True(t, bytes.HasPrefix(AttemptKey("T", 3, 4, 5), AttemptPrefix("T", 3)))
	require.True(t, bytes.HasPrefix(StepKey("T", 3), StepPrefix("T")))
	require.Equal(t, "j/T/notify/000000000000000c", string(NotifyEffectKey("T", 12)))
}

// TestRecords: JSON and raw records, what is absent, deletion, and the
// scans, all in key order.
func TestRecords(t *testing.T) {
	t.Parallel()
	d := open(t)
	x := index.New()
	require.NoError(t, update(t, d, x, func(tx *Tx) error {
		require.False(t, tx.Wrote())
		for i := range 5 {
			if err := tx.PutJSON(NoteKey("T", uint64(i)), ledger.Note{Seq: uint64(i), Text: "n"}); err != nil {
				return err
			}
		}
		require.True(t, tx.Wrote())
		require.Positive(t, tx.Size())
		return tx.Put([]byte("k/x"), []byte("T"))
	}))
	require.NoError(t, d.View(func(tx *Tx) error {
		var n ledger.Note
		require.NoError(t, tx.GetJSON(NoteKey("T", 3), &n))
		require.EqualValues(t, 3, n.Seq)
		require.ErrorIs(t, tx.GetJSON(NoteKey("T", 9), &n), ledger.ErrNotFound)
		raw, err := tx.GetRaw([]byte("k/x"))
		require.NoError(t, err)
		require.Equal(t, "T", string(raw))
		_, err = tx.GetRaw([]byte("k/y"))
		require.ErrorIs(t, err, ledger.ErrNotFound)

		var seqs []uint64
		require.NoError(t, tx.ScanFrom([]byte("n/T/"), NoteKey("T", 2), func(_, val []byte) (bool, error) {
			var n ledger.Note
			require.NoError(t, json.Unmarshal(val, &n))
			seqs = append(seqs, n.Seq)
			return len(seqs) < 2, nil
		}))
		require.Equal(t, []uint64{2, 3}, seqs)
		require.Len(t, tx.Keys([]byte("n/T/")), 5)
		keys, size := tx.KeysLimit([]byte("n/T/"), 3, 10)
		require.Len(t, keys, 3)
		require.Greater(t, size, int64(10))
		stop := errors.New("stop")
		require.ErrorIs(t, tx.Scan([]byte("n/"), func(_, _ []byte) (bool, error) { return false, stop }), stop)
		return nil
	}))
	require.NoError(t, update(t, d, x, func(tx *Tx) error { return tx.Del(NoteKey("T", 0)) }))
	require.NoError(t, d.View(func(tx *Tx) error {
		require.Len(t, tx.Keys([]byte("n/T/")), 4)
		return nil
	}))
}

func newTask(id string, n int) *ledger.Task {
	task := &ledger.Task{ID: id, Name: "t", Status: ledger.Running}
	for i := range n {
		task.Steps = append(task.Steps, ledger.StepState{Name: string(rune('a' + i)), Limit: 1})
	}
	return task
}

// TestTaskRecords: a task is saved as a header and a record per step; an
// operation loads the steps it touches, and saving writes only those that
// changed; a whole read fills every step.
func TestTaskRecords(t *testing.T) {
	t.Parallel()
	d := open(t)
	x := index.New()
	require.NoError(t, update(t, d, x, func(tx *Tx) error { return tx.SaveTask(newTask("T", 3)) }))
	require.NoError(t, d.View(func(tx *Tx) error {
		require.Len(t, tx.Keys(StepPrefix("T")), 3)
		raw, err := tx.GetRaw(TaskKey("T"))
		require.NoError(t, err)
		require.NotContains(t, string(raw), `"steps"`)
		require.Contains(t, string(raw), `"step_count":3`)
		return nil
	}))

	versions := func() []uint64 {
		var out []uint64
		require.NoError(t, badgerOf(d).View(func(txn *badger.Txn) error {
			for i := range 3 {
				item, err := txn.Get(StepKey("T", i))
				require.NoError(t, err)
				out = append(out, item.Version())
			}
			return nil
		}))
		return out
	}
	before := versions()
	require.NoError(t, update(t, d, x, func(tx *Tx) error {
		task := new(ledger.Task)
		require.NoError(t, tx.GetJSON(TaskKey("T"), task))
		require.Nil(t, task.Steps)
		require.Equal(t, 3, task.StepCount())
		tx.Step(task, 1).Done = 7
		_ = tx.StepValue(task, 2) // read, not changed
		loaded, partial := LoadedSteps(task)
		require.True(t, partial)
		require.Contains(t, loaded, 1)
		require.NotContains(t, loaded, 2, "StepValue keeps nothing loaded")
		return tx.SaveTask(task)
	}))
	after := versions()
	require.Equal(t, before[0], after[0])
	require.NotEqual(t, before[1], after[1], "the changed step is written")
	require.Equal(t, before[2], after[2])

	require.NoError(t, d.View(func(tx *Tx) error {
		task, err := tx.LoadTask("T")
		require.NoError(t, err)
		require.Len(t, task.Steps, 3)
		require.Nil(t, task.Partial)
		require.Equal(t, 7, task.Steps[1].Done)
		_, partial := LoadedSteps(task)
		require.False(t, partial)
		return nil
	}))
}

// TestAMissingStepFailsTheOperation: a step record that cannot be read
// reads as a zero step and fails the operation (Err), whatever it returns;
// a whole read of the task says the store is damaged.
func TestAMissingStepFailsTheOperation(t *testing.T) {
	t.Parallel()
	d := open(t)
	x := index.New()
	require.NoError(t, update(t, d, x, func(tx *Tx) error { return tx.SaveTask(newTask("T", 2)) }))
	require.NoError(t, update(t, d, x, func(tx *Tx) error { return tx.Del(StepKey("T", 1)) }))
	err := d.View(func(tx *Tx) error {
		task := new(ledger.Task)
		require.NoError(t, tx.GetJSON(TaskKey("T"), task))
		require.Equal(t, ledger.StepState{}, *tx.Step(task, 1))
		require.Error(t, tx.Err())
		_ = tx.Step(task, 5)
		return nil
	})
	require.ErrorIs(t, err, ledger.ErrNotFound)
	require.ErrorContains(t, err, "step 1 of task T")
	err = d.View(func(tx *Tx) error { _, err := tx.LoadTask("T"); return err })
	require.ErrorIs(t, err, ErrDamaged)
}

// TestTheCacheServesCopies: a task read twice at one version is decoded
// once and handed out as copies; a record written in the transaction
// reading it is decoded.
func TestTheCacheServesCopies(t *testing.T) {
	t.Parallel()
	d := open(t)
	x := index.New()
	require.NoError(t, update(t, d, x, func(tx *Tx) error { return tx.SaveTask(newTask("T", 2)) }))
	read := func() *ledger.Task {
		task := new(ledger.Task)
		require.NoError(t, d.View(func(tx *Tx) error { return tx.GetJSON(TaskKey("T"), task) }))
		return task
	}
	a := read()
	a.Name = "changed by a reader"
	require.Equal(t, "t", read().Name, "a copy")
	require.NoError(t, update(t, d, x, func(tx *Tx) error {
		task := new(ledger.Task)
		require.NoError(t, tx.GetJSON(TaskKey("T"), task))
		task.Name = "renamed"
		require.NoError(t, tx.SaveTask(task))
		again := new(ledger.Task)
		require.NoError(t, tx.GetJSON(TaskKey("T"), again))
		require.Equal(t, "renamed", again.Name, "this transaction's write")
		return nil
	}))
	require.Equal(t, "renamed", read().Name)
}

// TestSnapshotsShareThePrefix: lease snapshots hold the steps before the
// cursor, grown only once the claiming transaction committed, and a
// truncated prefix is read again.
func TestSnapshotsShareThePrefix(t *testing.T) {
	t.Parallel()
	d := open(t)
	x := index.New()
	task := newTask("T", 4)
	task.Cursor = 2
	task.Steps[0].Done = 1
	require.NoError(t, update(t, d, x, func(tx *Tx) error { return tx.SaveTask(task) }))
	snap := func() *ledger.Task {
		var out *ledger.Task
		require.NoError(t, update(t, d, x, func(tx *Tx) error {
			task := new(ledger.Task)
			require.NoError(t, tx.GetJSON(TaskKey("T"), task))
			out = tx.Snapshot(task)
			return nil
		}))
		return out
	}
	s1 := snap()
	require.Len(t, s1.Steps, 2)
	require.Equal(t, 1, s1.Steps[0].Done)
	require.Nil(t, s1.Partial)
	s2 := snap()
	require.Same(t, &s1.Steps[0], &s2.Steps[0], "shared, not copied")

	require.NoError(t, update(t, d, x, func(tx *Tx) error {
		task := new(ledger.Task)
		require.NoError(t, tx.GetJSON(TaskKey("T"), task))
		tx.Step(task, 0).Done = 2
		return tx.SaveTask(task)
	}))
	d.TruncatePrefix("T", 0)
	s3 := snap()
	require.Equal(t, 2, s3.Steps[0].Done)
	require.Equal(t, 1, s1.Steps[0].Done, "an earlier snapshot is not changed")
	d.DropPrefix("T")
}

// TestBatchState: the operations sharing one transaction see the units
// the others took and made ready, and index changes wait for the commit.
func TestBatchState(t *testing.T) {
	t.Parallel()
	d := open(t)
	txn := badgerOf(d).NewTransaction(true)
	defer txn.Discard()
	shared := &Batch{}
	a, b := d.Tx(txn, true, shared), d.Tx(txn, true, shared)
	r := index.Ref{Task: "T", Step: 0, Item: 1}
	a.Batch().Taken[r] = true
	a.Batch().Ready = append(a.Batch().Ready, r)
	require.True(t, b.Batch().Taken[r])
	require.True(t, slices.Contains(b.Batch().Ready, r))
	x := index.New()
	a.After(func(x *index.Index) { x.AddActive("T") })
	require.Empty(t, x.Active)
	for _, fn := range a.Afters() {
		fn(x)
	}
	require.Equal(t, []string{"T"}, x.Active)
}

// badgerOf is the Badger database of a DB made by New.
func badgerOf(d *DB) *badger.DB { return d.be.(badgerBackend).db }
