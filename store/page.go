package store

import "encoding/json"

// UnitsUpTo returns the first limit units of a step, in item order: a page
// of a large fan-out without decoding the rest (Units reads them all).
func (r *Reader) UnitsUpTo(id string, step, limit int) ([]*Unit, error) {
	var out []*Unit
	if limit <= 0 {
		return out, nil
	}
	err := r.t.scan(unitStepPrefix(id, step), func(_, val []byte) (bool, error) {
		u := new(Unit)
		if err := json.Unmarshal(val, u); err != nil {
			return false, err
		}
		out = append(out, u)
		return len(out) < limit, nil
	})
	return out, err
}
