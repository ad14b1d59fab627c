package store

import (
	"encoding/json"

	"github.com/lhengine/lhengine/ledger"
	"github.com/lhengine/lhengine/store/internal/kv"
)

// UnitsUpTo returns the first limit units of a step, in item order: a page
// of a large fan-out without decoding the rest (Units reads them all).
func (r *reader) UnitsUpTo(id string, step, limit int) ([]*ledger.Unit, error) {
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

// CommittedOutputs returns the outputs of the first limit units of step
// that committed in the step's current pass, in item order, and how many
// units of the pass committed in all (the step's Done): what a fan-out
// still running has produced so far.
func (r *reader) CommittedOutputs(task *ledger.Task, step, limit int) ([]ledger.ItemOutput, int, error) {
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
