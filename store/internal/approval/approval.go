// Package approval keeps the units that wait for a person. A unit that
// needs a person's decision before it runs (a step's approval block, or a
// plugin's approval.request) waits for it in the state UnitWaiting, out of
// the claim queue, while the rest of the task runs on. The approval is a
// record of its own (table r/), written with the unit's change in one
// transaction, so a decision survives every crash and is taken once. A
// decision makes the unit ready again; the engine reads the approval
// before the unit's next attempt runs and acts on it (runs the unit, fails
// it, asks again: specs/ledger.md, "Approvals"). A pending approval that
// expires makes its unit claimable at the expiry, so that whichever worker
// claims it applies on_expiry.
//
// A unit whose effect's outcome is unknown waits the same way, for a
// person to settle the effect (WaitEffect).
package approval

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/lhengine/lhengine/ledger"
	"github.com/lhengine/lhengine/store/internal/budget"
	"github.com/lhengine/lhengine/store/internal/index"
	"github.com/lhengine/lhengine/store/internal/kv"
	"github.com/lhengine/lhengine/store/internal/lease"
	"github.com/lhengine/lhengine/store/internal/outbox"
)

// Approvals are a store's units waiting for people: Update is its group
// commit, Events its event log (and clock), Budgets pauses a task whose
// units all wait for an effect to be settled.
type Approvals struct {
	Update  kv.Update
	Events  *outbox.Events
	Budgets *budget.Budgets
}

// Request makes the unit of lease l wait for a person's decision:
// it records a (the store sets its id, task, unit, state and created time),
// gives the unit back without charging the attempt, and takes it out of
// the claim queue until the approval is decided or, if it has an expiry,
// until then. The task shows WaitingApproval when nothing else of it can
// run. It returns the task and the approval as recorded.
func (s *Approvals) Request(ctx context.Context, l ledger.Lease, a ledger.Approval) (*ledger.Task, *ledger.Approval, error) {
	var out *ledger.Task
	var rec *ledger.Approval
	err := s.Update(ctx, func(t *kv.Tx) error {
		u, task, err := lease.Leased(t, l)
		if err != nil {
			return err
		}
		t.Durable = true
		now := s.Events.Now()
		st := t.Step(task, l.Step)
		task.NextApproval++
		a.ID = strconv.FormatUint(task.NextApproval, 10)
		a.Task, a.Step, a.StepIndex, a.Item, a.Pass = task.ID, st.Name, l.Step, l.Item, st.Pass
		a.State, a.Created = ledger.ApprovalPending, now
		if a.Subject == nil {
			a.Subject = json.RawMessage("null")
		}
		a.SubjectSHA256 = ledger.SubjectSum(a.Subject)
		a.DecidedBy, a.DecidedAt, a.Note, a.UsedBy, a.Void = "", time.Time{}, "", 0, ""
		if err := t.PutJSON(kv.ApprovalKey(task.ID, task.NextApproval), &a); err != nil {
			return err
		}
		u.Approval = a.ID
		if err := holdUnit(t, task, st, u, l, a.Expires, now); err != nil {
			return err
		}
		ref := index.Ref{Task: l.Task, Step: l.Step, Item: l.Item}
		expires := a.Expires
		t.After(func(x *index.Index) {
			delete(x.Leases, ref)
			if !expires.IsZero() {
				x.AddReady(ref, expires, false) // claimed at the expiry, to apply on_expiry
			}
		})
		item := l.Item
		if err := s.Events.Append(t, task, ledger.Event{Type: ledger.EvApprovalRequested, Step: st.Name, Item: &item, Attempt: l.Attempt,
			Approval: a.ID, Message: fmt.Sprintf("approval %s: %s", a.ID, a.Prompt)}); err != nil {
			return err
		}
		if err := s.SettleWaiting(t, task); err != nil {
			return err
		}
		task.UpdatedAt = now
		if err := t.SaveTask(task); err != nil {
			return err
		}
		out, rec = task, &a
		return t.Fill(out)
	})
	return out, rec, err
}

