package store

import (
	"fmt"

	"github.com/lhengine/lhengine/ledger"
	"github.com/lhengine/lhengine/store/internal/kv"
)

// failItem ends a unit that failed beyond its retries. An item of a fan-out
// step whose allowance (StepState.Allowed) is not used up is recorded as a
// failed item and the step goes on: it completes once every other item is
// done or failed. Any other failure fails the task.
func (s *Store) failItem(t *kv.Tx, task *ledger.Task, step int, f *ledger.Failure) error {
	st := t.Step(task, step)
	if !st.FanOut || st.Every > 0 || st.Failed >= st.Allowed() {
		reason := f.String()
		if st.Failed > 0 {
			reason = fmt.Sprintf("%s (%d items failed, %d allowed)", reason, st.Failed+1, st.Allowed())
		}
		return s.fail(t, task, f, reason)
	}
	st.Failed++
	item := f.Item
	if err := s.event(t, task, ledger.Event{Type: ledger.EvItemFailed, Step: st.Name, Item: &item, Attempt: f.Attempt, Kind: f.Kind,
		Message: fmt.Sprintf("item %d failed: %d failed (allowed %d): %s", f.Item, st.Failed, st.Allowed(), f.Message)}); err != nil {
		return err
	}
	if st.Planned && st.Done+st.Failed == st.Units && step == task.Cursor {
		return s.advance(t, task)
	}
	return nil
}

// firstFailedItems returns the index of the first step up to the task's
// cursor that has failed items, or -1.
func firstFailedItems(t *kv.Tx, task *ledger.Task) int {
	for i := 0; i <= task.Cursor && i < task.StepCount(); i++ {
		if t.Step(task, i).Failed > 0 {
			return i
		}
	}
	return -1
}
