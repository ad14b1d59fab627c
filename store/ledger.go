package store

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"time"

	"github.com/dgraph-io/badger/v4"

	"github.com/lhengine/lhengine/fault"
	"github.com/lhengine/lhengine/ledger"
	"github.com/lhengine/lhengine/store/internal/blob"
	"github.com/lhengine/lhengine/store/internal/budget"
	"github.com/lhengine/lhengine/store/internal/index"
	"github.com/lhengine/lhengine/store/internal/kv"
	"github.com/lhengine/lhengine/store/internal/lease"
	"github.com/lhengine/lhengine/store/internal/quota"
	"github.com/lhengine/lhengine/store/internal/read"
	"github.com/lhengine/lhengine/store/internal/snapshot"
)

// Submit creates a queued task and plans its first step, after storing the
// modules and the replay set it brings (NewTask.Modules, NewTask.Replay).
// It returns the task and whether it was created (false: the idempotency
// key named an existing one).
func (s *Store) Submit(ctx context.Context, nt ledger.NewTask) (*ledger.Task, bool, error) {
	if nt.Modules != nil || nt.Replay != nil || nt.Manifest.ModelReplay != nil {
		defer blob.Hold()()
		if err := s.blobs.PutModules(ctx, nt, nt.Modules); err != nil {
			return nil, false, err
		}
		if err := s.blobs.PutReplay(ctx, nt); err != nil {
			return nil, false, err
		}
	}
	return s.submit(ctx, nt)
}

// submit writes the task and plans its first step.
func (s *Store) submit(ctx context.Context, nt ledger.NewTask) (*ledger.Task, bool, error) {
	if len(nt.Steps) == 0 {
		return nil, false, errors.New("a task needs at least one step")
	}
	var out *ledger.Task
	var created bool
	err := s.update(ctx, func(t *kv.Tx) error {
		created = false
		if nt.IdempotencyKey != "" {
			if id, err := t.GetRaw(kv.IdemKey(nt.IdempotencyKey)); err == nil {
				out, err = t.LoadTask(string(id))
				return err
			} else if !errors.Is(err, ledger.ErrNotFound) {
				return err
			}
		}
		if err := checkWindows(nt.Steps); err != nil {
			return err
		}
		now := s.now()
		task := &ledger.Task{
			ID:             newTaskID(now),
			Name:           nt.Name,
			Status:         ledger.Queued,
			Steps:          append([]ledger.StepState(nil), nt.Steps...),
			CreatedAt:      now,
			UpdatedAt:      now,
			IdempotencyKey: nt.IdempotencyKey,
			Budget:         &ledger.Budget{Limits: nt.Budget},
			Notify:         nt.Notify,
			Meter:          newProgress(nt.Progress, nt.Steps),
		}
		for i := range task.Steps {
			st := &task.Steps[i]
			st.Pass, st.Planned, st.Units, st.Done, st.Leased, st.Open = 0, false, 0, 0, 0, ""
			st.Failed = 0
			if st.Limit <= 0 {
				st.Limit = 1
			}
		}
		t.Durable = true
		if err := t.PutJSON(kv.ManifestKey(task.ID), nt.Manifest); err != nil {
			return err
		}
		if err := t.Put(kv.ActiveKey(task.ID), nil); err != nil {
			return err
		}
		if nt.Facts != nil {
			if err := t.PutJSON(kv.FactsKey(task.ID), ledger.Facts{Values: nt.Facts, Read: s.now()}); err != nil {
				return err
			}
		}
		if q := nt.OutputQuota; q != nil && *q != ledger.DefaultOutputQuota {
			if err := t.PutJSON(kv.OutputLimitKey(task.ID), *q); err != nil {
				return err
			}
		}
		id := task.ID
		t.After(func(x *index.Index) { x.AddActive(id) })
		if nt.IdempotencyKey != "" {
			if err := t.Put(kv.IdemKey(nt.IdempotencyKey), []byte(task.ID)); err != nil {
				return err
			}
		}
		if err := s.event(t, task, ledger.Event{Type: ledger.EvSubmitted, Message: fmt.Sprintf("%d steps", len(task.Steps))}); err != nil {
			return err
		}
		if err := s.enterStep(t, task); err != nil {
			return err
		}
		if task.Status == ledger.Queued && task.Steps[0].Planned && task.Steps[0].Units == 0 {
			if err := s.advance(t, task); err != nil {
				return err
			}
		}
		out, created = task, true
		return t.SaveTask(task)
	})
	if err != nil {
		return nil, false, err
	}
	if created && out.Steps[0].FanOut {
		// Plan the first step now; if ctx ends first, the next claim does.
		if _, err := s.planPending(ctx, out.ID); err != nil && ctx.Err() == nil {
			return nil, false, err
		}
		if t, err := s.Task(ctx, out.ID); err == nil {
			out = t
		}
	}
	return out, created, nil
}

// Claim leases up to req.Max ready units, oldest task first, respecting each
// step's concurrency limit. Leases that expired, or that belong to an earlier
// session of this store (a process that is gone, since Badger allows one
// process per directory), are taken back first; each new lease takes the
// task's next fencing epoch.
func (s *Store) Claim(ctx context.Context, req ledger.ClaimRequest) (ledger.Claimed, error) {
	var out ledger.Claimed
	if req.Max <= 0 {
		return out, nil
	}
	if req.LeaseFor <= 0 {
		req.LeaseFor = 30 * time.Second
	}
	// A step waiting for its items (entered by a commit whose caller went
	// away, or cut short by a restart) is planned by the next claim.
	if _, err := s.planPending(ctx, req.Task); err != nil {
		return out, err
	}
	err := s.update(ctx, func(t *kv.Tx) error {
		var err error
		out, err = s.claim(t, req, nil)
		return err
	})
	return out, err
}