// Decide records a person's decision on approval id of task:
// approved, or rejected, by whom, with a note. Only a pending approval
// that has not expired takes a decision (else ErrApprovalClosed); a
// finished task's approvals take none (ErrTerminal). The unit waiting for
// it becomes ready: its next attempt runs on an approval, and fails (or
// goes to its step's repair) on a rejection.
func (s *Approvals) Decide(ctx context.Context, task, id string, approve bool, by, note string) (*ledger.Approval, *ledger.Task, error) {
	var out *ledger.Approval
	var outTask *ledger.Task
	err := s.Update(ctx, func(t *kv.Tx) error {
		n, err := kv.ApprovalSeq(id)
		if err != nil {
			return err
		}
		tk := new(ledger.Task)
		if err := t.GetJSON(kv.TaskKey(task), tk); err != nil {
			return err
		}
		a := new(ledger.Approval)
		if err := t.GetJSON(kv.ApprovalKey(task, n), a); err != nil {
			if errors.Is(err, ledger.ErrNotFound) {
				return fmt.Errorf("%w: task %s has no approval %s (lhengine approvals %s lists them)", ledger.ErrNotFound, task, id, task)
			}
			return err
		}
		verb := "reject"
		if approve {
			verb = "approve"
		}
		now := s.Events.Now()
		if a.State == ledger.ApprovalPending && !a.Expires.IsZero() && !now.Before(a.Expires) {
			return fmt.Errorf("%w: approval %s of task %s expired at %s (on_expiry = %q applies)",
				ledger.ErrApprovalClosed, id, task, a.Expires.UTC().Format(time.RFC3339), a.OnExpiry)
		}
		if a.State != ledger.ApprovalPending {
			what := string(a.State)
			if a.Decided() {
				what += " by " + a.DecidedBy
			}
			if a.Void != "" {
				what += ": " + a.Void
			}
			return fmt.Errorf("%w: approval %s of task %s is %s", ledger.ErrApprovalClosed, id, task, what)
		}
		if tk.Status.Terminal() {
			return &kv.FinishedError{ID: task, Status: tk.Status, Verb: verb + " (approval " + id + " is void)"}
		}
		t.Durable = true
		a.State, a.DecidedBy, a.DecidedAt, a.Note = ledger.ApprovalRejected, by, now, note
		if approve {
			a.State = ledger.ApprovalApproved
		}
		if err := t.PutJSON(kv.ApprovalKey(task, n), a); err != nil {
			return err
		}
		item := a.Item
		msg := fmt.Sprintf("approval %s %s by %s", id, a.State, by)
		if note != "" {
			msg += ": " + note
		}
		if err := s.Events.Append(t, tk, ledger.Event{Type: ledger.EvApprovalDecided, Step: a.Step, Item: &item, Owner: by, Approval: id, Message: msg}); err != nil {
			return err
		}
		if err := s.wake(t, tk, a); err != nil {
			return err
		}
		tk.UpdatedAt = now
		if err := t.SaveTask(tk); err != nil {
			return err
		}
		out, outTask = a, tk
		return nil
	})
	return out, outTask, err
}

// wake makes the unit that waits for approval a ready again, if it still
// does (a repair may have replaced it since).
func (s *Approvals) wake(t *kv.Tx, task *ledger.Task, a *ledger.Approval) error {
	return s.WakeUnit(t, task, a.StepIndex, a.Item, func(u *ledger.Unit) bool {
		return u.Approval == a.ID && u.Pass == a.Pass && u.Effect == ""
	})
}

// WakeUnit makes unit (step, item) of task ready again if it waits and
// waits for what is (a decision, an effect settled).
func (s *Approvals) WakeUnit(t *kv.Tx, task *ledger.Task, step, item int, is func(*ledger.Unit) bool) error {
	u := new(ledger.Unit)
	if err := t.GetJSON(kv.UnitKey(task.ID, step, item), u); err != nil {
		if errors.Is(err, ledger.ErrNotFound) {
			return nil
		}
		return err
	}
	if u.State != ledger.UnitWaiting || !is(u) {
		return nil
	}
	u.State, u.NotBefore, u.Effect, u.WaitReason = ledger.UnitReady, time.Time{}, "", ""
	if err := t.PutJSON(kv.UnitKey(task.ID, step, item), u); err != nil {
		return err
	}
	if step < task.StepCount() {
		if st := t.Step(task, step); st.Pass == u.Pass && st.Waiting > 0 {
			st.Waiting--
		}
	}
	task.Waiting = max(task.Waiting-1, 0)
	ref := index.Ref{Task: task.ID, Step: step, Item: item}
	if task.Status == ledger.WaitingApproval {
		task.Status, task.Reason = ledger.Running, ""
		budget.TickWall(task, s.Events.Now())
	}
	if task.Status.Runnable() {
		b := t.Batch()
		b.Ready = append(b.Ready, ref)
		t.After(func(x *index.Index) { x.AddReady(ref, time.Time{}, false) })
	}
	return nil
}

