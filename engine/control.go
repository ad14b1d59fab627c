package engine

import (
	"context"
	"fmt"
	"time"

	"github.com/lhengine/lhengine/engine/internal/taskfile"
	"github.com/lhengine/lhengine/ledger"
)

// The read and control side of an Engine: what a program that embeds
// lhengine (a CLI, a server, a dashboard) needs to watch and steer tasks.
// Records are the store contract's (ledger.Task, ledger.Event, ...), the
// leaf types every store implementation and the engine share; the lease
// protocol (claim, heartbeat, commit, effect journal writes) stays behind
// Work, and a reader gets a ledger.Reader, which only reads.

// Read runs fn with a read-only view of the ledger: one consistent
// snapshot, answered once everything it can show is on disk
// (ledger.Store.ReadSynced): what a caller reports from it cannot be rolled
// back by a crash.
func (e *Engine) Read(fn func(r ledger.Reader) error) error { return e.store.ReadSynced(fn) }

// Changed returns a channel closed when the ledger next changes (see
// ledger.Store.Changed): take it, read, then wait on it.
func (e *Engine) Changed() <-chan struct{} { return e.store.Changed() }

// Task returns one task record.
func (e *Engine) Task(_ context.Context, id string) (*ledger.Task, error) {
	var t *ledger.Task
	err := e.Read(func(r ledger.Reader) error {
		var err error
		t, err = r.Task(id)
		return err
	})
	return t, err
}

// Cancel cancels a task that has not finished; attempts in flight lose
// their leases, and those of this engine's workers stop at once. It
// returns ledger.ErrTerminal for a finished task.
func (e *Engine) Cancel(ctx context.Context, id, reason string) (*ledger.Task, error) {
	t, err := e.store.Cancel(ctx, id, reason)
	if err == nil {
		// The store refuses their commits now; stop them without waiting
		// for their next lease renewal to find out.
		e.aborts.Abort(id, "the task was cancelled")
	}
	return t, err
}

// Pause pauses task id for why (ledger.Store.PauseTask): nothing more of it
// is claimed, at once, while other tasks go on. Its attempts in flight in
// this engine's workers get up to grace to end and commit; those still
// running then are cut short and their units given back uncharged
// (ledger.Store.Release), as a graceful stop does. Pause returns once no
// unit of the task is leased, or (for units leased by a process that went
// away, which the resume takes back) once the grace and the give-back's
// own bound have passed; ctx ending gives the units back at once. A
// finished task is ledger.ErrTerminal; pausing a paused task waits the
// same way and keeps its first reason.
func (e *Engine) Pause(ctx context.Context, id string, why ledger.PauseReason, grace time.Duration) (*ledger.Task, error) {
	if _, err := e.store.PauseTask(ctx, id, why); err != nil {
		return nil, err
	}
	timer := time.NewTimer(grace)
	defer timer.Stop()
	gaveBack := false
	for {
		changed := e.store.Changed()
		t, err := e.store.Task(context.WithoutCancel(ctx), id)
		if err != nil {
			return nil, err
		}
		if t.Leases == 0 || t.Status != ledger.Paused {
			return t, nil
		}
		select {
		case <-changed:
		case <-timer.C:
			if gaveBack {
				return t, nil
			}
			e.aborts.GiveBack(id)
			gaveBack = true
			timer.Reset(giveBackBound)
		case <-ctx.Done():
			if !gaveBack {
				e.aborts.GiveBack(id)
			}
			return t, ctx.Err()
		}
	}
}

// giveBackBound bounds how long Pause waits, after its grace, for the
// attempts it cut short to give their units back.
const giveBackBound = 10 * time.Second

// budgetLimits are the limits of a task's budget block (none for nil).
func budgetLimits(b *taskfile.Budget) ledger.BudgetLimits {
	if b == nil {
		return ledger.BudgetLimits{}
	}
	return ledger.BudgetLimits{WallTime: b.WallTime, Cost: b.Cost, Units: b.Units,
		Repairs: b.Repairs, ConsecutiveFailures: b.ConsecutiveFailures}
}