// claim leases up to req.Max units inside t (internal/lease). held, when
// set, is a task record the calling operation has already changed (and
// will save itself).
func (s *Store) claim(t *kv.Tx, req ledger.ClaimRequest, held *ledger.Task) (ledger.Claimed, error) {
	return s.leases.Claim(t, req, held)
}

// Heartbeat extends a lease by extend from now. Only the current owner, with
// the current epoch, may extend it; anyone else gets ErrLeaseLost.
func (s *Store) Heartbeat(ctx context.Context, l ledger.Lease, extend time.Duration) (time.Time, error) {
	return s.leases.Heartbeat(ctx, l, extend)
}

// Release gives back the unit of a lease whose attempt a stopping worker
// cut short, without charging the attempt: the unit is ready again, its
// attempt count and the task's go back to what they were before the
// claim (the next claim runs the same attempt number, with the same random
// seed), and a "released" event records it. What the attempt did through
// the host stays (its effects are journaled by their keys). A lease that is
// no longer current gets ErrLeaseLost and changes nothing.
func (s *Store) Release(ctx context.Context, l ledger.Lease) error { return s.leases.Release(ctx, l) }

// Commit records the outcome of an attempt, its output or failure, the unit's
// new state, the task's advance and the events, in one transaction. A lease
// that is no longer current gets ErrLeaseLost and changes nothing.
func (s *Store) Commit(ctx context.Context, r ledger.Result) (*ledger.Task, error) {
	task, _, err := s.commitAndClaimSynced(ctx, r, ledger.ClaimRequest{})
	return task, err
}

// commitAndClaimSynced is CommitAndClaim that returns once the commit is on
// disk.
func (s *Store) commitAndClaimSynced(ctx context.Context, r ledger.Result, next ledger.ClaimRequest) (*ledger.Task, ledger.Claimed, error) {
	out, claimed, _, err := s.commitAndClaim(ctx, r, next, false)
	return out, claimed, err
}

// CommitAndClaim is Commit followed, in the same transaction, by Claim(next)
// when next.Max > 0: a worker finishing one unit takes its next without a
// transaction (and a disk sync) of its own. If the commit is refused, nothing
// is claimed. It returns as soon as the transaction committed, while its
// sync may still be under way: a worker
// starts its next unit beside the sync. What it committed is visible to
// every reader of the store at once; the Durability says when it is on
// disk. Before anything outside the process acts on the commit (a task
// reported finished, a request sent that its output shaped), the caller
// waits for the Durability, or for a later operation's sync, which covers
// it. A failed sync fails the store, as for every commit.
func (s *Store) CommitAndClaim(ctx context.Context, r ledger.Result, next ledger.ClaimRequest) (*ledger.Task, ledger.Claimed, ledger.Durability, error) {
	return s.commitAndClaim(ctx, r, next, true)
}

func (s *Store) commitAndClaim(ctx context.Context, r ledger.Result, next ledger.ClaimRequest, early bool) (*ledger.Task, ledger.Claimed, durability, error) {
	if next.LeaseFor <= 0 {
		next.LeaseFor = 30 * time.Second
	}
	var (
		out     *ledger.Task
		claimed ledger.Claimed
		dur     durability
		err     error
	)
	commit := func(t *kv.Tx) error {
		var err error
		out, claimed, err = s.commitUnit(t, r, next)
		return err
	}
	if early {
		dur, err = s.updateEarly(ctx, commit, r.Queued)
	} else {
		err = s.updateThen(ctx, commit, r.Queued)
	}
	if errors.Is(err, badger.ErrTxnTooBig) && r.Failure == nil {
		// Everything the attempt wrote does not fit one transaction: that
		// will not change on another try, so fail the unit instead of
		// letting its lease expire and running it forever.
		f := &ledger.Failure{Kind: fault.TooLarge, Message: fmt.Sprintf(
			"the attempt's commit is too large for one transaction (output %d bytes, %d notes, %d counters): %v",
			len(r.Output), len(r.Notes), len(r.Counts), err)}
		fr := ledger.Result{Lease: r.Lease, Failure: f, Log: r.Log, Started: r.Started, HeaderOnly: r.HeaderOnly}
		return s.commitAndClaim(ctx, fr, next, early)
	}
	if err != nil {
		return nil, ledger.Claimed{}, durability{}, err
	}
	out, claimed = s.planAfterCommit(ctx, out, claimed, next)
	return out, claimed, dur, nil
}

// unitCommit is one attempt's commit as it is written: the unit, its task
// and step, the attempt record and the event, read and changed in one
// transaction by commitUnit's steps.
type unitCommit struct {
	t        *kv.Tx
	l        ledger.Lease
	ref      index.Ref
	u        *ledger.Unit
	task     *ledger.Task
	st       *ledger.StepState
	rec      ledger.Attempt
	ev       ledger.Event
	now      time.Time
	recSaved bool // the attempt record is written once
}

func (c *unitCommit) saveUnit() error {
	return c.t.PutJSON(kv.UnitKey(c.l.Task, c.l.Step, c.l.Item), c.u)
}

