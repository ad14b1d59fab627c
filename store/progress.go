package store

import (
	"encoding/json"
	"errors"
	"maps"
	"slices"
	"time"

	"github.com/dgraph-io/badger/v4"

	"github.com/lhengine/lhengine/ledger"
	"github.com/lhengine/lhengine/store/internal/kv"
)

// Progress as a person reads it (specs/ledger.md, "Progress"): the task
// record carries what a status needs, so reading a status costs the same
// for 10 committed units as for 100,000. The record holds the pinned
// progress block (ProgressSpec), the number of units of the progress step
// committed so far and a small ring of (time, committed) samples written by
// the commits themselves, at most one every ProgressSampleEvery; the rate is
// read off the ring and the newest commit.

// newProgress is the record Submit writes for spec over steps; nil, or a
// spec naming no step of steps, counts the units of every step.
func newProgress(spec *ledger.ProgressSpec, steps []ledger.StepState) *ledger.Progress {
	p := &ledger.Progress{ProgressSpec: ledger.ProgressSpec{StepIndex: -1}}
	if spec != nil {
		p.ProgressSpec = *spec
	}
	if p.StepIndex < 0 || p.StepIndex >= len(steps) || steps[p.StepIndex].Name != p.Step {
		p.Step, p.StepIndex = "", -1
	}
	return p
}

// sampleProgress counts a unit of step committed at now: the progress
// step's count and, at most every ProgressSampleEvery, a sample. A pause
// or a stall longer than ProgressStale starts the ring again, so the rate
// is that of the current run only.
func sampleProgress(task *ledger.Task, step int, now time.Time) {
	p := task.Meter
	if p == nil || (p.StepIndex >= 0 && p.StepIndex != step) {
		return
	}
	q := *p
	q.Committed++
	q.Last = ledger.ProgressSample{At: now, Committed: q.Committed}
	n := len(q.Samples)
	switch {
	case n == 0 || now.Sub(q.Samples[n-1].At) > ledger.ProgressStale:
		q.Samples = []ledger.ProgressSample{q.Last}
	case now.Sub(q.Samples[n-1].At) >= ledger.ProgressSampleEvery:
		q.Samples = append(slices.Clone(q.Samples[max(n+1-ledger.ProgressSamples, 0):]), q.Last)
	}
	task.Meter = &q
}

// countNote counts a note of kind a committed unit recorded.
func countNote(task *ledger.Task, kind string) {
	if task.Meter == nil {
		return
	}
	q := *task.Meter
	q.Kinds = maps.Clone(q.Kinds)
	if q.Kinds == nil {
		q.Kinds = map[string]int64{}
	}
	q.Kinds[kind]++
	task.Meter = &q
}

// notesScan bounds the notes one page looks at, matching or not: a
// filter that matches little returns a shorter page and where to go on.
const notesScan = 10000

// NotesPage returns the notes of task id that q selects, oldest first,
// from seq q.From on, and the seq to ask for the next page from (0 when no
// note is left to look at). It looks at no more than 10,000 notes, so a
// page may hold fewer than q.Limit notes and still have a next one.
func (r *reader) NotesPage(id string, q ledger.NoteQuery) ([]ledger.Note, uint64, error) {
	limit := q.Limit
	if limit <= 0 {
		limit = ledger.DefaultNotesPage
	}
	limit = min(limit, ledger.MaxNotesPage)
	out := []ledger.Note{}
	var next uint64
	seen := 0
	err := r.t.ScanFrom([]byte("n/"+id+"/"), kv.NoteKey(id, q.From), func(_, val []byte) (bool, error) {
		if len(out) == limit || seen == notesScan {
			return false, nil
		}
		var n ledger.Note
		if err := json.Unmarshal(val, &n); err != nil {
			return false, err
		}
		seen++
		next = n.Seq + 1
		if q.Match(&n) {
			out = append(out, n)
		}
		return true, nil
	})
	if err != nil {
		return nil, 0, err
	}
	if next == 0 || next >= r.noteCount(id) {
		next = 0
	}
	return out, next, nil
}

// noteCount is the seq the task's next note will take.
func (r *reader) noteCount(id string) uint64 {
	var task ledger.Task
	if err := r.t.GetJSON(kv.TaskKey(id), &task); err != nil {
		return 0
	}
	return task.Notes
}

// RecentNotes returns the newest notes of task, up to max, newest first,
// walking the notes back from the newest, never the older ones; enough,
// when not nil, ends the walk early once it says the notes read so far
// are enough.
func (r *reader) RecentNotes(task *ledger.Task, max int, enough func([]ledger.Note) bool) ([]ledger.Note, error) {
	out := make([]ledger.Note, 0, min(uint64(max), task.Notes))
	if max <= 0 || task.Notes == 0 {
		return out, nil
	}
	prefix := []byte("n/" + task.ID + "/")
	opts := badger.DefaultIteratorOptions
	opts.Prefix, opts.Reverse, opts.PrefetchSize = prefix, true, min(max, 64)
	it := r.t.Txn().NewIterator(opts)
	defer it.Close()
	for it.Seek(kv.NoteKey(task.ID, task.Notes)); it.ValidForPrefix(prefix) && len(out) < max; it.Next() {
		var n ledger.Note
		if err := kv.ItemValue(it.Item(), func(v []byte) error { return json.Unmarshal(v, &n) }); err != nil {
			return nil, err
		}
		out = append(out, n)
		if enough != nil && enough(out) {
			break
		}
	}
	return out, nil
}

// RecentApprovals returns the newest approvals of task, up to max, newest
// first, by point reads as RecentNotes.
func (r *reader) RecentApprovals(task *ledger.Task, max int) ([]ledger.Approval, error) {
	var out []ledger.Approval
	for seq, looked := task.NextApproval, 0; seq > 0 && len(out) < max && looked < 4*max; seq, looked = seq-1, looked+1 {
		var a ledger.Approval
		if err := r.t.GetJSON(kv.ApprovalKey(task.ID, seq), &a); err != nil {
			if errors.Is(err, ledger.ErrNotFound) {
				continue
			}
			return nil, err
		}
		out = append(out, a)
	}
	return out, nil
}
