package store

import (
	"encoding/json"
	"errors"
	"github.com/dgraph-io/badger/v4"
	"maps"
	"slices"
	"strings"
	"time"
)

// Progress as a person reads it (specs/ledger.md, "Progress"): the task
// record carries what a status needs, so reading a status costs the same
// for 10 committed units as for 100,000. The record holds the pinned
// progress block (ProgressSpec), the number of units of the progress step
// committed so far and a small ring of (time, committed) samples written by
// the commits themselves, at most one every ProgressSampleEvery; the rate is
// read off the ring and the newest commit.

// Progress sampling.
const (
	// ProgressSamples is the size of the ring of samples.
	ProgressSamples = 10
	// ProgressSampleEvery is the least time between two samples.
	ProgressSampleEvery = 3 * time.Second
	// ProgressStale is how old the newest commit may be for a rate to be
	// told: a task that committed nothing for longer has no current rate.
	ProgressStale = time.Minute
)

// ProgressSpec is a task's progress block as pinned at submit.
type ProgressSpec struct {
	// Unit names one unit of the progress step ("pages"); "" reads "units".
	Unit string `json:"unit,omitempty"`
	// Step and StepIndex are the step whose units the progress counts;
	// StepIndex -1 (Step "") counts the units of every step.
	Step      string `json:"step,omitempty"`
	StepIndex int    `json:"step_index"`
	// Labels give counters words for people, by counter name.
	Labels map[string]string `json:"labels,omitempty"`
}

// ProgressSample is the number of units of the progress step committed by
// a time.
type ProgressSample struct {
	At        time.Time `json:"at"`
	Committed int64     `json:"committed"`
}

// Progress is a task's progress block and the samples its rate is read
// from (Task.Meter). A commit replaces the record, never changes it in
// place, so a Task copy may share it.
type Progress struct {
	ProgressSpec
	// Committed counts the units of the progress step committed, over
	// every pass (a unit run again by a repair counts again: it was work
	// done at the rate the samples measure).
	Committed int64 `json:"committed"`
	// Samples is the ring, oldest first, at most ProgressSamples long;
	// Last is the newest commit.
	Samples []ProgressSample `json:"samples,omitempty"`
	Last    ProgressSample   `json:"last,omitzero"`
	// Kinds counts the notes committed units recorded, by kind (a
	// compaction's summaries and the notes they replace change nothing).
	Kinds map[string]int64 `json:"kinds,omitempty"`
}