// commitUnit is commitAndClaim's transaction: the attempt's outcome
// (failure, repair or output) recorded with its unit, step, task and event,
// then what the outcome may set off (people now awaited, a budget reached),
// then the claim of the next units, and the task saved.
func (s *Store) commitUnit(t *kv.Tx, r ledger.Result, next ledger.ClaimRequest) (*ledger.Task, ledger.Claimed, error) {
	l := r.Lease
	u, task, err := lease.Leased(t, l)
	if err != nil {
		return nil, ledger.Claimed{}, err
	}
	if err := budget.Refuse(task, &r); err != nil {
		return nil, ledger.Claimed{}, err
	}
	c := &unitCommit{t: t, l: l, ref: index.Ref{Task: l.Task, Step: l.Step, Item: l.Item}, u: u, task: task, st: t.Step(task, l.Step), now: s.now()}
	item := l.Item
	c.rec = ledger.Attempt{Step: l.Step, Item: l.Item, Attempt: l.Attempt, Epoch: l.Epoch, Owner: l.Owner,
		Log: r.Log, Started: r.Started, Finished: c.now, Pass: c.st.Pass, Try: l.Try, Environment: r.Environment}
	c.ev = ledger.Event{Step: c.st.Name, Item: &item, Attempt: l.Attempt, Epoch: l.Epoch, Owner: l.Owner}
	t.Durable = true
	ref := c.ref
	t.After(func(x *index.Index) { delete(x.Leases, ref) })
	task.Leases--
	c.st.Leased--
	u.Owner, u.LeaseUntil = "", time.Time{}
	// A success's output counts against the task's output quota; one that
	// does not fit becomes a budget failure (internal/quota).
	if err := quota.ChargeOutput(t, &r); err != nil {
		return nil, ledger.Claimed{}, err
	}
	// A success or a repair checkpoints the workspace the attempt left
	// (internal/snapshot); a failure records none.
	if r.Workspace != nil && r.Failure == nil {
		if err := snapshot.Record(t, task, l, c.st.Pass, r.Workspace, c.now); err != nil {
			return nil, ledger.Claimed{}, err
		}
	}
	switch {
	case r.Failure != nil:
		err = s.commitFailure(c, r)
	case r.Repair != nil:
		err = s.commitRepair(c, *r.Repair)
	default:
		err = s.commitOutput(c, r)
	}
	if err != nil {
		return nil, ledger.Claimed{}, err
	}
	if !c.recSaved {
		if err := t.PutJSON(kv.AttemptKey(l.Task, l.Step, l.Item, l.Attempt), &c.rec); err != nil {
			return nil, ledger.Claimed{}, err
		}
	}
	// With this unit done, what is left may all wait for people.
	if err := s.approvals.SettleWaiting(t, task); err != nil {
		return nil, ledger.Claimed{}, err
	}
	// A budget this commit reached pauses the task before anything more
	// is claimed.
	if err := s.budgets.Check(t, task); err != nil {
		return nil, ledger.Claimed{}, err
	}
	var claimed ledger.Claimed
	if next.Max > 0 {
		if claimed, err = s.claim(t, next, task); err != nil {
			return nil, ledger.Claimed{}, err
		}
	}
	task.UpdatedAt = c.now
	if err := t.SaveTask(task); err != nil {
		return nil, ledger.Claimed{}, err
	}
	if r.HeaderOnly {
		return task, claimed, nil
	}
	return task, claimed, t.Fill(task)
}

// commitFailure records a failed attempt: the unit is ready again at
// r.RetryAt, or failed (and its item failed, which may fail the step).
func (s *Store) commitFailure(c *unitCommit, r ledger.Result) error {
	f := *r.Failure
	f.Step, f.Item, f.Attempt, f.Single = c.st.Name, c.l.Item, c.l.Attempt, !c.st.FanOut && c.st.Every == 0
	c.rec.Failure, c.u.Failure = &f, &f
	c.task.Failures++
	c.task.ConsecutiveFailures++
	c.ev.Kind, c.ev.Message = f.Kind, f.Message
	if !r.RetryAt.IsZero() {
		c.u.State, c.u.NotBefore, c.ev.Type = ledger.UnitReady, r.RetryAt, ledger.EvUnitRetry
		ref, at := c.ref, r.RetryAt
		b := c.t.Batch()
		b.Ready = append(b.Ready, ref)
		c.t.After(func(x *index.Index) { x.AddReady(ref, at, false) })
	} else {
		c.u.State, c.ev.Type = ledger.UnitFailed, ledger.EvUnitFailed
	}
	if err := c.saveUnit(); err != nil {
		return err
	}
	if err := s.event(c.t, c.task, c.ev); err != nil {
		return err
	}
	if c.u.State == ledger.UnitFailed {
		return s.failItem(c.t, c.task, c.l.Step, &f)
	}
	return nil
}

// commitRepair records an attempt that asked for a repair. The unit stays
// leased until the repair either marks its whole step stale (and may plan
// it again) or fails the task.
func (s *Store) commitRepair(c *unitCommit, rp ledger.Repair) error {
	c.rec.Repair = rp.Reason
	c.task.ConsecutiveFailures = 0
	if err := s.repair(c.t, c.task, c.l, rp); err != nil {
		return err
	}
	if c.task.Status == ledger.Failed {
		c.u.State = ledger.UnitFailed
		return c.saveUnit()
	}
	return nil
}

// commitOutput records a successful attempt: its output, counters and
// notes, the step's progress, and the task's advance when the step is done.
func (s *Store) commitOutput(c *unitCommit, r ledger.Result) error {
	t, task, st, l := c.t, c.task, c.st, c.l
	out := r.Output
	if len(out) == 0 {
		out = json.RawMessage("null")
	}
	c.rec.Output = out
	c.u.State, c.u.Committed, c.u.Failure = ledger.UnitDone, l.Attempt, nil
	st.Done++
	sampleProgress(task, l.Step, c.now) // progress.go: its count and rate samples
	if task.Budget != nil {
		task.Budget.Units++
	}
	for name, d := range r.Counts {
		if task.Counters == nil {
			task.Counters = map[string]int64{}
		}
		task.Counters[name] += d
	}
	st.Counters = addCounts(st.Counters, r.Counts)
	for _, n := range r.Notes {
		n.Seq, n.Step, n.Item, n.Attempt, n.Time = task.Notes, st.Name, l.Item, l.Attempt, c.now
		task.Notes++
		countNote(task, n.Kind) // progress.go
		if err := t.PutJSON(kv.NoteKey(task.ID, n.Seq), n); err != nil {
			return err
		}
	}
	if st.Windows > 0 {
		if err := s.addToWindows(t, task, l.Step, l.Item); err != nil {
			return err
		}
	}
	task.ConsecutiveFailures = 0
	c.ev.Type = ledger.EvUnitDone
	// The attempt record goes first: advancing may read this output.
	if err := t.PutJSON(kv.AttemptKey(l.Task, l.Step, l.Item, l.Attempt), &c.rec); err != nil {
		return err
	}
	c.recSaved = true
	if err := c.saveUnit(); err != nil {
		return err
	}
	if err := s.event(t, task, c.ev); err != nil {
		return err
	}
	if st.Done+st.Failed == st.Units && l.Step == task.Cursor {
		return s.advance(t, task)
	}
	return nil
}

