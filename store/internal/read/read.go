// Package read is the store's read side: a Reader over one transaction
// (the read-only one of store.Read, or a Planner's) answers every question
// of ledger.Reader from the records, reading the fewest it can: a step's
// output in one scan of its units and one of its attempts, a page of notes
// or attempts without decoding the rest.
package read

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/lhengine/lhengine/ledger"
	"github.com/lhengine/lhengine/store/internal/kv"
	"github.com/lhengine/lhengine/store/internal/quota"
)

// Reader reads records inside a transaction: the one of a Planner, or a
// read-only one opened by Store.Read. It implements ledger.Reader.
type Reader struct{ t *kv.Tx }

var _ ledger.Reader = (*Reader)(nil)

// New is the Reader of t.
func New(t *kv.Tx) *Reader { return &Reader{t: t} }

// Task returns the task record, every step's state included.
func (r *Reader) Task(id string) (*ledger.Task, error) {
	task, err := r.t.LoadTask(id)
	if err != nil {
		return nil, fmt.Errorf("task %s: %w", id, err)
	}
	return task, nil
}

// Manifest returns the task's pinned run manifest.
func (r *Reader) Manifest(id string) (*ledger.Manifest, error) {
	m := new(ledger.Manifest)
	if err := r.t.GetJSON(kv.ManifestKey(id), m); err != nil {
		return nil, fmt.Errorf("manifest of task %s: %w", id, err)
	}
	return m, nil
}

