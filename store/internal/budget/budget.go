// Package budget keeps task budgets: task-wide limits whose reaching
// pauses the task (never fails it) until a person raises them (Raise) and
// resumes it. Usage is counted in the transactions that use it: a unit's
// commit counts the unit, a failure the failures in a row, a repair the
// repairs, a model call's record its cost (the store's model journal, which
// pauses the task when the call reaches the cost budget), the leases'
// claims, commits and releases the wall time. So usage survives a crash
// and is never counted twice.
package budget

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/lhengine/lhengine/ledger"
	"github.com/lhengine/lhengine/store/internal/index"
	"github.com/lhengine/lhengine/store/internal/kv"
	"github.com/lhengine/lhengine/store/internal/outbox"
)

// Budgets checks and raises the budgets of a store's tasks: Update is its
// group commit, Events its event log (and clock).
type Budgets struct {
	Update kv.Update
	Events *outbox.Events
}

// TickWall adds the time since the counted period began to the wall time
// and starts the next period if a unit of the runnable task is leased.
func TickWall(task *ledger.Task, now time.Time) {
	b := task.Budget
	if b == nil {
		return
	}
	if !b.WallSince.IsZero() && now.After(b.WallSince) {
		b.WallTime += now.Sub(b.WallSince)
	}
	b.WallSince = time.Time{}
	if task.Leases > 0 && task.Status.Runnable() {
		b.WallSince = now
	}
}

// Refuse refuses a result that a reached budget no longer
// allows; see ErrBudgetReached.
func Refuse(task *ledger.Task, r *ledger.Result) error {
	if task.Budget == nil {
		return nil
	}
	l := task.Budget.Limits
	var name string
	switch {
	case r.Failure != nil:
		if l.ConsecutiveFailures > 0 && int64(task.ConsecutiveFailures) >= l.ConsecutiveFailures {
			name = ledger.BudgetConsecutiveFailures
		}
	case r.Repair != nil:
		if l.Repairs > 0 && int64(task.Repairs) >= l.Repairs {
			name = ledger.BudgetRepairs
		}
	default:
		if l.Units > 0 && task.Budget.Units >= l.Units {
			name = ledger.BudgetUnits
		}
	}
	if name == "" {
		return nil
	}
	return fmt.Errorf("%w: task %s: budget %s is at its limit %s", ledger.ErrBudgetReached, task.ID, name, ledger.FormatUsage(name, l.Limit(name)))
}

// UnitsRoom bounds how many more units a claim may lease: the units budget
// left after the units committed and those in flight; -1 for no bound.
func UnitsRoom(task *ledger.Task) int {
	if task.Budget == nil || task.Budget.Limits.Units <= 0 {
		return -1
	}
	return int(max(task.Budget.Limits.Units-task.Budget.Units-int64(task.Leases), 0))
}

// Check pauses a runnable task one of whose budgets is reached, and
// warns once of each budget past 80% of its limit. The caller saves the
// task.
func (s *Budgets) Check(t *kv.Tx, task *ledger.Task) error {
	if task.Budget == nil {
		return nil
	}
	now := s.Events.Now()
	TickWall(task, now)
	if !task.Status.Runnable() {
		return nil
	}
	if name, used, limit := task.Reached(); name != "" {
		why := ledger.PauseReason{Kind: ledger.PauseBudget, Name: name, At: now, Used: used, Limit: limit}
		return s.Pause(t, task, why)
	}
	for _, n := range ledger.BudgetNames {
		l := task.Budget.Limits.Limit(n)
		if l <= 0 || slices.Contains(task.Budget.Warned, n) || task.BudgetUsage(n) < 0.8*l {
			continue
		}
		task.Budget.Warned = append(task.Budget.Warned, n)
		if err := s.Events.Append(t, task, ledger.Event{Type: ledger.EvBudgetWarning, Message: fmt.Sprintf("budget %s at %.0f%%: %s of %s",
			n, 100*task.BudgetUsage(n)/l, ledger.FormatUsage(n, task.BudgetUsage(n)), ledger.FormatUsage(n, l))}); err != nil {
			return err
		}
	}
	return nil
}

// Pause pauses a runnable task for why within t: it leaves the claim
// index; units in flight may still commit. The caller saves the task.
func (s *Budgets) Pause(t *kv.Tx, task *ledger.Task, why ledger.PauseReason) error {
	if why.At.IsZero() {
		why.At = s.Events.Now()
	}
	task.Status, task.Reason, task.Pause = ledger.Paused, why.String(), &why
	TickWall(task, why.At) // the wall time stops counting
	if err := s.Events.Append(t, task, ledger.Event{Type: ledger.EvPaused, Message: task.Reason, Pause: &why}); err != nil {
		return err
	}
	id := task.ID
	t.After(func(x *index.Index) { x.RemoveTask(id) })
	return t.Del(kv.ActiveKey(id))
}

