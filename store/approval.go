package store

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"
)

// Approvals: a unit that needs a person's decision before it runs (a
// step's approval block, or a plugin's approval.request) waits for it in
// the state UnitWaiting, out of the claim queue, while the rest of the
// task runs on. The approval is a record of its own (table r/), written
// with the unit's change in one transaction, so a decision survives every
// crash and is taken once. A decision makes the unit ready again; the
// engine reads the approval before the unit's next attempt runs and acts
// on it (runs the unit, fails it, asks again: specs/ledger.md,
// "Approvals"). A pending approval that expires makes its unit claimable
// at the expiry, so that whichever worker claims it applies on_expiry.

// ApprovalState is where an approval stands. The string value is
// persisted. Append only.
type ApprovalState string

// Approval states.
const (
	ApprovalPending  ApprovalState = "pending"
	ApprovalApproved ApprovalState = "approved"
	ApprovalRejected ApprovalState = "rejected"
	// ApprovalExpired: no decision came before Expires.
	ApprovalExpired ApprovalState = "expired"
	// ApprovalVoided: the subject changed after the approval was asked
	// for (or decided), or the unit it was for will not run again; Void
	// says why.
	ApprovalVoided ApprovalState = "voided"
)

// Approval sources: what asked for it.
const (
	ApprovalFromStep   = "step"   // the step's approval block
	ApprovalFromPlugin = "plugin" // the approval.request host call
)

// Approval is one request for a person's decision about one unit.
type Approval struct {
	ID   string `json:"id"`
	Task string `json:"task"`
	// Step and Item are the unit: the step's name and index, the fan-out
	// item (0 for a plain step); Pass is the step's pass it was asked in.
	Step      string `json:"step"`
	StepIndex int    `json:"step_index"`
	Item      int    `json:"item"`
	Pass      int    `json:"pass"`
	Source    string `json:"source"`
	Prompt    string `json:"prompt"`
	// Subject is what the decision is about, as JSON; SubjectSHA256 its
	// sha256 (of these bytes), checked again before the unit runs.
	Subject       json.RawMessage `json:"subject"`
	SubjectSHA256 string          `json:"subject_sha256"`
	Created       time.Time       `json:"created"`
	// Expires is when a pending approval stops accepting a decision (zero:
	// never); OnExpiry is what happens then: "reject" or "pause".
	Expires  time.Time     `json:"expires,omitzero"`
	OnExpiry string        `json:"on_expiry,omitempty"`
	State    ApprovalState `json:"state"`
	// DecidedBy (the OS user, or a token's name over TCP), DecidedAt and
	// Note record the decision.
	DecidedBy string    `json:"decided_by,omitempty"`
	DecidedAt time.Time `json:"decided_at,omitzero"`
	Note      string    `json:"note,omitempty"`
	// UsedBy is the first attempt of the unit that ran on the decision
	// (0: none yet). An approval covers the pass it was asked in: retries
	// and takeovers of that pass run on it, a later pass asks again.
	UsedBy int `json:"used_by,omitempty"`
	// Void says why an approval was voided.
	Void string `json:"void,omitempty"`
}

// Decided reports whether a person decided the approval.
func (a *Approval) Decided() bool {
	return a.State == ApprovalApproved || a.State == ApprovalRejected
}

// SubjectSum returns the sha256 of a subject, as Approval.SubjectSHA256.
func SubjectSum(subject []byte) string {
	sum := sha256.Sum256(subject)
	return hex.EncodeToString(sum[:])
}

// ErrApprovalClosed refuses a decision on an approval that is no longer
// pending: decided, expired or voided.
var ErrApprovalClosed = errors.New("approval is not pending")

func approvalKey(task string, n uint64) []byte { return fmt.Appendf(nil, "r/%s/%016x", task, n) }

// approvalSeq parses an approval id ("3") into its sequence number.
func approvalSeq(id string) (uint64, error) {
	n, err := strconv.ParseUint(id, 10, 64)
	if err != nil || n == 0 {
		return 0, fmt.Errorf("%w: approval %q (approval ids are numbers, as lhengine approvals lists them)", ErrNotFound, id)
	}
	return n, nil
}

// Approvals lists a task's approvals in the order they were asked for.
func (r *Reader) Approvals(id string) ([]Approval, error) {
	var out []Approval
	err := r.t.scan([]byte("r/"+id+"/"), func(_, val []byte) (bool, error) {
		var a Approval
		if err := json.Unmarshal(val, &a); err != nil {
			return false, err
		}
		out = append(out, a)
		return true, nil
	})
	return out, err
}

