package store

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/lhengine/lhengine/ledger"
	"github.com/lhengine/lhengine/store/internal/index"
	"github.com/lhengine/lhengine/store/internal/kv"
	"github.com/lhengine/lhengine/store/internal/lease"
)

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

// CheckFacts compares values, the task's facts read by the holder of lease
// l just before running it, with the recorded ones. When none changed it
// returns no changes, and the unit runs. Otherwise, in one transaction, it
// records the new values, an EvDrift event for each changed fact (its
// name, old and new value, the action) and the last change in Task.Drift,
// then applies on:
//
//   - continue: nothing more; run reports true and the unit runs under the
//     new values.
//   - pause: the lease is given back without charging its attempt, and the
//     task pauses with a reason of kind PauseDrift naming the fact;
//     Resume continues it (and the facts, read again before the next
//     unit, are compared with the values recorded now).
//   - restart: when step RestartFrom has been entered, the lease is given
//     back uncharged and the task goes back to that step, as a repair
//     does (every step from it on runs again in a new pass; what came
//     before is kept). When the task has not reached it yet, nothing
//     needs running again and the unit runs.
//
// Concurrent checks of one task with the same new values record the
// drift once: the first one's transaction changes the record, the others
// find it equal. A unit whose task was paused after it was leased (by
// another unit's drift, say) does not start either: its lease is given
// back uncharged and run is false. Values equal to the record are told by a read alone, and
// the lease is then checked by the unit's commit.
func (s *Store) CheckFacts(ctx context.Context, l ledger.Lease, values map[string]string, on ledger.OnDrift) (changes []ledger.FactChange, run bool, task *ledger.Task, err error) {
	// Most units see the recorded values: a read, not a write, tells.
	same := false
	err = s.view(func(t *kv.Tx) error {
		rec, tk := new(ledger.Facts), new(ledger.Task)
		if err := t.GetJSON(kv.FactsKey(l.Task), rec); err != nil && !errors.Is(err, ledger.ErrNotFound) {
			return err
		}
		if err := t.GetJSON(kv.TaskKey(l.Task), tk); err != nil {
			return err
		}
		same = maps.Equal(rec.Values, values) && tk.Status != ledger.Paused
		return nil
	})
	if err != nil || same {
		return nil, err == nil, nil, err
	}
	err = s.update(ctx, func(t *kv.Tx) error {
		changes, run, task = nil, true, nil
		u, tk, err := lease.Leased(t, l)
		if err != nil {
			return err
		}
		rec := new(ledger.Facts)
		if err := t.GetJSON(kv.FactsKey(l.Task), rec); err != nil && !errors.Is(err, ledger.ErrNotFound) {
			return err
		}
		// The unit does not run now: give its lease back uncharged.
		giveBack := func() error {
			st := t.Step(tk, l.Step)
			u.State, u.Owner, u.LeaseUntil, u.NotBefore = ledger.UnitReady, "", time.Time{}, time.Time{}
			u.Attempt = max(u.Attempt-1, 0)
			tk.Attempts = max(tk.Attempts-1, 0)
			tk.Leases--
			st.Leased--
			ref := index.Ref{Task: l.Task, Step: l.Step, Item: l.Item}
			t.After(func(x *index.Index) { delete(x.Leases, ref) })
			return t.PutJSON(kv.UnitKey(l.Task, l.Step, l.Item), u)
		}
		if maps.Equal(rec.Values, values) {
			if tk.Status != ledger.Paused {
				return nil
			}
			// Another unit's drift paused the task after this unit was
			// leased: it does not start.
			run = false
			t.Durable = true
			if err := giveBack(); err != nil {
				return err
			}
			if err := t.SaveTask(tk); err != nil {
				return err
			}
			task = tk
			return t.Fill(task)
		}
		now := s.now()
		action := on.Name
		if action == "" {
			action = "continue"
		}
		for _, name := range slices.Sorted(maps.Keys(values)) {
			if old, ok := rec.Values[name]; !ok || old != values[name] {
				changes = append(changes, ledger.FactChange{Name: name, Old: old, New: values[name], At: now, Action: action})
			}
		}
		for name, old := range rec.Values {
			if _, ok := values[name]; !ok {
				changes = append(changes, ledger.FactChange{Name: name, Old: old, At: now, Action: action})
			}
		}
		t.Durable = true
		if err := t.PutJSON(kv.FactsKey(l.Task), ledger.Facts{Values: values, Read: now}); err != nil {
			return err
		}
		for i := range changes {
			c := changes[i]
			if err := s.event(t, tk, ledger.Event{Type: ledger.EvDrift, Step: t.Step(tk, l.Step).Name, Message: c.String(), Fact: &c}); err != nil {
				return err
			}
		}
		last := changes[len(changes)-1]
		tk.Drift = &last
		restart := on.Restart && on.RestartFrom >= 0 && on.RestartFrom <= tk.Cursor && on.RestartFrom < tk.StepCount()
		if !on.Pause && !restart {
			task = tk
			return t.SaveTask(tk)
		}
		run = false
		if err := giveBack(); err != nil {
			return err
		}
		st := t.Step(tk, l.Step)
		ref := index.Ref{Task: l.Task, Step: l.Step, Item: l.Item}
		if on.Pause {
			names := make([]string, len(changes))
			for i, c := range changes {
				names[i] = c.Name
			}
			why := &ledger.PauseReason{Kind: ledger.PauseDrift, Name: strings.Join(names, ","), At: now,
				Note: fmt.Sprintf("%s -> %s", orNone(last.Old), orNone(last.New))}
			tk.Status, tk.Reason, tk.Pause = ledger.Paused, why.String(), why
			if err := s.event(t, tk, ledger.Event{Type: ledger.EvPaused, Step: st.Name, Message: tk.Reason, Pause: why}); err != nil {
				return err
			}
			if err := t.Del(kv.ActiveKey(tk.ID)); err != nil {
				return err
			}
			id := tk.ID
			t.After(func(x *index.Index) { x.RemoveTask(id) })
		} else {
			t.After(func(x *index.Index) { x.AddReady(ref, time.Time{}, false) })
			from := on.RestartFrom
			if ws := t.Step(tk, from); ws.Every > 0 {
				from = ws.Anchor // a window step starts again with its anchor
			}
			if err := s.event(t, tk, ledger.Event{Type: ledger.EvRetried, Step: t.Step(tk, from).Name,
				Message: fmt.Sprintf("back to step %q: environment fact %s changed", t.Step(tk, from).Name, last.Name)}); err != nil {
				return err
			}
			for i := from; i < tk.StepCount(); i++ {
				if err := s.resetStep(t, tk, i); err != nil {
					return err
				}
			}
			tk.Cursor = from
			if err := s.enterStep(t, tk); err != nil {
				return err
			}
		}
		if err := t.SaveTask(tk); err != nil {
			return err
		}
		task = tk
		return t.Fill(task)
	})
	if err != nil {
		return nil, false, nil, err
	}
	return changes, run, task, nil
}