// planAfterCommit plans the fan-out step a commit entered, if any, in the
// committing worker's goroutine, and then takes a unit of it when the
// commit claimed none. The commit stands whatever happens here: a failure
// is logged, and planning goes on at the next claim.
func (s *Store) planAfterCommit(ctx context.Context, out *ledger.Task, claimed ledger.Claimed, next ledger.ClaimRequest) (*ledger.Task, ledger.Claimed) {
	// A stop (ctx done) cutting these short is expected, not a problem.
	logFailure := s.log.Warn
	if ctx.Err() != nil {
		logFailure = s.log.Debug
	}
	ran, err := s.planPending(ctx, out.ID)
	if err != nil {
		logFailure("planning after a commit failed; the next claim plans again", "task", out.ID, "error", err)
		return out, claimed
	}
	if !ran {
		return out, claimed
	}
	if t, err := s.Task(ctx, out.ID); err != nil {
		logFailure("reading the task after planning failed", "task", out.ID, "error", err)
	} else {
		out = t
	}
	if next.Max > 0 && len(claimed.Leases) == 0 {
		c, err := s.Claim(ctx, next)
		if err != nil {
			logFailure("claiming after planning failed; the worker claims again", "task", out.ID, "error", err)
		} else {
			claimed = c
		}
	}
	return out, claimed
}

// advance moves the cursor past a completed step: to the next step, whose
// units it plans, or to success after the last one.
func (s *Store) advance(t *kv.Tx, task *ledger.Task) error {
	for {
		cur := task.Cursor
		if t.Step(task, cur).Windows > 0 {
			if err := s.finishWindows(t, task, cur); err != nil {
				return err
			}
		}
		if err := s.event(t, task, ledger.Event{Type: ledger.EvStepDone, Step: t.Step(task, cur).Name,
			Message: fmt.Sprintf("%d units", t.Step(task, cur).Units)}); err != nil {
			return err
		}
		if cur == task.StepCount()-1 {
			out, err := read.New(t).StepOutputOf(task, outputStep(t, task))
			if err != nil {
				return err
			}
			task.Status, task.Output, task.FinishedAt, task.Reason = ledger.Succeeded, out, s.now(), ""
			if err := s.withdraw(t, task); err != nil {
				return err
			}
			return s.event(t, task, ledger.Event{Type: ledger.EvSucceeded})
		}
		task.Cursor++
		if err := s.enterStep(t, task); err != nil {
			return err
		}
		if !task.Status.Runnable() {
			return nil
		}
		if st := *t.Step(task, task.Cursor); !st.Planned || st.Done+st.Failed < st.Units {
			return nil // units to run, or items still to plan
		}
	}
}

// enterStep starts a new pass of the step under the cursor. A plain step
// gets its one unit here; a fan-out step is only marked for planning: its
// items are evaluated and written by planPending, outside the commit leader
// and in bounded batches, once this transaction has committed.
func (s *Store) enterStep(t *kv.Tx, task *ledger.Task) error {
	idx := task.Cursor
	st := t.Step(task, idx)
	if st.Every > 0 {
		// A window step: its units were written while its anchor ran, and
		// its last window closed when the anchor completed.
		return nil
	}
	st.Pass++
	st.Planned, st.Units, st.Written, st.PlanHash, st.Done, st.Leased = false, 0, 0, "", 0, 0
	st.Failed = 0
	task.Waiting, st.Waiting = max(task.Waiting-st.Waiting, 0), 0
	id := task.ID
	if st.Windows > 0 {
		if err := s.enterWindows(t, task, idx); err != nil {
			return err
		}
	}
	if st.FanOut {
		if s.plan == nil {
			return s.failPlan(t, task, &ledger.Failure{Kind: fault.Input, Message: "no planner for a fan-out step", Step: st.Name})
		}
		t.After(func(x *index.Index) { x.NeedPlan(id) })
		return nil
	}
	if err := s.writeUnits(t, task, idx, []ledger.Item{{}}); err != nil {
		return err
	}
	st.Planned, st.Units = true, 1
	return s.event(t, task, ledger.Event{Type: ledger.EvStepStarted, Step: st.Name, Message: fmt.Sprintf("pass %d, 1 units", st.Pass)})
}

