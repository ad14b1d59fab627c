package store

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/lhengine/lhengine/ledger"
	"github.com/lhengine/lhengine/store/internal/kv"
	"github.com/lhengine/lhengine/store/internal/quota"
)

// Reader reads records inside a transaction: the one of a Planner, or a
// read-only one opened by Store.Read.
type reader struct{ t *kv.Tx }

// Read runs fn with a Reader over a consistent snapshot.
func (s *Store) Read(fn func(r ledger.Reader) error) error {
	return s.view(func(t *kv.Tx) error { return fn(&reader{t: t}) })
}

// Task returns the task record, every step's state included.
func (r *reader) Task(id string) (*ledger.Task, error) {
	task, err := r.t.LoadTask(id)
	if err != nil {
		return nil, fmt.Errorf("task %s: %w", id, err)
	}
	return task, nil
}

// Manifest returns the task's pinned run manifest.
func (r *reader) Manifest(id string) (*ledger.Manifest, error) {
	m := new(ledger.Manifest)
	if err := r.t.GetJSON(kv.ManifestKey(id), m); err != nil {
		return nil, fmt.Errorf("manifest of task %s: %w", id, err)
	}
	return m, nil
}

// StepOutput returns the current output of a completed step: the output of
// its unit, or for a fan-out step the JSON array of its items' outputs in item
// order. It returns ErrNotFound if the step has not completed in its current pass.
func (r *reader) StepOutput(id string, step int) (json.RawMessage, error) {
	task := new(ledger.Task)
	if err := r.t.GetJSON(kv.TaskKey(id), task); err != nil {
		return nil, fmt.Errorf("task %s: %w", id, err)
	}
	if step < 0 || step >= task.StepCount() {
		return nil, fmt.Errorf("task %s has no step %d: %w", id, step, ledger.ErrNotFound)
	}
	return r.StepOutputOf(task, step)
}

// StepOutputOf is StepOutput for a task record the caller already holds (a
// Planner must use the record it was given: it is newer than the stored one).
// Only the state of that step is read from the task (a lease's Snapshot
// holds the steps before the leased one).
func (r *reader) StepOutputOf(task *ledger.Task, step int) (json.RawMessage, error) {
	return r.StepOutputLimited(task, step, -1)
}

// unitAttempt names one attempt of a unit of a step.
type unitAttempt struct{ item, attempt int }

// less orders attempts as their keys sort: by item, then attempt.
func (a unitAttempt) less(b unitAttempt) bool {
	return a.item < b.item || a.item == b.item && a.attempt < b.attempt
}

// parseAttemptSuffix reads the "%08x/%08x" that ends an attempt key after
// its step's prefix (attemptKey).
func parseAttemptSuffix(b []byte) (unitAttempt, bool) {
	i := bytes.IndexByte(b, '/')
	if i < 0 {
		return unitAttempt{}, false
	}
	item, err1 := strconv.ParseUint(string(b[:i]), 16, 31)
	attempt, err2 := strconv.ParseUint(string(b[i+1:]), 16, 31)
	if err1 != nil || err2 != nil {
		return unitAttempt{}, false
	}
	return unitAttempt{int(item), int(attempt)}, true
}