// Raise raises budgets of the task id, each recorded as an event
// with by and the old and new limit. A raise to a value below the usage
// is refused (it would pause the task again at once); a raise lower than
// the limit lowers it. The task's status does not change: Resume
// continues a paused task.
func (s *Budgets) Raise(ctx context.Context, id string, raises []ledger.BudgetRaise, by string) (*ledger.Task, error) {
	var out *ledger.Task
	err := s.Update(ctx, func(t *kv.Tx) error {
		task := new(ledger.Task)
		if err := t.GetJSON(kv.TaskKey(id), task); err != nil {
			return err
		}
		if task.Status.Terminal() {
			return &kv.FinishedError{ID: id, Status: task.Status, Verb: "raise a budget of"}
		}
		t.Durable = true
		if task.Budget == nil {
			task.Budget = &ledger.Budget{}
		}
		b := task.Budget
		for _, r := range raises {
			old := b.Limits.Limit(r.Name)
			v := r.Value
			if r.Delta {
				v = old + r.Value
				if old == 0 {
					v = task.BudgetUsage(r.Name) + r.Value
				}
			}
			if v <= task.BudgetUsage(r.Name) {
				return fmt.Errorf("%w: budget %s: the new limit %s is not above the usage %s",
					ledger.ErrBudgetReached, r.Name, ledger.FormatUsage(r.Name, v), ledger.FormatUsage(r.Name, task.BudgetUsage(r.Name)))
			}
			switch r.Name {
			case ledger.BudgetWallTime:
				b.Limits.WallTime = time.Duration(v * float64(time.Second))
			case ledger.BudgetCost:
				b.Limits.Cost = v
			case ledger.BudgetUnits:
				b.Limits.Units = int64(v)
			case ledger.BudgetRepairs:
				if task.Pause != nil && task.Pause.Kind == ledger.PauseRepairs {
					// Paused by a step's own repair.max: the raise allows
					// that many more repairs beyond it.
					b.RepairGrace += int(v - max(old, task.BudgetUsage(r.Name)))
				}
				if old > 0 || task.Pause == nil || task.Pause.Kind != ledger.PauseRepairs {
					b.Limits.Repairs = int64(v)
				}
			case ledger.BudgetConsecutiveFailures:
				b.Limits.ConsecutiveFailures = int64(v)
			}
			b.Warned = slices.DeleteFunc(b.Warned, func(n string) bool { return n == r.Name })
			from := "no limit"
			if old > 0 {
				from = ledger.FormatUsage(r.Name, old)
			}
			if err := s.Events.Append(t, task, ledger.Event{Type: ledger.EvBudgetRaised, Owner: by, Message: fmt.Sprintf("budget %s raised by %s from %s to %s (used %s)",
				r.Name, byName(by), from, ledger.FormatUsage(r.Name, b.Limits.Limit(r.Name)), ledger.FormatUsage(r.Name, task.BudgetUsage(r.Name)))}); err != nil {
				return err
			}
		}
		if err := t.SaveTask(task); err != nil {
			return err
		}
		out = task
		return t.Fill(out)
	})
	return out, err
}

func byName(by string) string {
	if by == "" {
		return "an operator"
	}
	return by
}

// PauseForRepairs gives the unit of l back to ready, without spending a
// try, and pauses the task for why. The caller saves the task (and must
// not save the unit).
func (s *Budgets) PauseForRepairs(t *kv.Tx, task *ledger.Task, l ledger.Lease, why ledger.PauseReason) error {
	u := new(ledger.Unit)
	if err := t.GetJSON(kv.UnitKey(l.Task, l.Step, l.Item), u); err != nil {
		return err
	}
	u.State, u.Owner, u.LeaseUntil = ledger.UnitReady, "", time.Time{}
	u.Base++ // the pause is not a try
	if err := t.PutJSON(kv.UnitKey(l.Task, l.Step, l.Item), u); err != nil {
		return err
	}
	ref := index.Ref{Task: l.Task, Step: l.Step, Item: l.Item}
	t.After(func(x *index.Index) { x.AddReady(ref, time.Time{}, false) })
	return s.Pause(t, task, why)
}