// writeUnits creates ready units for items, numbered from the step's
// Written count on, and advances it.
func (s *Store) writeUnits(t *kv.Tx, task *ledger.Task, idx int, items []ledger.Item) error {
	st := t.Step(task, idx)
	id, from := task.ID, st.Written
	b := t.Batch()
	for i, it := range items {
		n := from + i
		u := &ledger.Unit{Task: id, Step: idx, Item: n, Pass: st.Pass, Key: it.Key, Value: it.Value, State: ledger.UnitReady}
		if st.Pass > 1 {
			// Attempt numbers go on across passes: attempt records are keyed
			// by them. The pass's tries count from there.
			old := new(ledger.Unit)
			if err := t.GetJSON(kv.UnitKey(id, idx, n), old); err == nil {
				u.Attempt, u.Base = old.Attempt, old.Attempt
			} else if !errors.Is(err, ledger.ErrNotFound) {
				return err
			}
		}
		if err := t.PutJSON(kv.UnitKey(id, idx, n), u); err != nil {
			return err
		}
		b.Ready = append(b.Ready, index.Ref{Task: id, Step: idx, Item: n})
	}
	st.Written += len(items)
	to := st.Written
	first := st.Every > 0 // a window unit goes ahead of its anchor's queue
	t.After(func(x *index.Index) {
		for i := from; i < to; i++ {
			x.AddReady(index.Ref{Task: id, Step: idx, Item: i}, time.Time{}, first)
		}
	})
	return nil
}

// Planning batches: a batch of units is written in one transaction of at
// most planBatch units and about planBatchBytes of item keys and values, so
// a step of any size is planned in transactions Badger accepts.
const (
	planBatch      = 1000
	planBatchBytes = 512 << 10
)

// planPending plans the fan-out steps that wait for their items (only task
// only's, when set): it evaluates each step's for_each through the Planner
// in a read-only view, outside the commit leader, then writes the units in
// bounded batches. Units are claimable as soon as their batch commits.
// Callers run it after their own operation committed, in their own
// goroutine, so planning never stalls other commits, claims or heartbeats.
//
// Planning is resumable: the first batch records the number of items and a
// digest of the list; after a crash the step is planned again from the
// records, the batches already written are skipped, and a list that came out
// different fails the task instead of mixing two lists.
//
// It reports whether it planned anything.
func (s *Store) planPending(ctx context.Context, only string) (ran bool, err error) {
	for {
		s.idx.Mu.Lock()
		id, ok := s.idx.TakePlan(only)
		s.idx.Mu.Unlock()
		if !ok {
			return ran, nil
		}
		ran = true
		done, err := s.planTask(ctx, id)
		s.idx.Mu.Lock()
		s.idx.ReleasePlan(id, !done)
		s.idx.Mu.Unlock()
		if err != nil {
			return ran, err
		}
	}
}

// planTask plans task id's current step. done reports that nothing is left
// to plan (the step is planned, or the task moved on or failed).
func (s *Store) planTask(ctx context.Context, id string) (done bool, err error) {
	var task *ledger.Task
	var items []ledger.Item
	var perr error
	err = s.view(func(t *kv.Tx) error {
		var err error
		if task, err = t.LoadTask(id); err != nil {
			return err
		}
		if st := task.Steps[task.Cursor]; !task.Status.Runnable() || st.Planned || !st.FanOut {
			task = nil
			return nil
		}
		items, perr = s.plan(ctx, read.New(t), task, task.Cursor)
		return nil
	})
	if errors.Is(err, ledger.ErrNotFound) {
		return true, nil
	}
	if err != nil || task == nil {
		return err == nil, err
	}
	if err := ctx.Err(); err != nil {
		return false, err
	}
	step, pass := task.Cursor, task.Steps[task.Cursor].Pass
	// current loads the task if it is still at the step and pass planned.
	current := func(t *kv.Tx) (*ledger.Task, error) {
		cur := new(ledger.Task)
		if err := t.GetJSON(kv.TaskKey(id), cur); err != nil {
			return nil, err
		}
		if !cur.Status.Runnable() || cur.Cursor != step || t.Step(cur, step).Pass != pass || t.Step(cur, step).Planned {
			return nil, nil
		}
		return cur, nil
	}
	if perr != nil {
		var se *fault.StepError
		f := &ledger.Failure{Kind: fault.Input, Message: perr.Error(), Step: task.Steps[step].Name}
		if errors.As(perr, &se) {
			f.Kind, f.Message = se.Kind, se.Message
		}
		return true, s.failPlanning(ctx, id, current, f)
	}
	for i, it := range items {
		if n := len(it.Key) + len(it.Value); n > ledger.MaxItemBytes {
			return true, s.failPlanning(ctx, id, current, &ledger.Failure{Kind: fault.TooLarge, Step: task.Steps[step].Name, Message: fmt.Sprintf(
				"item %d of the for_each list is %d bytes; an item may have at most %d (pass large data as an artifact ref)", i, n, ledger.MaxItemBytes)})
		}
	}
	sum := digestItems(items)
	limit := planBatch
	for {
		finished := false
		err := s.update(ctx, func(t *kv.Tx) error {
			finished = false
			cur, err := current(t)
			if err != nil {
				return err
			}
			if cur == nil {
				finished = true
				return nil
			}
			st := t.Step(cur, step)
			if st.Written == 0 && st.PlanHash == "" {
				st.Units, st.PlanHash = len(items), sum
				if err := s.event(t, cur, ledger.Event{Type: ledger.EvStepStarted, Step: st.Name,
					Message: fmt.Sprintf("pass %d, %d units", st.Pass, len(items))}); err != nil {
					return err
				}
			} else if st.PlanHash != sum || st.Units != len(items) {
				finished = true
				if err := s.failPlan(t, cur, &ledger.Failure{Kind: fault.Input, Step: st.Name, Message: fmt.Sprintf(
					"for_each gave a different list when planning resumed (%d items; the first batch had %d)", len(items), st.Units)}); err != nil {
					return err
				}
				return t.SaveTask(cur)
			}
			from, to, size := st.Written, st.Written, 0
			for to < len(items) && to-from < limit && (to == from || size < planBatchBytes) {
				size += len(items[to].Key) + len(items[to].Value)
				to++
			}
			if err := s.writeUnits(t, cur, step, items[from:to]); err != nil {
				return err
			}
			if st.Written == st.Units {
				st.Planned, finished = true, true
				if st.Units == 0 {
					t.Durable = true
					if err := s.advance(t, cur); err != nil {
						return err
					}
				}
			}
			cur.UpdatedAt = s.now()
			return t.SaveTask(cur)
		})
		if err == nil && !finished && s.planHook != nil {
			s.planHook()
		}
		switch {
		case errors.Is(err, badger.ErrTxnTooBig) && limit > 1:
			limit /= 4 // large items: smaller batches
			continue
		case errors.Is(err, badger.ErrTxnTooBig):
			return true, s.failPlanning(ctx, id, current, &ledger.Failure{Kind: fault.TooLarge, Step: task.Steps[step].Name,
				Message: fmt.Sprintf("an item of the for_each list is too large to store (%v)", err)})
		case err != nil:
			return false, err
		}
		if finished {
			return true, nil
		}
	}
}

