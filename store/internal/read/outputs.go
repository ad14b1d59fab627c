package read

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/lhengine/lhengine/ledger"
	"github.com/lhengine/lhengine/store/internal/kv"
)

// StepOutput returns the current output of a completed step: the output of
// its unit, or for a fan-out step the JSON array of its items' outputs in item
// order. It returns ErrNotFound if the step has not completed in its current pass.
func (r *Reader) StepOutput(id string, step int) (json.RawMessage, error) {
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
func (r *Reader) StepOutputOf(task *ledger.Task, step int) (json.RawMessage, error) {
	return r.StepOutputLimited(task, step, -1)
}

// unitAttempt names one attempt of a unit of a step.
type unitAttempt struct{ item, attempt int }

// less orders attempts as their keys sort: by item, then attempt.
func (a unitAttempt) less(b unitAttempt) bool {
	return a.item < b.item || a.item == b.item && a.attempt < b.attempt
}

// parseAttemptSuffix reads the "%08x/%08x" that ends an attempt key after
// its step's prefix (kv.AttemptKey).
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
func (r *Reader) StepOutputLimited(task *ledger.Task, step int, max int64) (json.RawMessage, error) {
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

// WindowOutputs returns, as a JSON list in the order given, the committed
// outputs of the items of step (the anchor of a window step) in its current
// pass: what a window unit reads as its anchor's output. It gives up with
// ErrTooLarge past max bytes (max < 0: no limit).
func (r *Reader) WindowOutputs(task *ledger.Task, step int, items []int, max int64) (json.RawMessage, error) {
	st := *r.t.Step(task, step)
	if r.t.Err() != nil {
		return nil, r.t.Err()
	}
	var buf bytes.Buffer
	buf.WriteByte('[')
	for n, item := range items {
		u := new(ledger.Unit)
		if err := r.t.GetJSON(kv.UnitKey(task.ID, step, item), u); err != nil {
			return nil, fmt.Errorf("unit %d of step %q: %w", item, st.Name, err)
		}
		if u.Pass != st.Pass || u.State != ledger.UnitDone {
			return nil, fmt.Errorf("unit %d of step %q is %s in pass %d, not committed in pass %d: %w", item, st.Name, u.State, u.Pass, st.Pass, ledger.ErrNotFound)
		}
		a, err := r.Attempt(task.ID, step, item, u.Committed)
		if err != nil {
			return nil, err
		}
		if max >= 0 && int64(buf.Len()+len(a.Output)+2) > max {
			return nil, fmt.Errorf("%w: the outputs of %d units of step %q are more than %d bytes", ledger.ErrTooLarge, len(items), st.Name, max)
		}
		if n > 0 {
			buf.WriteByte(',')
		}
		buf.Write(a.Output)
	}
	buf.WriteByte(']')
	return json.RawMessage(buf.Bytes()), nil
}
