package store

import (
	"encoding/json"
	"fmt"

	"github.com/dgraph-io/badger/v4"

	"github.com/lhengine/lhengine/ledger"
	"github.com/lhengine/lhengine/store/internal/kv"
)

// CommittedItem returns the output of item of step as its unit committed
// it in the step's current pass (the unit's committed attempt). A unit
// that has not committed in the current pass, or an item the step does not
// have, is ErrNotFound.
func (r *reader) CommittedItem(task *ledger.Task, step, item int) (*ledger.ItemOutput, error) {
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

// AttemptsPage returns the first limit recorded attempts of step (limit
// < 0: all), by item then attempt, of one item (item >= 0) or of every
// item (item < 0), and how many there are in all. Only the attempts
// returned are decoded; the rest are counted by key.
func (r *reader) AttemptsPage(id string, step, item, limit int) ([]*ledger.Attempt, int, error) {
	prefix := kv.AttemptPrefix(id, step)
	if item >= 0 {
		prefix = fmt.Appendf(nil, "o/%s/%04x/%08x/", id, step, item)
	}
	opts := badger.DefaultIteratorOptions
	opts.PrefetchValues = false
	opts.Prefix = prefix
	it := r.t.Txn().NewIterator(opts)
	defer it.Close()
	out := []*ledger.Attempt{}
	total := 0
	for it.Rewind(); it.Valid(); it.Next() {
		total++
		if limit >= 0 && len(out) >= limit {
			continue
		}
		a := new(ledger.Attempt)
		if err := kv.ItemValue(it.Item(), func(v []byte) error { return json.Unmarshal(v, a) }); err != nil {
			return nil, 0, err
		}
		out = append(out, a)
	}
	return out, total, nil
}

// EachEvent calls fn with each event of a task with Seq >= from, in order,
// until fn returns false.
func (r *reader) EachEvent(id string, from uint64, fn func(*ledger.Event) bool) error {
	return r.t.ScanFrom([]byte("e/"+id+"/"), kv.EventKey(id, from), func(_, val []byte) (bool, error) {
		var e ledger.Event
		if err := json.Unmarshal(val, &e); err != nil {
			return false, err
		}
		return fn(&e), nil
	})
}