// Close ends approval id of the unit of lease l without a
// person's decision: expired (its expiry passed while pending) or voided
// (its subject changed: why says how). The unit stays leased for the
// caller to commit, ask again or give back. A voided approval's event
// names why.
func (s *Approvals) Close(ctx context.Context, l ledger.Lease, id string, state ledger.ApprovalState, why string) (*ledger.Approval, error) {
	var out *ledger.Approval
	err := s.Update(ctx, func(t *kv.Tx) error {
		_, task, err := lease.Leased(t, l)
		if err != nil {
			return err
		}
		n, err := kv.ApprovalSeq(id)
		if err != nil {
			return err
		}
		a := new(ledger.Approval)
		if err := t.GetJSON(kv.ApprovalKey(task.ID, n), a); err != nil {
			return err
		}
		if a.State == state {
			out = a
			return nil
		}
		t.Durable = true
		a.State = state
		typ := ledger.EvApprovalExpired
		if state == ledger.ApprovalVoided {
			a.Void, typ = why, ledger.EvApprovalVoided
		}
		if err := t.PutJSON(kv.ApprovalKey(task.ID, n), a); err != nil {
			return err
		}
		item := a.Item
		msg := fmt.Sprintf("approval %s %s", id, state)
		if why != "" {
			msg += ": " + why
		}
		if err := s.Events.Append(t, task, ledger.Event{Type: typ, Step: a.Step, Item: &item, Attempt: l.Attempt, Approval: id, Message: msg}); err != nil {
			return err
		}
		out = a
		return t.SaveTask(task)
	})
	return out, err
}

// Use records that the attempt of lease l runs on approval id
// (Approval.UsedBy), once: the first attempt to run on it.
func (s *Approvals) Use(ctx context.Context, l ledger.Lease, id string) error {
	return s.Update(ctx, func(t *kv.Tx) error {
		_, task, err := lease.Leased(t, l)
		if err != nil {
			return err
		}
		n, err := kv.ApprovalSeq(id)
		if err != nil {
			return err
		}
		a := new(ledger.Approval)
		if err := t.GetJSON(kv.ApprovalKey(task.ID, n), a); err != nil {
			return err
		}
		if a.UsedBy != 0 {
			return nil
		}
		t.Durable = true
		a.UsedBy = l.Attempt
		return t.PutJSON(kv.ApprovalKey(task.ID, n), a)
	})
}

// SettleWaiting gives a runnable task the status WaitingApproval when
// units of it wait for approvals and nothing else of it can run now: no
// unit leased and none ready in the step under the cursor. When one of
// them waits for an effect to be settled instead, the task pauses
// (PauseEffect) with that unit's reason, as a task did before its other
// units could run on.
func (s *Approvals) SettleWaiting(t *kv.Tx, task *ledger.Task) error {
	if task.Waiting <= 0 || !task.Status.Runnable() || task.Status == ledger.WaitingApproval || task.Leases > 0 {
		return nil
	}
	st := t.Step(task, task.Cursor)
	if !st.Planned || st.Units-st.Done-st.Failed-st.Leased-st.Waiting > 0 {
		return nil
	}
	var effect *ledger.Unit
	err := t.Scan(kv.UnitStepPrefix(task.ID, task.Cursor), func(_, val []byte) (bool, error) {
		u := new(ledger.Unit)
		if err := json.Unmarshal(val, u); err != nil {
			return false, err
		}
		if u.State == ledger.UnitWaiting && u.Effect != "" && u.Pass == st.Pass {
			effect = u
			return false, nil
		}
		return true, nil
	})
	if err != nil {
		return err
	}
	if effect != nil {
		return s.Budgets.Pause(t, task, ledger.PauseReason{Kind: ledger.PauseEffect, Name: st.Name, Note: effect.WaitReason})
	}
	task.Status = ledger.WaitingApproval
	task.Reason = fmt.Sprintf("%d units wait for approval: lhengine approvals %s", task.Waiting, task.ID)
	if task.Waiting == 1 {
		// Say what the one approval is, and the command that decides it.
		var last *ledger.Approval
		err := t.Scan([]byte("r/"+task.ID+"/"), func(_, val []byte) (bool, error) {
			a := new(ledger.Approval)
			if err := json.Unmarshal(val, a); err != nil {
				return false, err
			}
			if a.State == ledger.ApprovalPending {
				last = a
			}
			return true, nil
		})
		if err != nil {
			return err
		}
		if last != nil {
			task.Reason = fmt.Sprintf("waits for approval %s of step %s item %d: %q; decide with lhengine approve %s %s (or reject)",
				last.ID, last.Step, last.Item, last.Prompt, task.ID, last.ID)
		}
	}
	budget.TickWall(task, s.Events.Now())
	return s.Events.Append(t, task, ledger.Event{Type: ledger.EvWaitingApproval, Message: task.Reason})
}