// failPlanning fails task id with f if it is still at the step and pass
// being planned (current loads it then, and nil otherwise).
func (s *Store) failPlanning(ctx context.Context, id string, current func(*kv.Tx) (*ledger.Task, error), f *ledger.Failure) error {
	return s.update(ctx, func(t *kv.Tx) error {
		task, err := current(t)
		if task == nil || err != nil {
			return err
		}
		if err := s.failPlan(t, task, f); err != nil {
			return err
		}
		return t.SaveTask(task)
	})
}

// failPlan fails a task whose step could not be planned; the caller saves it.
func (s *Store) failPlan(t *kv.Tx, task *ledger.Task, f *ledger.Failure) error {
	t.Durable = true
	return s.fail(t, task, f, fmt.Sprintf("step %q: planning for_each: %s", f.Step, f.Message))
}

// digestItems is the digest of a for_each list that planning resumed after
// a crash compares.
func digestItems(items []ledger.Item) string {
	h := sha256.New()
	var n [8]byte
	for _, it := range items {
		for _, b := range [][]byte{it.Key, it.Value} {
			binary.LittleEndian.PutUint64(n[:], uint64(len(b)))
			h.Write(n[:])
			h.Write(b)
		}
	}
	return hex.EncodeToString(h.Sum(nil)[:16])
}

// repair sends the task back to r.RestartFrom, or fails it when the repair
// budget is spent.
func (s *Store) repair(t *kv.Tx, task *ledger.Task, l ledger.Lease, r ledger.Repair) error {
	task.Repairs++
	task.RepairReason = r.Reason
	st := *t.Step(task, l.Step)
	item := l.Item
	grace := 0
	if task.Budget != nil {
		grace = task.Budget.RepairGrace
	}
	if task.Repairs > r.Max+grace {
		if err := s.event(t, task, ledger.Event{Type: ledger.EvRepair, Step: st.Name, Item: &item, Attempt: l.Attempt,
			Message: fmt.Sprintf("repair %d refused (max %d): %s", task.Repairs, r.Max+grace, r.Reason)}); err != nil {
			return err
		}
		// The step's repair.max pauses the task instead of failing it: the
		// unit goes back to ready without spending a try, and a resume
		// with --budget repairs=+N allows N more repairs.
		task.Repairs--
		return s.budgets.PauseForRepairs(t, task, l, ledger.PauseReason{Kind: ledger.PauseRepairs, Name: st.Name,
			Note: fmt.Sprintf("repair.max %d reached; last reason: %s", r.Max+grace, r.Reason),
			Used: float64(task.Repairs), Limit: float64(r.Max + grace)})
	}
	if r.RestartFrom < 0 || r.RestartFrom > l.Step {
		return fmt.Errorf("repair restart step %d is not at or before step %d", r.RestartFrom, l.Step)
	}
	if ws := t.Step(task, r.RestartFrom); ws.Every > 0 {
		r.RestartFrom = ws.Anchor // a window step starts again with its anchor
	}
	if err := s.event(t, task, ledger.Event{Type: ledger.EvRepair, Step: st.Name, Item: &item, Attempt: l.Attempt,
		Message: fmt.Sprintf("repair %d of %d: back to %q: %s", task.Repairs, r.Max, t.Step(task, r.RestartFrom).Name, r.Reason)}); err != nil {
		return err
	}
	for i := r.RestartFrom; i < task.StepCount(); i++ {
		if err := s.resetStep(t, task, i); err != nil {
			return err
		}
	}
	task.Cursor = r.RestartFrom
	return s.enterStep(t, task)
}

// resetStep marks every unit of a step stale and withdraws them from the
// ready and lease indexes, and what they counted from the task's counters:
// the units of the step's next pass count again as they commit.
func (s *Store) resetStep(t *kv.Tx, task *ledger.Task, step int) error {
	st := t.Step(task, step)
	if st.Counters != nil && task.Counters != nil {
		for name, n := range *st.Counters {
			if task.Counters[name] -= n; task.Counters[name] == 0 {
				delete(task.Counters, name)
			}
		}
	}
	st.Counters = nil
	if st.Written == 0 {
		return nil
	}
	// Units of an earlier pass are dead whatever their record says (claims,
	// commits and heartbeats compare the pass); marking them stale is for
	// readers, and only done where it fits a transaction easily.
	if st.Written <= planBatch {
		for i := 0; i < st.Written; i++ {
			u := new(ledger.Unit)
			if err := t.GetJSON(kv.UnitKey(task.ID, step, i), u); err != nil {
				return err
			}
			u.State, u.Owner, u.LeaseUntil = ledger.UnitStale, "", time.Time{}
			if err := t.PutJSON(kv.UnitKey(task.ID, step, i), u); err != nil {
				return err
			}
		}
	}
	id := task.ID
	t.After(func(x *index.Index) {
		x.DropStep(id, step)
		s.kv.TruncatePrefix(id, step)
	})
	task.Leases -= st.Leased
	if st.Waiting > 0 {
		task.Waiting, st.Waiting = max(task.Waiting-st.Waiting, 0), 0
		if err := s.approvals.Void(t, task, step, st.Pass, "the step was entered again (a repair or a retry): its next pass asks again"); err != nil {
			return err
		}
	}
	st.Planned, st.Units, st.Written, st.PlanHash, st.Done, st.Leased = false, 0, 0, "", 0, 0
	st.Failed = 0
	return nil
}

