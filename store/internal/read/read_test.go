package read

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/dgraph-io/badger/v4"
	"github.com/stretchr/testify/require"

	"github.com/lhengine/lhengine/ledger"
	"github.com/lhengine/lhengine/store/internal/kv"
)

// records is an in-memory store whose records the tests write by hand.
type records struct {
	t  *testing.T
	db *badger.DB
	kv *kv.DB
}

func newRecords(t *testing.T) *records {
	t.Helper()
	db, err := badger.Open(badger.DefaultOptions("").WithInMemory(true).WithLogger(nil))
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, db.Close()) })
	return &records{t: t, db: db, kv: kv.New(db, nil)}
}

func (r *records) write(fn func(*kv.Tx) error) {
	r.t.Helper()
	txn := r.db.NewTransaction(true)
	defer txn.Discard()
	require.NoError(r.t, r.kv.Tx(txn, true, nil).Run(fn))
	require.NoError(r.t, txn.Commit())
}

func (r *records) read(fn func(*Reader) error) error {
	return r.kv.View(func(t *kv.Tx) error { return fn(New(t)) })
}

// fanOut writes task id with one fan-out step of n units, each committed
// in its attempt 2 (attempt 1 failed), with output "out-<item>".
func (r *records) fanOut(id string, n int) *ledger.Task {
	task := &ledger.Task{ID: id, Name: "t", Status: ledger.Succeeded,
		Steps: []ledger.StepState{{Name: "each", FanOut: true, Planned: true, Pass: 1, Units: n, Done: n}}}
	r.write(func(t *kv.Tx) error {
		for i := range n {
			u := ledger.Unit{Task: id, Item: i, Pass: 1, State: ledger.UnitDone, Committed: 2, Attempt: 2}
			if err := t.PutJSON(kv.UnitKey(id, 0, i), u); err != nil {
				return err
			}
			failed := ledger.Attempt{Item: i, Attempt: 1, Failure: &ledger.Failure{Message: "boom"}}
			if err := t.PutJSON(kv.AttemptKey(id, 0, i, 1), failed); err != nil {
				return err
			}
			done := ledger.Attempt{Item: i, Attempt: 2, Output: json.RawMessage(fmt.Sprintf(`"out-%d"`, i))}
			if err := t.PutJSON(kv.AttemptKey(id, 0, i, 2), done); err != nil {
				return err
			}
		}
		return t.SaveTask(task)
	})
	return task
}

// TestStepOutput: a fan-out's output lists each unit's committed attempt
// in item order; a limit stops the read; a missing committed attempt
// fails it.
func TestStepOutput(t *testing.T) {
	t.Parallel()
	r := newRecords(t)
	task := r.fanOut("01J", 3)
	require.NoError(t, r.read(func(rd *Reader) error {
		out, err := rd.StepOutput("01J", 0)
		require.NoError(t, err)
		require.JSONEq(t, `["out-0","out-1","out-2"]`, string(out))
		_, err = rd.StepOutputLimited(task, 0, 12)
		require.ErrorIs(t, err, ledger.ErrTooLarge)
		_, err = rd.StepOutput("01J", 1)
		require.ErrorIs(t, err, ledger.ErrNotFound)
		page, total, err := rd.AttemptsPage("01J", 0, -1, 2)
		require.NoError(t, err)
		require.Len(t, page, 2)
		require.Equal(t, 6, total)
		item, err := rd.CommittedItem(task, 0, 1)
		require.NoError(t, err)
		require.JSONEq(t, `"out-1"`, string(item.Output))
		outs, done, err := rd.CommittedOutputs(task, 0, 2)
		require.NoError(t, err)
		require.Len(t, outs, 2)
		require.Equal(t, 3, done)
		win, err := rd.WindowOutputs(task, 0, []int{2, 0}, -1)
		require.NoError(t, err)
		require.JSONEq(t, `["out-2","out-0"]`, string(win))
		return nil
	}))
	r.write(func(t *kv.Tx) error { return t.Del(kv.AttemptKey("01J", 0, 1, 2)) })
	err := r.read(func(rd *Reader) error { _, err := rd.StepOutput("01J", 0); return err })
	require.ErrorIs(t, err, ledger.ErrNotFound)
	require.ErrorContains(t, err, "attempt record o/01J/0000/00000001/00000002")
}