// Void voids the pending approvals of pass pass of a step, whose
// units will not run again.
func (s *Approvals) Void(t *kv.Tx, task *ledger.Task, step, pass int, why string) error {
	type found struct {
		key []byte
		a   ledger.Approval
	}
	var void []found
	err := t.Scan([]byte("r/"+task.ID+"/"), func(key, val []byte) (bool, error) {
		var a ledger.Approval
		if err := json.Unmarshal(val, &a); err != nil {
			return false, err
		}
		if a.StepIndex == step && a.Pass == pass && a.State == ledger.ApprovalPending {
			void = append(void, found{append([]byte(nil), key...), a})
		}
		return true, nil
	})
	if err != nil {
		return err
	}
	for _, f := range void {
		f.a.State, f.a.Void = ledger.ApprovalVoided, why
		if err := t.PutJSON(f.key, &f.a); err != nil {
			return err
		}
		item := f.a.Item
		if err := s.Events.Append(t, task, ledger.Event{Type: ledger.EvApprovalVoided, Step: f.a.Step, Item: &item, Approval: f.a.ID,
			Message: fmt.Sprintf("approval %s voided: %s", f.a.ID, why)}); err != nil {
			return err
		}
	}
	return nil
}

// WaitEffect makes the unit of lease l wait for a person to settle its
// effect key, whose outcome is unknown (mode manual): the attempt is given
// back uncharged, the unit leaves the claim queue until ResolveEffect
// settles the effect, and the task's other units run on. reason says so,
// with the commands that settle it. When nothing else of the task can
// run, the task pauses (PauseEffect) with that reason.
func (s *Approvals) WaitEffect(ctx context.Context, l ledger.Lease, key, reason string) (*ledger.Task, error) {
	var out *ledger.Task
	err := s.Update(ctx, func(t *kv.Tx) error {
		u, task, err := lease.Leased(t, l)
		if err != nil {
			return err
		}
		t.Durable = true
		now := s.Events.Now()
		st := t.Step(task, l.Step)
		u.Effect, u.WaitReason = key, reason
		if err := holdUnit(t, task, st, u, l, time.Time{}, now); err != nil {
			return err
		}
		ref := index.Ref{Task: l.Task, Step: l.Step, Item: l.Item}
		t.After(func(x *index.Index) { delete(x.Leases, ref) })
		item := l.Item
		if err := s.Events.Append(t, task, ledger.Event{Type: ledger.EvEffectUnknown, Step: st.Name, Item: &item, Attempt: l.Attempt, Message: reason}); err != nil {
			return err
		}
		if err := s.SettleWaiting(t, task); err != nil {
			return err
		}
		task.UpdatedAt = now
		if err := t.SaveTask(task); err != nil {
			return err
		}
		out = task
		return t.Fill(out)
	})
	return out, err
}

// holdUnit makes the leased unit u of lease l wait for a person until
// notBefore (zero: until decided): its attempt is given back as a stopping
// worker's is (Release), so the attempt that runs on the decision has the
// same number, and its step and task count it waiting.
func holdUnit(t *kv.Tx, task *ledger.Task, st *ledger.StepState, u *ledger.Unit, l ledger.Lease, notBefore, now time.Time) error {
	u.State, u.Owner, u.LeaseUntil, u.NotBefore = ledger.UnitWaiting, "", time.Time{}, notBefore
	u.Attempt = max(u.Attempt-1, 0)
	task.Attempts = max(task.Attempts-1, 0)
	task.Leases--
	st.Leased--
	st.Waiting++
	task.Waiting++
	budget.TickWall(task, now)
	return t.PutJSON(kv.UnitKey(l.Task, l.Step, l.Item), u)
}