// Approval returns approval id of task; ErrNotFound when there is none.
func (r *Reader) Approval(task, id string) (*Approval, error) {
	n, err := approvalSeq(id)
	if err != nil {
		return nil, err
	}
	a := new(Approval)
	if err := r.t.getJSON(approvalKey(task, n), a); err != nil {
		if errors.Is(err, ErrNotFound) {
			return nil, fmt.Errorf("%w: task %s has no approval %s", ErrNotFound, task, id)
		}
		return nil, err
	}
	return a, nil
}

// RequestApproval makes the unit of lease l wait for a person's decision:
// it records a (the store sets its id, task, unit, state and created time),
// gives the unit back without charging the attempt, and takes it out of
// the claim queue until the approval is decided or, if it has an expiry,
// until then. The task shows WaitingApproval when nothing else of it can
// run. It returns the task and the approval as recorded.
func (s *Store) RequestApproval(ctx context.Context, l Lease, a Approval) (*Task, *Approval, error) {
	var out *Task
	var rec *Approval
	err := s.update(ctx, func(t *tx) error {
		u, task, err := s.leased(t, l)
		if err != nil {
			return err
		}
		t.durable = true
		now := s.now()
		st := t.step(task, l.Step)
		task.NextApproval++
		a.ID = strconv.FormatUint(task.NextApproval, 10)
		a.Task, a.Step, a.StepIndex, a.Item, a.Pass = task.ID, st.Name, l.Step, l.Item, st.Pass
		a.State, a.Created = ApprovalPending, now
		if a.Subject == nil {
			a.Subject = json.RawMessage("null")
		}
		a.SubjectSHA256 = SubjectSum(a.Subject)
		a.DecidedBy, a.DecidedAt, a.Note, a.UsedBy, a.Void = "", time.Time{}, "", 0, ""
		if err := t.putJSON(approvalKey(task.ID, task.NextApproval), &a); err != nil {
			return err
		}
		// The unit waits; its attempt is given back as a stopping worker's
		// is (Release): the attempt that runs on the decision has the same
		// number.
		u.State, u.Owner, u.LeaseUntil = UnitWaiting, "", time.Time{}
		u.Approval, u.NotBefore = a.ID, a.Expires
		u.Attempt = max(u.Attempt-1, 0)
		task.Attempts = max(task.Attempts-1, 0)
		task.Leases--
		st.Leased--
		st.Waiting++
		task.Waiting++
		tickWall(task, now)
		if err := t.putJSON(unitKey(l.Task, l.Step, l.Item), u); err != nil {
			return err
		}
		ref := unitRef{l.Task, l.Step, l.Item}
		expires := a.Expires
		t.after(func(x *index) {
			delete(x.leases, ref)
			if !expires.IsZero() {
				x.addReady(ref, expires, false) // claimed at the expiry, to apply on_expiry
			}
		})
		item := l.Item
		if err := s.event(t, task, Event{Type: EvApprovalRequested, Step: st.Name, Item: &item, Attempt: l.Attempt,
			Approval: a.ID, Message: fmt.Sprintf("approval %s: %s", a.ID, a.Prompt)}); err != nil {
			return err
		}
		if err := s.settleWaiting(t, task); err != nil {
			return err
		}
		task.UpdatedAt = now
		if err := t.saveTask(task); err != nil {
			return err
		}
		out, rec = task, &a
		return t.fill(out)
	})
	return out, rec, err
}

// DecideApproval records a person's decision on approval id of task:
// approved, or rejected, by whom, with a note. Only a pending approval
// that has not expired takes a decision (else ErrApprovalClosed); a
// finished task's approvals take none (ErrTerminal). The unit waiting for
// it becomes ready: its next attempt runs on an approval, and fails (or
// goes to its step's repair) on a rejection.
func (s *Store) DecideApproval(ctx context.Context, task, id string, approve bool, by, note string) (*Approval, *Task, error) {
	var out *Approval
	var outTask *Task
	err := s.update(ctx, func(t *tx) error {
		n, err := approvalSeq(id)
		if err != nil {
			return err
		}
		tk := new(Task)
		if err := t.getJSON(taskKey(task), tk); err != nil {
			return err
		}
		a := new(Approval)
		if err := t.getJSON(approvalKey(task, n), a); err != nil {
			if errors.Is(err, ErrNotFound) {
				return fmt.Errorf("%w: task %s has no approval %s (lhengine approvals %s lists them)", ErrNotFound, task, id, task)
			}
			return err
		}
		verb := "reject"
		if approve {
			verb = "approve"
		}
		now := s.now()
		if a.State == ApprovalPending && !a.Expires.IsZero() && !now.Before(a.Expires) {
			return fmt.Errorf("%w: approval %s of task %s expired at %s (on_expiry = %q applies)",
				ErrApprovalClosed, id, task, a.Expires.UTC().Format(time.RFC3339), a.OnExpiry)
		}
		if a.State != ApprovalPending {
			what := string(a.State)
			if a.Decided() {
				what += " by " + a.DecidedBy
			}
			if a.Void != "" {
				what += ": " + a.Void
			}
			return fmt.Errorf("%w: approval %s of task %s is %s", ErrApprovalClosed, id, task, what)
		}
		if tk.Status.Terminal() {
			return &finishedError{id: task, status: tk.Status, verb: verb + " (approval " + id + " is void)"}
		}
		t.durable = true
		a.State, a.DecidedBy, a.DecidedAt, a.Note = ApprovalRejected, by, now, note
		if approve {
			a.State = ApprovalApproved
		}
		if err := t.putJSON(approvalKey(task, n), a); err != nil {
			return err
		}
		item := a.Item
		msg := fmt.Sprintf("approval %s %s by %s", id, a.State, by)
		if note != "" {
			msg += ": " + note
		}
		if err := s.event(t, tk, Event{Type: EvApprovalDecided, Step: a.Step, Item: &item, Owner: by, Approval: id, Message: msg}); err != nil {
			return err
		}
		if err := s.wake(t, tk, a); err != nil {
			return err
		}
		tk.UpdatedAt = now
		if err := t.saveTask(tk); err != nil {
			return err
		}
		out, outTask = a, tk
		return nil
	})
	return out, outTask, err
}