// addCounts returns the counts c with the counts d added, in a new map
// (StepState.Counters is never changed in place); c itself when d is empty.
func addCounts(c *map[string]int64, d map[string]int64) *map[string]int64 {
	if len(d) == 0 {
		return c
	}
	m := make(map[string]int64, len(d))
	if c != nil {
		maps.Copy(m, *c)
	}
	for name, n := range d {
		m[name] += n
	}
	return &m
}

// fail ends the task as failed and withdraws all its units.
func (s *Store) fail(t *kv.Tx, task *ledger.Task, f *ledger.Failure, reason string) error {
	task.Status, task.Failure, task.Reason, task.FinishedAt = ledger.Failed, f, reason, s.now()
	if err := s.withdraw(t, task); err != nil {
		return err
	}
	return s.event(t, task, ledger.Event{Type: ledger.EvFailed, Kind: f.Kind, Message: reason})
}

// withdraw takes a task that is no longer runnable out of the claim index.
func (s *Store) withdraw(t *kv.Tx, task *ledger.Task) error {
	// Leases are counted on the task and on their steps. Units exist only
	// for the step under the cursor, so that is where the leases are; the
	// other steps are read only if the counts say some lease is elsewhere.
	if _, partial := kv.LoadedSteps(task); !partial {
		for i := range task.Steps {
			task.Steps[i].Leased = 0
		}
	} else {
		t.Step(task, task.Cursor)
		n := 0
		loaded, _ := kv.LoadedSteps(task)
		for _, st := range loaded {
			n += st.Leased
			st.Leased = 0
		}
		if n != task.Leases {
			for i := range task.StepCount() {
				t.Step(task, i).Leased = 0
			}
		}
	}
	task.Leases = 0
	id := task.ID
	t.After(func(x *index.Index) {
		x.RemoveTask(id)
		s.kv.DropPrefix(id)
	})
	return t.Del(kv.ActiveKey(id))
}

// Cancel cancels a task that has not finished. Attempts in flight lose their
// leases: their commits are refused.
func (s *Store) Cancel(ctx context.Context, id, reason string) (*ledger.Task, error) {
	var out *ledger.Task
	err := s.update(ctx, func(t *kv.Tx) error {
		task := new(ledger.Task)
		if err := t.GetJSON(kv.TaskKey(id), task); err != nil {
			return err
		}
		if task.Status.Terminal() {
			return &kv.FinishedError{ID: id, Status: task.Status, Verb: "cancel"}
		}
		t.Durable = true
		if reason == "" {
			reason = "cancelled by user"
		}
		task.Status, task.Reason, task.FinishedAt, task.UpdatedAt = ledger.Cancelled, reason, s.now(), s.now()
		if err := s.withdraw(t, task); err != nil {
			return err
		}
		if err := s.event(t, task, ledger.Event{Type: ledger.EvCancelled, Message: reason}); err != nil {
			return err
		}
		if err := t.SaveTask(task); err != nil {
			return err
		}
		out = task
		return t.Fill(out)
	})
	return out, err
}

// newTaskID returns a 26-character id that sorts by creation time: 48 bits of
// milliseconds and 80 random bits in Crockford base32 (the ULID layout).
func newTaskID(now time.Time) string {
	const alphabet = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
	var b [16]byte
	ms := uint64(now.UnixMilli())
	for i := 5; i >= 0; i-- {
		b[i] = byte(ms)
		ms >>= 8
	}
	_, _ = rand.Read(b[6:])
	// 128 bits -> 26 base32 digits, most significant first.
	var out [26]byte
	hi := uint64(b[0])<<56 | uint64(b[1])<<48 | uint64(b[2])<<40 | uint64(b[3])<<32 | uint64(b[4])<<24 | uint64(b[5])<<16 | uint64(b[6])<<8 | uint64(b[7])
	lo := uint64(b[8])<<56 | uint64(b[9])<<48 | uint64(b[10])<<40 | uint64(b[11])<<32 | uint64(b[12])<<24 | uint64(b[13])<<16 | uint64(b[14])<<8 | uint64(b[15])
	for i := 25; i >= 0; i-- {
		out[i] = alphabet[lo&31]
		lo = lo>>5 | hi<<59
		hi >>= 5
	}
	return string(out[:])
}