// TestFindTask: an id, or a unique prefix of one of 6 characters or more.
func TestFindTask(t *testing.T) {
	t.Parallel()
	r := newRecords(t)
	r.fanOut("01JAAAAA", 1)
	r.fanOut("01JAAAAB", 1)
	r.fanOut("01JBBBBB", 1)
	require.NoError(t, r.read(func(rd *Reader) error {
		task, err := rd.FindTask("01jbbb")
		require.NoError(t, err)
		require.Equal(t, "01JBBBBB", task.ID)
		require.Len(t, task.Steps, 1)
		_, err = rd.FindTask("01JAAA")
		require.ErrorContains(t, err, "ambiguous: 01JAAAAA, 01JAAAAB")
		_, err = rd.FindTask("01JB")
		require.ErrorIs(t, err, ledger.ErrNotFound, "too short")
		tasks, err := rd.Tasks()
		require.NoError(t, err)
		require.Len(t, tasks, 3)
		versions, err := rd.TaskVersions()
		require.NoError(t, err)
		require.Len(t, versions, 3)
		return nil
	}))
}

// TestNotesPage: a page holds the notes a query selects, from a seq on,
// and says where the next page starts.
func TestNotesPage(t *testing.T) {
	t.Parallel()
	r := newRecords(t)
	task := &ledger.Task{ID: "T", Status: ledger.Running, Steps: []ledger.StepState{{Name: "a"}}, Notes: 10}
	r.write(func(t *kv.Tx) error {
		for i := range 10 {
			kind := "finding"
			if i%2 == 1 {
				kind = ledger.NoteDecision
			}
			if err := t.PutJSON(kv.NoteKey("T", uint64(i)), ledger.Note{Seq: uint64(i), Kind: kind, Text: fmt.Sprint("note ", i)}); err != nil {
				return err
			}
		}
		return t.SaveTask(task)
	})
	require.NoError(t, r.read(func(rd *Reader) error {
		page, next, err := rd.NotesPage("T", ledger.NoteQuery{Kind: ledger.NoteDecision, Limit: 2})
		require.NoError(t, err)
		require.Len(t, page, 2)
		require.EqualValues(t, 1, page[0].Seq)
		require.EqualValues(t, 4, next)
		page, next, err = rd.NotesPage("T", ledger.NoteQuery{Kind: ledger.NoteDecision, From: next})
		require.NoError(t, err)
		require.Len(t, page, 3)
		require.Zero(t, next, "no note left")
		recent, err := rd.RecentNotes(task, 3, nil)
		require.NoError(t, err)
		require.EqualValues(t, []uint64{9, 8, 7}, []uint64{recent[0].Seq, recent[1].Seq, recent[2].Seq})
		open, err := rd.OpenNotes("T", 5, 10)
		require.NoError(t, err)
		require.Len(t, open, 2, "notes 6 and 8: decisions are protected")
		return nil
	}))
}

// TestAbsentRecords: what a task never wrote reads as nothing, or as
// ErrNotFound when it was asked for by name.
func TestAbsentRecords(t *testing.T) {
	t.Parallel()
	r := newRecords(t)
	r.fanOut("T", 1)
	require.NoError(t, r.read(func(rd *Reader) error {
		facts, err := rd.Facts("T")
		require.NoError(t, err)
		require.Nil(t, facts)
		_, err = rd.Approval("T", "1")
		require.ErrorIs(t, err, ledger.ErrNotFound)
		_, err = rd.Approval("T", "x")
		require.ErrorIs(t, err, ledger.ErrNotFound)
		_, err = rd.Manifest("T")
		require.ErrorIs(t, err, ledger.ErrNotFound)
		u, err := rd.Usage("T")
		require.NoError(t, err)
		require.Equal(t, ledger.Usage{}, u)
		for _, list := range []func() (int, error){
			func() (int, error) { l, err := rd.Effects("T"); return len(l), err },
			func() (int, error) { l, err := rd.Artifacts("T"); return len(l), err },
			func() (int, error) { l, err := rd.ModelCalls("T"); return len(l), err },
			func() (int, error) { l, err := rd.Notifications("T"); return len(l), err },
			func() (int, error) { l, err := rd.Approvals("T"); return len(l), err },
			func() (int, error) { l, err := rd.FailedItems("T"); return len(l), err },
		} {
			n, err := list()
			require.NoError(t, err)
			require.Zero(t, n)
		}
		return nil
	}))
}