// wake makes the unit that waits for approval a ready again, if it still
// does (a repair may have replaced it since).
func (s *Store) wake(t *tx, task *Task, a *Approval) error {
	return s.wakeUnit(t, task, a.StepIndex, a.Item, func(u *Unit) bool {
		return u.Approval == a.ID && u.Pass == a.Pass && u.Effect == ""
	})
}

// wakeUnit makes unit (step, item) of task ready again if it waits and
// waits for what is (a decision, an effect settled).
func (s *Store) wakeUnit(t *tx, task *Task, step, item int, is func(*Unit) bool) error {
	u := new(Unit)
	if err := t.getJSON(unitKey(task.ID, step, item), u); err != nil {
		if errors.Is(err, ErrNotFound) {
			return nil
		}
		return err
	}
	if u.State != UnitWaiting || !is(u) {
		return nil
	}
	u.State, u.NotBefore, u.Effect, u.WaitReason = UnitReady, time.Time{}, "", ""
	if err := t.putJSON(unitKey(task.ID, step, item), u); err != nil {
		return err
	}
	if step < task.stepCount() {
		if st := t.step(task, step); st.Pass == u.Pass && st.Waiting > 0 {
			st.Waiting--
		}
	}
	task.Waiting = max(task.Waiting-1, 0)
	ref := unitRef{task.ID, step, item}
	if task.Status == WaitingApproval {
		task.Status, task.Reason = Running, ""
		tickWall(task, s.now())
	}
	if task.Status.runnable() {
		b := t.batch()
		b.ready = append(b.ready, ref)
		t.after(func(x *index) { x.addReady(ref, time.Time{}, false) })
	}
	return nil
}

// CloseApproval ends approval id of the unit of lease l without a
// person's decision: expired (its expiry passed while pending) or voided
// (its subject changed: why says how). The unit stays leased for the
// caller to commit, ask again or give back. A voided approval's event
// names why.
func (s *Store) CloseApproval(ctx context.Context, l Lease, id string, state ApprovalState, why string) (*Approval, error) {
	var out *Approval
	err := s.update(ctx, func(t *tx) error {
		_, task, err := s.leased(t, l)
		if err != nil {
			return err
		}
		n, err := approvalSeq(id)
		if err != nil {
			return err
		}
		a := new(Approval)
		if err := t.getJSON(approvalKey(task.ID, n), a); err != nil {
			return err
		}
		if a.State == state {
			out = a
			return nil
		}
		t.durable = true
		a.State = state
		typ := EvApprovalExpired
		if state == ApprovalVoided {
			a.Void, typ = why, EvApprovalVoided
		}
		if err := t.putJSON(approvalKey(task.ID, n), a); err != nil {
			return err
		}
		item := a.Item
		msg := fmt.Sprintf("approval %s %s", id, state)
		if why != "" {
			msg += ": " + why
		}
		if err := s.event(t, task, Event{Type: typ, Step: a.Step, Item: &item, Attempt: l.Attempt, Approval: id, Message: msg}); err != nil {
			return err
		}
		out = a
		return t.saveTask(task)
	})
	return out, err
}