// newProgress is the record Submit writes for spec over steps; nil, or a
// spec naming no step of steps, counts the units of every step.
func newProgress(spec *ProgressSpec, steps []StepState) *Progress {
	p := &Progress{ProgressSpec: ProgressSpec{StepIndex: -1}}
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
func sampleProgress(task *Task, step int, now time.Time) {
	p := task.Meter
	if p == nil || (p.StepIndex >= 0 && p.StepIndex != step) {
		return
	}
	q := *p
	q.Committed++
	q.Last = ProgressSample{At: now, Committed: q.Committed}
	n := len(q.Samples)
	switch {
	case n == 0 || now.Sub(q.Samples[n-1].At) > ProgressStale:
		q.Samples = []ProgressSample{q.Last}
	case now.Sub(q.Samples[n-1].At) >= ProgressSampleEvery:
		q.Samples = append(slices.Clone(q.Samples[max(n+1-ProgressSamples, 0):]), q.Last)
	}
	task.Meter = &q
}

// countNote counts a note of kind a committed unit recorded.
func countNote(task *Task, kind string) {
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

// Rate returns the units of the progress step committed per second over
// the ring's window, and whether it is known: it is not with fewer than two
// samples, or when the newest commit is older than ProgressStale at now.
func (p *Progress) Rate(now time.Time) (float64, bool) {
	if p == nil || len(p.Samples) < 2 || now.Sub(p.Last.At) > ProgressStale {
		return 0, false
	}
	first := p.Samples[0]
	dt := p.Last.At.Sub(first.At).Seconds()
	if dt <= 0 || p.Last.Committed <= first.Committed {
		return 0, false
	}
	return float64(p.Last.Committed-first.Committed) / dt, true
}

// Elapsed returns the time the task has been working at now: the time
// during which some unit of it was leased (the wall time the budgets
// count), not the time it was paused, waited for a person or had no
// process. Zero for records written before every task counted it.
func (t *Task) Elapsed(now time.Time) time.Duration {
	b := t.Budget
	if b == nil {
		return 0
	}
	d := b.WallTime
	if !b.WallSince.IsZero() && now.After(b.WallSince) {
		d += now.Sub(b.WallSince)
	}
	return d
}

// NoteQuery selects notes (Reader.NotesPage): empty fields select all.
type NoteQuery struct {
	Kind, Step string
	// Grep keeps notes whose text contains it, ignoring case.
	Grep string
	// From is the first seq looked at; Limit the most notes returned
	// (at most MaxNotesPage, 0 means DefaultNotesPage).
	From  uint64
	Limit int
}

// Notes pages.
const (
	DefaultNotesPage = 100
	MaxNotesPage     = 1000
	// notesScan bounds the notes one page looks at, matching or not: a
	// filter that matches little returns a shorter page and where to go on.
	notesScan = 10000
)

// Match reports whether n is selected by q's filters.
func (q NoteQuery) Match(n *Note) bool {
	return (q.Kind == "" || n.Kind == q.Kind) && (q.Step == "" || n.Step == q.Step) &&
		(q.Grep == "" || strings.Contains(strings.ToLower(n.Text), strings.ToLower(q.Grep)))
}

// NotesPage returns the notes of task id that q selects, oldest first,
// from seq q.From on, and the seq to ask for the next page from (0 when no
// note is left to look at). It looks at no more than 10,000 notes, so a
// page may hold fewer than q.Limit notes and still have a next one.
func (r *Reader) NotesPage(id string, q NoteQuery) ([]Note, uint64, error) {
	limit := q.Limit
	if limit <= 0 {
		limit = DefaultNotesPage
	}
	limit = min(limit, MaxNotesPage)
	out := []Note{}
	var next uint64
	seen := 0
	err := r.t.scanFrom([]byte("n/"+id+"/"), noteKey(id, q.From), func(_, val []byte) (bool, error) {
		if len(out) == limit || seen == notesScan {
			return false, nil
		}
		var n Note
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
func (r *Reader) noteCount(id string) uint64 {
	var task Task
	if err := r.t.getJSON(taskKey(id), &task); err != nil {
		return 0
	}
	return task.Notes
}

// RecentNotes returns the newest notes of task, up to max, newest first,
// walking the notes back from the newest, never the older ones; enough,
// when not nil, ends the walk early once it says the notes read so far
// are enough.
func (r *Reader) RecentNotes(task *Task, max int, enough func([]Note) bool) ([]Note, error) {
	out := make([]Note, 0, min(uint64(max), task.Notes))
	if max <= 0 || task.Notes == 0 {
		return out, nil
	}
	prefix := []byte("n/" + task.ID + "/")
	opts := badger.DefaultIteratorOptions
	opts.Prefix, opts.Reverse, opts.PrefetchSize = prefix, true, min(max, 64)
	it := r.t.txn.NewIterator(opts)
	defer it.Close()
	for it.Seek(noteKey(task.ID, task.Notes)); it.ValidForPrefix(prefix) && len(out) < max; it.Next() {
		var n Note
		if err := itemValue(it.Item(), func(v []byte) error { return json.Unmarshal(v, &n) }); err != nil {
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
func (r *Reader) RecentApprovals(task *Task, max int) ([]Approval, error) {
	var out []Approval
	for seq, looked := task.NextApproval, 0; seq > 0 && len(out) < max && looked < 4*max; seq, looked = seq-1, looked+1 {
		var a Approval
		if err := r.t.getJSON(approvalKey(task.ID, seq), &a); err != nil {
			if errors.Is(err, ErrNotFound) {
				continue
			}
			return nil, err
		}
		out = append(out, a)
	}
	return out, nil
}

// Limit returns the limit of budget name (wall_time in seconds), 0 for
// none.
func (l BudgetLimits) Limit(name string) float64 { return l.limit(name) }