// Retry re-opens a failed or cancelled task, or a task with failed items
// (FailedItems). With from < 0 it goes on at the step it stopped at, or at
// the first step with failed items when that is earlier (the steps after it
// are entered again, as with from): every unit committed is kept, and only
// the units that did not commit run (a failed unit, a failed item, one whose
// lease the stop ended, one not yet run or planned). With from >= 0, which
// must not be after the step it stopped at, every output committed before
// step from is kept, and that
// step and the ones after it are entered again: their pass rises (earlier
// attempts stay on record) and what their earlier pass counted leaves the
// task's counters. Either way every unit gets its step's whole retry budget
// again (Unit.Base), notes and the totals of attempts, failures and
// repairs are kept, and consecutive failures start again from zero. by says
// who retried, for the event log.
func (s *Store) Retry(ctx context.Context, id string, from int, by string) (*ledger.Task, error) {
	err := s.update(ctx, func(t *kv.Tx) error {
		task := new(ledger.Task)
		if err := t.GetJSON(kv.TaskKey(id), task); err != nil {
			return err
		}
		keep := from < 0
		failedAt := -1 // the first step with failed items a retry runs again
		if keep {
			failedAt = firstFailedItems(t, task)
		}
		if task.Status != ledger.Failed && task.Status != ledger.Cancelled && (task.Status != ledger.Succeeded || failedAt < 0) {
			return fmt.Errorf("task %s is %s: only a failed or cancelled task, or one with failed items, can be retried", id, task.Status)
		}
		if task.Removing {
			return fmt.Errorf("task %s is being removed: finish with lhengine rm %s", id, id)
		}
		if keep {
			from = task.Cursor
		}
		if failedAt >= 0 && failedAt < from {
			// Its failed items run again, and the steps after it with
			// the outputs they add.
			for i := failedAt + 1; i < task.StepCount(); i++ {
				if err := s.resetStep(t, task, i); err != nil {
					return err
				}
			}
			from, task.Cursor = failedAt, failedAt
		}
		if from > task.Cursor || from >= task.StepCount() {
			return fmt.Errorf("task %s stopped at step %d %q: it can be retried from that step or an earlier one, not from step %d",
				id, task.Cursor+1, t.Step(task, task.Cursor).Name, from+1)
		}
		if ws := t.Step(task, from); ws.Every > 0 && !keep {
			from = ws.Anchor // a window step starts again with its anchor
		}
		t.Durable = true
		was := task.Status
		task.Retries++
		if !keep {
			for i := from; i < task.StepCount(); i++ {
				if err := s.resetStep(t, task, i); err != nil {
					return err
				}
			}
			task.Cursor = from
		}
		task.Status, task.Failure, task.Reason, task.FinishedAt, task.Output = ledger.Queued, nil, "", time.Time{}, nil
		if !task.StartedAt.IsZero() {
			task.Status = ledger.Running
		}
		task.ConsecutiveFailures, task.Leases = 0, 0
		if err := t.Put(kv.ActiveKey(id), nil); err != nil {
			return err
		}
		t.After(func(x *index.Index) { x.AddActive(id) })
		msg := fmt.Sprintf("%s task retried from step %q", was, t.Step(task, from).Name)
		if keep {
			msg = fmt.Sprintf("%s task retried at step %q, keeping its %d committed units", was, t.Step(task, from).Name, t.Step(task, from).Done)
			if n := t.Step(task, from).Failed; n > 0 {
				msg += fmt.Sprintf(" and running its %d failed items again", n)
			}
			t.Step(task, from).Failed = 0 // reopen makes them ready
		}
		if by != "" {
			msg += " by " + by
		}
		if err := s.event(t, task, ledger.Event{Type: ledger.EvRetried, Step: t.Step(task, from).Name, Message: msg}); err != nil {
			return err
		}
		if keep {
			if err := s.reopen(t, task); err != nil {
				return err
			}
		} else if err := s.enterStep(t, task); err != nil {
			return err
		}
		return t.SaveTask(task)
	})
	if err != nil {
		return nil, err
	}
	if _, err := s.planPending(ctx, id); err != nil && ctx.Err() == nil {
		return nil, err
	}
	return s.Task(ctx, id)
}

// reopen makes ready again the units of a retried task's live steps (the
// cursor's, and its window steps) that did not commit, in the step's
// current pass: a failed unit, and one whose lease the stop ended (its
// holder's commit is refused, since the unit's owner changes). Units
// committed stay as they are. Every ready unit goes back to the claim
// index, in item order; a step whose planning was cut short is planned on,
// and a step with nothing left to run is completed.
func (s *Store) reopen(t *kv.Tx, task *ledger.Task) error {
	type ready struct {
		r     index.Ref
		at    time.Time
		first bool
	}
	var refs []ready
	var again []*ledger.Unit
	for _, step := range liveSteps(t, task) {
		st := t.Step(task, step)
		err := t.Scan(kv.UnitStepPrefix(task.ID, step), func(key, val []byte) (bool, error) {
			u := new(ledger.Unit)
			if err := json.Unmarshal(val, u); err != nil {
				return false, fmt.Errorf("unit record %s: %w", key, err)
			}
			if u.Pass != st.Pass {
				return true, nil // a unit of an earlier pass
			}
			switch u.State {
			case ledger.UnitLeased, ledger.UnitFailed:
				u.State, u.Owner, u.LeaseUntil, u.NotBefore = ledger.UnitReady, "", time.Time{}, time.Time{}
				again = append(again, u)
			case ledger.UnitReady:
			case ledger.UnitWaiting:
				if u.NotBefore.IsZero() {
					return true, nil // waits for a decision, with no expiry
				}
			default:
				return true, nil
			}
			refs = append(refs, ready{index.Ref{Task: task.ID, Step: step, Item: u.Item}, u.NotBefore, st.Every > 0})
			return true, nil
		})
		if err != nil {
			return err
		}
	}
	if t.Err() != nil {
		return t.Err()
	}
	for _, u := range again {
		if err := t.PutJSON(kv.UnitKey(task.ID, u.Step, u.Item), u); err != nil {
			return err
		}
	}
	t.After(func(x *index.Index) {
		for _, r := range refs {
			x.AddReady(r.r, r.at, r.first)
		}
	})
	st := t.Step(task, task.Cursor)
	switch {
	case !st.Planned && st.FanOut && s.plan == nil:
		return s.failPlan(t, task, &ledger.Failure{Kind: fault.Input, Message: "no planner for a fan-out step", Step: st.Name})
	case !st.Planned && st.FanOut:
		id := task.ID
		t.After(func(x *index.Index) { x.NeedPlan(id) })
	case st.Planned && st.Done+st.Failed >= st.Units:
		return s.advance(t, task)
	}
	return nil
}