// UseApproval records that the attempt of lease l runs on approval id
// (Approval.UsedBy), once: the first attempt to run on it.
func (s *Store) UseApproval(ctx context.Context, l Lease, id string) error {
	return s.update(ctx, func(t *tx) error {
		_, task, err := s.leased(t, l)
		if err != nil {
			return err
		}
		n, err := approvalSeq(id)
		if err != nil {
			return err
		}
		a := new(Approval)
		if err := t.getJSON(approvalKey(task.ID, n), a); err != nil {
			return err
		}
		if a.UsedBy != 0 {
			return nil
		}
		t.durable = true
		a.UsedBy = l.Attempt
		return t.putJSON(approvalKey(task.ID, n), a)
	})
}

// settleWaiting gives a runnable task the status WaitingApproval when
// units of it wait for approvals and nothing else of it can run now: no
// unit leased and none ready in the step under the cursor. When one of
// them waits for an effect to be settled instead, the task pauses
// (PauseEffect) with that unit's reason, as a task did before its other
// units could run on.
func (s *Store) settleWaiting(t *tx, task *Task) error {
	if task.Waiting <= 0 || !task.Status.runnable() || task.Status == WaitingApproval || task.Leases > 0 {
		return nil
	}
	st := t.step(task, task.Cursor)
	if !st.Planned || st.Units-st.Done-st.Failed-st.Leased-st.Waiting > 0 {
		return nil
	}
	var effect *Unit
	err := t.scan(unitStepPrefix(task.ID, task.Cursor), func(_, val []byte) (bool, error) {
		u := new(Unit)
		if err := json.Unmarshal(val, u); err != nil {
			return false, err
		}
		if u.State == UnitWaiting && u.Effect != "" && u.Pass == st.Pass {
			effect = u
			return false, nil
		}
		return true, nil
	})
	if err != nil {
		return err
	}
	if effect != nil {
		return s.pauseInTx(t, task, PauseReason{Kind: PauseEffect, Name: st.Name, Note: effect.WaitReason})
	}
	task.Status = WaitingApproval
	task.Reason = fmt.Sprintf("%d units wait for approval: lhengine approvals %s", task.Waiting, task.ID)
	if task.Waiting == 1 {
		// Say what the one approval is, and the command that decides it.
		var last *Approval
		err := t.scan([]byte("r/"+task.ID+"/"), func(_, val []byte) (bool, error) {
			a := new(Approval)
			if err := json.Unmarshal(val, a); err != nil {
				return false, err
			}
			if a.State == ApprovalPending {
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
	tickWall(task, s.now())
	return s.event(t, task, Event{Type: EvWaitingApproval, Message: task.Reason})
}

// voidApprovals voids the pending approvals of pass pass of a step, whose
// units will not run again.
func (s *Store) voidApprovals(t *tx, task *Task, step, pass int, why string) error {
	type found struct {
		key []byte
		a   Approval
	}
	var void []found
	err := t.scan([]byte("r/"+task.ID+"/"), func(key, val []byte) (bool, error) {
		var a Approval
		if err := json.Unmarshal(val, &a); err != nil {
			return false, err
		}
		if a.StepIndex == step && a.Pass == pass && a.State == ApprovalPending {
			void = append(void, found{append([]byte(nil), key...), a})
		}
		return true, nil
	})
	if err != nil {
		return err
	}
	for _, f := range void {
		f.a.State, f.a.Void = ApprovalVoided, why
		if err := t.putJSON(f.key, &f.a); err != nil {
			return err
		}
		item := f.a.Item
		if err := s.event(t, task, Event{Type: EvApprovalVoided, Step: f.a.Step, Item: &item, Approval: f.a.ID,
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
func (s *Store) WaitEffect(ctx context.Context, l Lease, key, reason string) (*Task, error) {
	var out *Task
	err := s.update(ctx, func(t *tx) error {
		u, task, err := s.leased(t, l)
		if err != nil {
			return err
		}
		t.durable = true
		now := s.now()
		st := t.step(task, l.Step)
		u.State, u.Owner, u.LeaseUntil, u.NotBefore = UnitWaiting, "", time.Time{}, time.Time{}
		u.Effect, u.WaitReason = key, reason
		u.Attempt = max(u.Attempt-1, 0)
		task.Attempts = max(task.Attempts-1, 0)
		task.Leases--
		st.Leased--
		st.Waiting++
		task.Waiting++
		tickWall(task, now)
		if err := t.putJSON(unitKey(l.Task, l.Step, l.Item), u); err != nil {
			return err
		}
		ref := unitRef{l.Task, l.Step, l.Item}
		t.after(func(x *index) { delete(x.leases, ref) })
		item := l.Item
		if err := s.event(t, task, Event{Type: EvEffectUnknown, Step: st.Name, Item: &item, Attempt: l.Attempt, Message: reason}); err != nil {
			return err
		}
		if err := s.settleWaiting(t, task); err != nil {
			return err
		}
		task.UpdatedAt = now
		if err := t.saveTask(task); err != nil {
			return err
		}
		out = task
		return t.fill(out)
	})
	return out, err
}