// Tasks returns all tasks, oldest first.
func (r *Reader) Tasks() ([]*ledger.Task, error) {
	var out []*ledger.Task
	err := r.t.Scan([]byte("t/"), func(_, val []byte) (bool, error) {
		task := new(ledger.Task)
		if err := kv.DecodeTask(val, task); err != nil {
			return false, err
		}
		out = append(out, task)
		return true, nil
	})
	if err != nil {
		return nil, err
	}
	for _, task := range out {
		if err := r.t.Fill(task); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// TaskList returns the page of tasks q asks for and how many match in all
// (see ledger.Reader).
func (r *Reader) TaskList(q ledger.TaskQuery) ([]*ledger.Task, int, error) {
	it := r.t.Iterate(kv.IterOptions{Prefix: []byte("t/"), Reverse: q.Newest, KeysOnly: q.Match == nil, Prefetch: 64})
	defer it.Close()
	var page []*ledger.Task
	total := 0
	for it.Rewind(); it.Valid(); it.Next() {
		full := q.Limit <= 0 || len(page) < q.Limit
		if q.Match == nil && !full {
			total++ // counted by key
			continue
		}
		task := new(ledger.Task)
		if err := it.Value(func(v []byte) error { return kv.DecodeTask(v, task) }); err != nil {
			return nil, 0, fmt.Errorf("task %s: %w", it.Key()[2:], err)
		}
		if q.Match != nil && !q.Match(task) {
			continue
		}
		total++
		if full {
			page = append(page, task)
		}
	}
	if err := it.Err(); err != nil {
		return nil, 0, err
	}
	for _, task := range page {
		if err := r.t.Fill(task); err != nil {
			return nil, 0, err
		}
	}
	return page, total, nil
}

// FindTask resolves a task id or a unique prefix of one (at least 6 characters).
func (r *Reader) FindTask(ref string) (*ledger.Task, error) {
	ref = strings.ToUpper(strings.TrimSpace(ref))
	if task, err := r.Task(ref); err == nil {
		return task, nil
	} else if !errors.Is(err, ledger.ErrNotFound) {
		return nil, err
	}
	if len(ref) < 6 {
		return nil, fmt.Errorf("task %s: %w", ref, ledger.ErrNotFound)
	}
	var found []string
	for _, k := range r.t.Keys([]byte("t/" + ref)) {
		found = append(found, string(k[2:]))
	}
	switch len(found) {
	case 0:
		return nil, fmt.Errorf("task %s: %w", ref, ledger.ErrNotFound)
	case 1:
		return r.Task(found[0])
	}
	return nil, fmt.Errorf("task prefix %s is ambiguous: %s", ref, strings.Join(found, ", "))
}

// TaskVersions returns the version of every task, oldest first, reading
// keys only: what a reader that keeps tasks it has read needs to know which
// to read again (the task list stream of the API).
func (r *Reader) TaskVersions() ([]ledger.TaskVersion, error) {
	it := r.t.Iterate(kv.IterOptions{Prefix: []byte("t/"), KeysOnly: true})
	defer it.Close()
	var out []ledger.TaskVersion
	for it.Rewind(); it.Valid(); it.Next() {
		out = append(out, ledger.TaskVersion{ID: string(it.Key()[2:]), Version: it.Version()})
	}
	return out, it.Err()
}

// Usage returns what task id keeps in the store.
func (r *Reader) Usage(id string) (ledger.Usage, error) { return quota.Usage(r.t, id) }

// Units returns the units of a step in item order, including stale units of
// earlier passes that have no counterpart in the current one.
func (r *Reader) Units(id string, step int) ([]*ledger.Unit, error) {
	var out []*ledger.Unit
	err := r.t.Scan(kv.UnitStepPrefix(id, step), func(_, val []byte) (bool, error) {
		u := new(ledger.Unit)
		if err := json.Unmarshal(val, u); err != nil {
			return false, err
		}
		out = append(out, u)
		return true, nil
	})
	return out, err
}

// UnitsUpTo returns the first limit units of a step, in item order: a page
// of a large fan-out without decoding the rest (Units reads them all).
func (r *Reader) UnitsUpTo(id string, step, limit int) ([]*ledger.Unit, error) {
	var out []*ledger.Unit
	if limit <= 0 {
		return out, nil
	}
	err := r.t.Scan(kv.UnitStepPrefix(id, step), func(_, val []byte) (bool, error) {
		u := new(ledger.Unit)
		if err := json.Unmarshal(val, u); err != nil {
			return false, err
		}
		out = append(out, u)
		return len(out) < limit, nil
	})
	return out, err
}

// Attempt returns the record of one attempt.
func (r *Reader) Attempt(id string, step, item, attempt int) (*ledger.Attempt, error) {
	a := new(ledger.Attempt)
	if err := r.t.GetJSON(kv.AttemptKey(id, step, item, attempt), a); err != nil {
		return nil, fmt.Errorf("attempt %d of task %s step %d item %d: %w", attempt, id, step, item, err)
	}
	return a, nil
}

// Attempts returns every recorded attempt of a step, by item then attempt.
func (r *Reader) Attempts(id string, step int) ([]*ledger.Attempt, error) {
	var out []*ledger.Attempt
	err := r.t.Scan(kv.AttemptPrefix(id, step), func(_, val []byte) (bool, error) {
		a := new(ledger.Attempt)
		if err := json.Unmarshal(val, a); err != nil {
			return false, err
		}
		out = append(out, a)
		return true, nil
	})
	return out, err
}

// AttemptsPage returns the first limit recorded attempts of step (limit
// < 0: all), by item then attempt, of one item (item >= 0) or of every
// item (item < 0), and how many there are in all. Only the attempts
// returned are decoded; the rest are counted by key.
func (r *Reader) AttemptsPage(id string, step, item, limit int) ([]*ledger.Attempt, int, error) {
	prefix := kv.AttemptPrefix(id, step)
	if item >= 0 {
		prefix = fmt.Appendf(nil, "o/%s/%04x/%08x/", id, step, item)
	}
	it := r.t.Iterate(kv.IterOptions{Prefix: prefix, KeysOnly: true})
	defer it.Close()
	out := []*ledger.Attempt{}
	total := 0
	for it.Rewind(); it.Valid(); it.Next() {
		total++
		if limit >= 0 && len(out) >= limit {
			continue
		}
		a := new(ledger.Attempt)
		if err := it.Value(func(v []byte) error { return json.Unmarshal(v, a) }); err != nil {
			return nil, 0, err
		}
		out = append(out, a)
	}
	return out, total, it.Err()
}

// CommittedItem returns the output of item of step as its unit committed
// it in the step's current pass (the unit's committed attempt). A unit
// that has not committed in the current pass, or an item the step does not
// have, is ErrNotFound.
func (r *Reader) CommittedItem(task *ledger.Task, step, item int) (*ledger.ItemOutput, error) {
	if step < 0 || step >= len(task.Steps) || item < 0 {
		return nil, ledger.ErrNotFound
	}
	st := task.Steps[step]
	u := new(ledger.Unit)
	if err := r.t.GetJSON(kv.UnitKey(task.ID, step, item), u); err != nil {
		return nil, fmt.Errorf("item %d of step %q: %w", item, st.Name, err)
	}
	if u.State != ledger.UnitDone || u.Pass != st.Pass {
		return nil, fmt.Errorf("item %d of step %q has not committed in pass %d (it is %s): %w", item, st.Name, st.Pass, u.State, ledger.ErrNotFound)
	}
	a := new(ledger.Attempt)
	if err := r.t.GetJSON(kv.AttemptKey(task.ID, step, item, u.Committed), a); err != nil {
		return nil, err
	}
	return &ledger.ItemOutput{Item: item, Attempt: u.Committed, Output: a.Output}, nil
}

// CommittedOutputs returns the outputs of the first limit units of step
// that committed in the step's current pass, in item order, and how many
// units of the pass committed in all (the step's Done): what a fan-out
// still running has produced so far.
func (r *Reader) CommittedOutputs(task *ledger.Task, step, limit int) ([]ledger.ItemOutput, int, error) {
	if step < 0 || step >= len(task.Steps) {
		return nil, 0, ledger.ErrNotFound
	}
	st := task.Steps[step]
	out := []ledger.ItemOutput{}
	err := r.t.Scan(kv.UnitStepPrefix(task.ID, step), func(_, val []byte) (bool, error) {
		u := new(ledger.Unit)
		if err := json.Unmarshal(val, u); err != nil {
			return false, err
		}
		if u.State != ledger.UnitDone || u.Pass != st.Pass {
			return true, nil
		}
		a := new(ledger.Attempt)
		if err := r.t.GetJSON(kv.AttemptKey(task.ID, step, u.Item, u.Committed), a); err != nil {
			return false, err
		}
		out = append(out, ledger.ItemOutput{Item: u.Item, Attempt: u.Committed, Output: a.Output})
		return len(out) < limit, nil
	})
	return out, st.Done, err
}

// FailedItems returns the failed items of the current pass of every fan-out
// step of a task, in step and item order.
func (r *Reader) FailedItems(id string) ([]ledger.FailedItem, error) {
	task, err := r.Task(id)
	if err != nil {
		return nil, err
	}
	out := []ledger.FailedItem{}
	for i, st := range task.Steps {
		if st.Failed == 0 {
			continue
		}
		err := r.t.Scan(kv.UnitStepPrefix(id, i), func(key, val []byte) (bool, error) {
			u := new(ledger.Unit)
			if err := json.Unmarshal(val, u); err != nil {
				return false, fmt.Errorf("unit record %s: %w", key, err)
			}
			if u.Pass == st.Pass && u.State == ledger.UnitFailed {
				out = append(out, ledger.FailedItem{Step: st.Name, Item: u.Item, Key: u.Key, Value: u.Value, Attempt: u.Attempt, Failure: u.Failure})
			}
			return true, nil
		})
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// Events returns up to limit events of a task with Seq >= from (limit <= 0: all).
func (r *Reader) Events(id string, from uint64, limit int) ([]ledger.Event, error) {
	var out []ledger.Event
	prefix := []byte("e/" + id + "/")
	start := kv.EventKey(id, from)
	err := r.t.ScanFrom(prefix, start, func(key, val []byte) (bool, error) {
		var e ledger.Event
		if err := json.Unmarshal(val, &e); err != nil {
			return false, err
		}
		out = append(out, e)
		return limit <= 0 || len(out) < limit, nil
	})
	return out, err
}

// EachEvent calls fn with each event of a task with Seq >= from, in order,
// until fn returns false.
func (r *Reader) EachEvent(id string, from uint64, fn func(*ledger.Event) bool) error {
	return r.t.ScanFrom([]byte("e/"+id+"/"), kv.EventKey(id, from), func(_, val []byte) (bool, error) {
		var e ledger.Event
		if err := json.Unmarshal(val, &e); err != nil {
			return false, err
		}
		return fn(&e), nil
	})
}