// RaiseBudgets raises budgets of task id (ledger.Store.RaiseBudgets): each
// raise is NAME=VALUE or NAME=+DELTA (ledger.ParseBudgetRaise), recorded
// with by. It does not resume the task: Resume does.
func (e *Engine) RaiseBudgets(ctx context.Context, id string, raises []string, by string) (*ledger.Task, error) {
	rs := make([]ledger.BudgetRaise, 0, len(raises))
	for _, s := range raises {
		r, err := ledger.ParseBudgetRaise(s)
		if err != nil {
			return nil, &BudgetRaiseError{Err: err}
		}
		rs = append(rs, r)
	}
	return e.store.RaiseBudgets(ctx, id, rs, by)
}

// BudgetRaiseError is a raise that cannot be read.
type BudgetRaiseError struct{ Err error }

func (e *BudgetRaiseError) Error() string { return e.Err.Error() }
func (e *BudgetRaiseError) Unwrap() error { return e.Err }

// Resume makes a paused task runnable again.
func (e *Engine) Resume(ctx context.Context, id string) (*ledger.Task, error) {
	return e.store.Resume(ctx, id)
}

// ResumeAs is Resume by a person: by is who, where the host and process
// they resumed from; a "resumed" event records them, also for a task that
// was not paused (one whose process died).
func (e *Engine) ResumeAs(ctx context.Context, id, by, where string) (*ledger.Task, error) {
	return e.store.ResumeAs(ctx, id, by, where)
}

// ResolveEffect settles, as a human decided, an effect whose outcome is
// unknown: confirmed (it happened) or not (send it again on the next
// attempt). note is recorded with the decision.
func (e *Engine) ResolveEffect(ctx context.Context, task string, step, item int, key string, confirmed bool, note string) (*ledger.Effect, error) {
	return e.store.ResolveEffect(ctx, task, step, item, key, confirmed, note)
}

// ReadArtifact copies up to len(buf) bytes of the artifact ref from offset
// into buf; it returns how many, and the artifact's size.
func (e *Engine) ReadArtifact(ref string, offset int64, buf []byte) (n int, size int64, err error) {
	return e.store.ReadArtifact(ref, offset, buf)
}

// ReclaimSpace gives back the value-log space of records deleted before
// this engine was opened (run it after GC, in a new Engine) and reports how
// many value-log files it rewrote.
func (e *Engine) ReclaimSpace(ctx context.Context) (files int, err error) {
	return e.store.ReclaimSpace(ctx)
}

// Retry re-opens a failed or cancelled task; Work then runs it. With from
// "" it goes on where it stopped, keeping every committed unit; with a step
// name, that step and the ones after it run again from the start, keeping
// every output committed before it (ledger.Store.Retry). by is recorded in
// the event log as who retried it.
func (e *Engine) Retry(ctx context.Context, id, from, by string) (*ledger.Task, error) {
	t, err := e.store.Task(ctx, id)
	if err != nil {
		return nil, err
	}
	step := -1
	if from != "" {
		if step = t.StepIndex(from); step < 0 {
			return nil, fmt.Errorf("task %s has no step %q", id, from)
		}
	}
	if err := e.CheckPlugins(id); err != nil {
		return nil, err
	}
	return e.store.Retry(ctx, id, step, by)
}

// Decide records a person's decision on approval id of task id
// (ledger.Store.DecideApproval): approve or reject, by whom (the OS user,
// or a token's name over TCP), with a note. The unit waiting for it runs
// next, on an approval, or fails (or goes to its repair) on a rejection.
func (e *Engine) Decide(ctx context.Context, id, approval string, approve bool, by, note string) (*ledger.Approval, *ledger.Task, error) {
	return e.store.DecideApproval(ctx, id, approval, approve, by, note)
}
