package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Task budgets: task-wide limits whose reaching pauses the task (never
// fails it) until a person raises them (RaiseBudgets) and resumes it.
// Usage is counted in the transactions that use it: a unit's commit counts
// the unit, a failure the failures in a row, a repair the repairs, a model
// call's record its cost (model.go, which pauses the task when the call
// reaches the cost budget), the leases' claims, commits and releases the
// wall time. So usage survives a crash and is never counted twice.

// Budget names, as written in a task's budget block.
const (
	BudgetWallTime            = "wall_time"
	BudgetCost                = "cost"
	BudgetUnits               = "units"
	BudgetRepairs             = "repairs"
	BudgetConsecutiveFailures = "consecutive_failures"
)

// budgetNames is every budget, in the order they are checked.
var budgetNames = []string{BudgetUnits, BudgetRepairs, BudgetConsecutiveFailures, BudgetCost, BudgetWallTime}

// ErrBudgetReached refuses the commit of an attempt whose result a reached
// budget no longer allows (a unit past the units budget, a failure past
// consecutive_failures, a repair past repairs): the task is paused, and
// the worker gives the unit back uncharged (Release).
var ErrBudgetReached = errors.New("budget reached")

// BudgetLimits are a task's limits; zero is no limit.
type BudgetLimits struct {
	WallTime            time.Duration `json:"wall_time,omitempty"`
	Cost                float64       `json:"cost,omitempty"`
	Units               int64         `json:"units,omitempty"`
	Repairs             int64         `json:"repairs,omitempty"`
	ConsecutiveFailures int64         `json:"consecutive_failures,omitempty"`
}

// limit returns the limit of budget name (wall_time in seconds), 0 for none.
func (l BudgetLimits) limit(name string) float64 {
	switch name {
	case BudgetWallTime:
		return l.WallTime.Seconds()
	case BudgetCost:
		return l.Cost
	case BudgetUnits:
		return float64(l.Units)
	case BudgetRepairs:
		return float64(l.Repairs)
	case BudgetConsecutiveFailures:
		return float64(l.ConsecutiveFailures)
	}
	return 0
}

// Budget is a task's budgets: their limits and the usage the task record
// does not already count (repairs, consecutive failures and model cost
// are Task.Repairs, Task.ConsecutiveFailures and Task.ModelUsage.Cost).
type Budget struct {
	Limits BudgetLimits `json:"limits"`
	// Units counts the units committed (a unit run again by a repair or a
	// retry counts again: it was work done).
	Units int64 `json:"units"`
	// WallTime is the time during which some unit of the task was leased:
	// not while it is paused, waits for a person or waits for a process.
	WallTime time.Duration `json:"wall_time"`
	// WallSince is when the period now being counted began; zero when no
	// unit is leased.
	WallSince time.Time `json:"wall_since,omitzero"`
	// Warned names the budgets that passed 80% of their current limit
	// (each is warned once per limit).
	Warned []string `json:"warned,omitempty"`
	// RepairGrace is how many repairs raises of "repairs" allowed beyond
	// the steps' own repair.max.
	RepairGrace int `json:"repair_grace,omitempty"`
}

// BudgetUsage returns the usage of budget name (wall_time in seconds).
func (t *Task) BudgetUsage(name string) float64 {
	switch name {
	case BudgetCost:
		return t.ModelUsage.Cost
	case BudgetRepairs:
		return float64(t.Repairs)
	case BudgetConsecutiveFailures:
		return float64(t.ConsecutiveFailures)
	}
	if t.Budget == nil {
		return 0
	}
	switch name {
	case BudgetUnits:
		return float64(t.Budget.Units)
	case BudgetWallTime:
		return t.Budget.WallTime.Seconds()
	}
	return 0
}

// tickWall adds the time since the counted period began to the wall time
// and starts the next period if a unit of the runnable task is leased.
func tickWall(task *Task, now time.Time) {
	b := task.Budget
	if b == nil {
		return
	}
	if !b.WallSince.IsZero() && now.After(b.WallSince) {
		b.WallTime += now.Sub(b.WallSince)
	}
	b.WallSince = time.Time{}
	if task.Leases > 0 && task.Status.runnable() {
		b.WallSince = now
	}
}

// reached returns the first budget whose usage is at or past its limit.
func (t *Task) reached() (name string, used, limit float64) {
	if t.Budget == nil {
		return "", 0, 0
	}
	for _, n := range budgetNames {
		if l := t.Budget.Limits.limit(n); l > 0 && t.BudgetUsage(n) >= l {
			return n, t.BudgetUsage(n), l
		}
	}
	return "", 0, 0
}

// refuseOverBudget refuses a result that a reached budget no longer
// allows; see ErrBudgetReached.
func refuseOverBudget(task *Task, r *Result) error {
	if task.Budget == nil {
		return nil
	}
	l := task.Budget.Limits
	var name string
	switch {
	case r.Failure != nil:
		if l.ConsecutiveFailures > 0 && int64(task.ConsecutiveFailures) >= l.ConsecutiveFailures {
			name = BudgetConsecutiveFailures
		}
	case r.Repair != nil:
		if l.Repairs > 0 && int64(task.Repairs) >= l.Repairs {
			name = BudgetRepairs
		}
	default:
		if l.Units > 0 && task.Budget.Units >= l.Units {
			name = BudgetUnits
		}
	}
	if name == "" {
		return nil
	}
	return fmt.Errorf("%w: task %s: budget %s is at its limit %s", ErrBudgetReached, task.ID, name, formatUsage(name, l.limit(name)))
}

// unitsRoom bounds how many more units a claim may lease: the units budget
// left after the units committed and those in flight; -1 for no bound.
func unitsRoom(task *Task) int {
	if task.Budget == nil || task.Budget.Limits.Units <= 0 {
		return -1
	}
	return int(max(task.Budget.Limits.Units-task.Budget.Units-int64(task.Leases), 0))
}

// checkBudgets pauses a runnable task one of whose budgets is reached, and
// warns once of each budget past 80% of its limit. The caller saves the
// task.
func (s *Store) checkBudgets(t *tx, task *Task) error {
	if task.Budget == nil {
		return nil
	}
	now := s.now()
	tickWall(task, now)
	if !task.Status.runnable() {
		return nil
	}
	if name, used, limit := task.reached(); name != "" {
		why := PauseReason{Kind: PauseBudget, Name: name, At: now, Used: used, Limit: limit}
		return s.pauseInTx(t, task, why)
	}
	for _, n := range budgetNames {
		l := task.Budget.Limits.limit(n)
		if l <= 0 || slices.Contains(task.Budget.Warned, n) || task.BudgetUsage(n) < 0.8*l {
			continue
		}
		task.Budget.Warned = append(task.Budget.Warned, n)
		if err := s.event(t, task, Event{Type: EvBudgetWarning, Message: fmt.Sprintf("budget %s at %.0f%%: %s of %s",
			n, 100*task.BudgetUsage(n)/l, formatUsage(n, task.BudgetUsage(n)), formatUsage(n, l))}); err != nil {
			return err
		}
	}
	return nil
}

// pauseInTx pauses a runnable task for why within t: it leaves the claim
// index; units in flight may still commit. The caller saves the task.
func (s *Store) pauseInTx(t *tx, task *Task, why PauseReason) error {
	if why.At.IsZero() {
		why.At = s.now()
	}
	task.Status, task.Reason, task.Pause = Paused, why.String(), &why
	tickWall(task, why.At) // the wall time stops counting
	if err := s.event(t, task, Event{Type: EvPaused, Message: task.Reason, Pause: &why}); err != nil {
		return err
	}
	id := task.ID
	t.after(func(x *index) { x.removeTask(id) })
	return t.del(activeKey(id))
}

// BudgetRaise raises one budget: to Value, or by Value when Delta.
// wall_time values are in seconds.
type BudgetRaise struct {
	Name  string
	Value float64
	Delta bool
}

// ParseBudgetRaise parses NAME=VALUE or NAME=+DELTA (wall_time as a
// duration: "8h", "+30m").
func ParseBudgetRaise(s string) (BudgetRaise, error) {
	name, val, ok := strings.Cut(s, "=")
	name, val = strings.TrimSpace(name), strings.TrimSpace(val)
	if !ok || val == "" {
		return BudgetRaise{}, fmt.Errorf("budget %q: want NAME=VALUE or NAME=+DELTA, such as units=60000 or wall_time=+2h", s)
	}
	if !slices.Contains(budgetNames, name) {
		return BudgetRaise{}, fmt.Errorf("budget %q: no budget named %q; the budgets are wall_time, cost, units, repairs and consecutive_failures", s, name)
	}
	r := BudgetRaise{Name: name}
	val, r.Delta = strings.CutPrefix(val, "+")
	var err error
	switch name {
	case BudgetWallTime:
		var d time.Duration
		if d, err = time.ParseDuration(val); err == nil {
			r.Value = d.Seconds()
		}
	case BudgetCost:
		r.Value, err = strconv.ParseFloat(val, 64)
	default:
		var n int64
		if n, err = strconv.ParseInt(val, 10, 64); err == nil {
			r.Value = float64(n)
		}
	}
	if err != nil || r.Value < 0 || r.Value != r.Value || r.Value > 1<<50 || (r.Value == 0 && !r.Delta) {
		what := "a whole number above 0"
		switch name {
		case BudgetWallTime:
			what = "a duration such as 8h or 30m"
		case BudgetCost:
			what = "a number of cost units above 0"
		}
		return BudgetRaise{}, fmt.Errorf("budget %q: %s must be %s (or +DELTA)", s, name, what)
	}
	return r, nil
}

// RaiseBudgets raises budgets of the task id, each recorded as an event
// with by and the old and new limit. A raise to a value below the usage
// is refused (it would pause the task again at once); a raise lower than
// the limit lowers it. The task's status does not change: Resume
// continues a paused task.
func (s *Store) RaiseBudgets(ctx context.Context, id string, raises []BudgetRaise, by string) (*Task, error) {
	var out *Task
	err := s.update(ctx, func(t *tx) error {
		task := new(Task)
		if err := t.getJSON(taskKey(id), task); err != nil {
			return err
		}
		if task.Status.Terminal() {
			return &finishedError{id: id, status: task.Status, verb: "raise a budget of"}
		}
		t.durable = true
		if task.Budget == nil {
			task.Budget = &Budget{}
		}
		b := task.Budget
		for _, r := range raises {
			old := b.Limits.limit(r.Name)
			v := r.Value
			if r.Delta {
				v = old + r.Value
				if old == 0 {
					v = task.BudgetUsage(r.Name) + r.Value
				}
			}
			if v <= task.BudgetUsage(r.Name) {
				return fmt.Errorf("%w: budget %s: the new limit %s is not above the usage %s",
					ErrBudgetReached, r.Name, formatUsage(r.Name, v), formatUsage(r.Name, task.BudgetUsage(r.Name)))
			}
			switch r.Name {
			case BudgetWallTime:
				b.Limits.WallTime = time.Duration(v * float64(time.Second))
			case BudgetCost:
				b.Limits.Cost = v
			case BudgetUnits:
				b.Limits.Units = int64(v)
			case BudgetRepairs:
				if task.Pause != nil && task.Pause.Kind == PauseRepairs {
					// Paused by a step's own repair.max: the raise allows
					// that many more repairs beyond it.
					b.RepairGrace += int(v - max(old, task.BudgetUsage(r.Name)))
				}
				if old > 0 || task.Pause == nil || task.Pause.Kind != PauseRepairs {
					b.Limits.Repairs = int64(v)
				}
			case BudgetConsecutiveFailures:
				b.Limits.ConsecutiveFailures = int64(v)
			}
			b.Warned = slices.DeleteFunc(b.Warned, func(n string) bool { return n == r.Name })
			from := "no limit"
			if old > 0 {
				from = formatUsage(r.Name, old)
			}
			if err := s.event(t, task, Event{Type: EvBudgetRaised, Owner: by, Message: fmt.Sprintf("budget %s raised by %s from %s to %s (used %s)",
				r.Name, byName(by), from, formatUsage(r.Name, b.Limits.limit(r.Name)), formatUsage(r.Name, task.BudgetUsage(r.Name)))}); err != nil {
				return err
			}
		}
		if err := t.saveTask(task); err != nil {
			return err
		}
		out = task
		return t.fill(out)
	})
	return out, err
}

func byName(by string) string {
	if by == "" {
		return "an operator"
	}
	return by
}

// pauseForRepairs gives the unit of l back to ready, without spending a
// try, and pauses the task for why. The caller saves the task (and must
// not save the unit).
func (s *Store) pauseForRepairs(t *tx, task *Task, l Lease, why PauseReason) error {
	u := new(Unit)
	if err := t.getJSON(unitKey(l.Task, l.Step, l.Item), u); err != nil {
		return err
	}
	u.State, u.Owner, u.LeaseUntil = UnitReady, "", time.Time{}
	u.Base++ // the pause is not a try
	if err := t.putJSON(unitKey(l.Task, l.Step, l.Item), u); err != nil {
		return err
	}
	ref := unitRef{l.Task, l.Step, l.Item}
	t.after(func(x *index) { x.addReady(ref, time.Time{}, false) })
	return s.pauseInTx(t, task, why)
}

// BudgetSummary says each budget the task has, with its usage: "units 5 of
// 5, wall_time 3m0s of 8h0m0s"; "" for a task without one.
func (t *Task) BudgetSummary() string {
	if t.Budget == nil {
		return ""
	}
	var parts []string
	for _, n := range BudgetOrder {
		if l := t.Budget.Limits.limit(n); l > 0 {
			parts = append(parts, fmt.Sprintf("%s %s of %s", n, formatUsage(n, t.BudgetUsage(n)), formatUsage(n, l)))
		}
	}
	return strings.Join(parts, ", ")
}

// BudgetOrder is every budget name, in the order of the budget block.
var BudgetOrder = []string{BudgetWallTime, BudgetCost, BudgetUnits, BudgetRepairs, BudgetConsecutiveFailures}