// StepOutputLimited is StepOutputOf that gives up with ErrTooLarge as soon
// as the output would exceed max bytes (max < 0: no limit), before holding
// more than that in memory.
func (r *reader) StepOutputLimited(task *ledger.Task, step int, max int64) (json.RawMessage, error) {
	st := *r.t.Step(task, step)
	if r.t.Err() != nil {
		return nil, r.t.Err()
	}
	if !st.Planned || st.Done+st.Failed < st.Units {
		return nil, fmt.Errorf("step %q of task %s has not completed: %w", st.Name, task.ID, ledger.ErrNotFound)
	}
	// The committed attempt of each unit of the current pass, in item
	// order: the order of the attempts' keys, which one scan reads (a
	// lookup per unit cost more). Of units and attempts only the fields
	// used are decoded, and an attempt is matched by the item and attempt
	// numbers its key ends with (a key formatted per unit cost 100 bytes
	// of heap each, held for the whole read).
	var want []unitAttempt
	err := r.t.Scan(kv.UnitStepPrefix(task.ID, step), func(key, val []byte) (bool, error) {
		var u struct {
			Item      int              `json:"item"`
			Pass      int              `json:"pass"`
			State     ledger.UnitState `json:"state"`
			Committed int              `json:"committed"`
		}
		if err := json.Unmarshal(val, &u); err != nil {
			return false, fmt.Errorf("unit record %s: %w", key, err)
		}
		if u.Pass == st.Pass && u.State == ledger.UnitDone {
			want = append(want, unitAttempt{u.Item, u.Committed})
		}
		return true, nil
	})
	if err != nil {
		return nil, err
	}
	missing := func(n int) error {
		return fmt.Errorf("attempt record %s: %w", kv.AttemptKey(task.ID, step, want[n].item, want[n].attempt), ledger.ErrNotFound)
	}
	var buf bytes.Buffer
	if st.FanOut {
		buf.WriteByte('[')
	}
	n := 0
	prefix := len(kv.AttemptPrefix(task.ID, step))
	err = r.t.Scan(kv.AttemptPrefix(task.ID, step), func(key, val []byte) (bool, error) {
		at, ok := parseAttemptSuffix(key[prefix:])
		if !ok {
			return false, fmt.Errorf("attempt record %s: a key the store does not write", key)
		}
		if n < len(want) && want[n].less(at) {
			return false, missing(n)
		}
		if n == len(want) || want[n] != at {
			return n < len(want), nil // an attempt that was not committed
		}
		var a struct {
			Output json.RawMessage `json:"output"`
		}
		if err := json.Unmarshal(val, &a); err != nil {
			return false, fmt.Errorf("attempt record %s: %w", key, err)
		}
		if max >= 0 && int64(buf.Len()+len(a.Output)+2) > max {
			return false, fmt.Errorf("%w: the output of step %q is more than %d bytes (%d of %d units read)", ledger.ErrTooLarge, st.Name, max, n, st.Units)
		}
		if n > 0 {
			buf.WriteByte(',')
		}
		buf.Write(a.Output)
		n++
		return n < len(want), nil
	})
	if err != nil {
		return nil, err
	}
	if st.FanOut {
		buf.WriteByte(']')
	}
	if n < len(want) {
		return nil, missing(n)
	}
	if n != st.Units-st.Failed {
		return nil, fmt.Errorf("step %q of task %s: %d of %d unit outputs found", st.Name, task.ID, n, st.Units-st.Failed)
	}
	return json.RawMessage(buf.Bytes()), nil
}

// Units returns the units of a step in item order, including stale units of
// earlier passes that have no counterpart in the current one.
func (r *reader) Units(id string, step int) ([]*ledger.Unit, error) {
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

// Attempt returns the record of one attempt.
func (r *reader) Attempt(id string, step, item, attempt int) (*ledger.Attempt, error) {
	a := new(ledger.Attempt)
	if err := r.t.GetJSON(kv.AttemptKey(id, step, item, attempt), a); err != nil {
		return nil, fmt.Errorf("attempt %d of task %s step %d item %d: %w", attempt, id, step, item, err)
	}
	return a, nil
}

// Attempts returns every recorded attempt of a step, by item then attempt.
func (r *reader) Attempts(id string, step int) ([]*ledger.Attempt, error) {
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

// Events returns up to limit events of a task with Seq >= from (limit <= 0: all).
func (r *reader) Events(id string, from uint64, limit int) ([]ledger.Event, error) {
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

// Tasks returns all tasks, oldest first.
func (r *reader) Tasks() ([]*ledger.Task, error) {
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

// FindTask resolves a task id or a unique prefix of one (at least 6 characters).
func (r *reader) FindTask(ref string) (*ledger.Task, error) {
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

// Pending reports whether any task is queued or running, that is whether a
// worker may still find work (now, after a backoff, or after a lease expires).
func (s *Store) Pending() bool {
	s.idx.Mu.Lock()
	defer s.idx.Mu.Unlock()
	return len(s.idx.Active) > 0
}

// Usage returns what task id keeps in the store.
func (r *reader) Usage(id string) (ledger.Usage, error) { return quota.Usage(r.t, id) }

// ctx-free convenience wrappers.

// Task returns one task record.
func (s *Store) Task(_ context.Context, id string) (*ledger.Task, error) {
	var out *ledger.Task
	err := s.Read(func(r ledger.Reader) error {
		var err error
		out, err = r.Task(id)
		return err
	})
	return out, err
}
