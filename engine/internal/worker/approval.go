package worker

import (
	"context"
	"errors"
	"fmt"

	"github.com/hashicorp/go-hclog"

	"github.com/lhengine/lhengine/engine/internal/hostcall"
	"github.com/lhengine/lhengine/engine/internal/taskfile"
	"github.com/lhengine/lhengine/fault"
	"github.com/lhengine/lhengine/ledger"
)

// waitingError: the unit does not run now: it waits for a person's
// decision (store.RequestApproval), or its approval expired and paused the
// task. Its lease was given back uncharged. Task is the task as that left
// it.
type waitingError struct{ task *ledger.Task }

func (e *waitingError) Error() string { return "waiting for a person: " + string(e.task.Status) }

// rejectedError: the unit's approval was rejected, or expired with
// on_expiry = "reject". The attempt fails with the reason (kind
// rejected), or goes to the step's repair when it has one.
type rejectedError struct{ reason string }

func (e *rejectedError) Error() string { return e.reason }

// gate decides, before the unit of lease l runs, on what its step's
// approval block asks of it (ask; nil: nothing). It returns nil when the
// unit may run: nothing asked, or an approval of the unit's pass decided
// yes on the same subject (the first attempt to run on it is recorded).
// Otherwise: a *waitingError when the unit now waits (asked for the first
// time, again after the subject changed, or again after an expiry paused
// the task and a person resumed it), a *rejectedError when it was rejected
// or expired with on_expiry = "reject".
func (w *Worker) gate(ctx context.Context, l ledger.Lease, step *taskfile.Step, ask *taskfile.ApprovalAsk, log hclog.Logger) error {
	if ask == nil {
		return nil
	}
	st := w.cfg.Store
	var a *ledger.Approval
	if id := l.Unit.Approval; id != "" {
		err := st.Read(func(r ledger.Reader) error {
			var err error
			a, err = r.Approval(l.Task, id)
			return err
		})
		if err != nil && !errors.Is(err, ledger.ErrNotFound) {
			return fault.Wrap(fault.Internal, err, "reading the unit's approval: "+err.Error())
		}
		if a != nil && (a.Source != ledger.ApprovalFromStep || a.Pass != l.Unit.Pass) {
			a = nil // asked by the plugin, or for an earlier pass
		}
	}
	sum := ledger.SubjectSum(ask.Subject)
	now := w.clock.Now()
	void := ""
	if a != nil {
		switch a.State {
		case ledger.ApprovalPending:
			if a.Expires.IsZero() || now.Before(a.Expires) {
				void = "asked again: the unit was claimed while its approval was pending"
				break
			}
			if _, err := st.CloseApproval(ctx, l, a.ID, ledger.ApprovalExpired, ""); err != nil {
				return leaseErr(err, "recording the approval's expiry")
			}
			log.Warn("approval expired", "approval", a.ID, "on_expiry", a.OnExpiry)
			if a.OnExpiry == taskfile.OnExpiryPause {
				why := ledger.PauseReason{Kind: ledger.PauseApprovalExpired, Name: a.ID,
					Note: fmt.Sprintf("no decision on %q before %s; lhengine resume %s asks again", a.Prompt, a.Expires.UTC().Format("2006-01-02 15:04:05Z"), l.Task)}
				task, err := st.PauseUnit(ctx, l, why)
				if err != nil {
					return leaseErr(err, "pausing the task")
				}
				return &waitingError{task: task}
			}
			return &rejectedError{reason: fmt.Sprintf("approval %s expired at %s with no decision (on_expiry = reject): %s",
				a.ID, a.Expires.UTC().Format("2006-01-02 15:04:05Z"), a.Prompt)}
		case ledger.ApprovalApproved:
			if a.SubjectSHA256 != sum {
				void = fmt.Sprintf("the subject changed since it was asked for: sha256 %.12s… is now %.12s…", a.SubjectSHA256, sum)
				break
			}
			if err := st.UseApproval(ctx, l, a.ID); err != nil {
				return leaseErr(err, "recording the approval's use")
			}
			log.Info("running on approval", "approval", a.ID, "by", a.DecidedBy)
			return nil
		case ledger.ApprovalRejected:
			if a.SubjectSHA256 != sum {
				void = fmt.Sprintf("the subject changed since it was rejected: sha256 %.12s… is now %.12s…", a.SubjectSHA256, sum)
				break
			}
			reason := fmt.Sprintf("approval %s rejected by %s", a.ID, a.DecidedBy)
			if a.Note != "" {
				reason += ": " + a.Note
			}
			return &rejectedError{reason: reason}
		}
		// Expired (a resume after an expiry paused the task) or voided:
		// ask again.
	}
	if void != "" {
		if _, err := st.CloseApproval(ctx, l, a.ID, ledger.ApprovalVoided, void); err != nil {
			return leaseErr(err, "voiding the approval")
		}
		log.Warn("approval voided", "approval", a.ID, "why", void)
	}
	req := ledger.Approval{Source: ledger.ApprovalFromStep, Prompt: ask.Prompt, Subject: ask.Subject, OnExpiry: step.Approval.OnExpiry}
	if step.Approval.ExpiresIn > 0 {
		req.Expires = now.Add(step.Approval.ExpiresIn)
	}
	task, rec, err := st.RequestApproval(ctx, l, req)
	if err != nil {
		return leaseErr(err, "recording the approval request")
	}
	log.Info("waiting for approval", "approval", rec.ID, "prompt", rec.Prompt)
	return &waitingError{task: task}
}

// ask has the unit of lease l wait for the decision a plugin asked for
// through approval.request (hostcall.Attempt.ApprovalAsk).
func (w *Worker) ask(ctx context.Context, l ledger.Lease, a *hostcall.ApprovalAsk) (*ledger.Task, error) {
	req := ledger.Approval{Source: ledger.ApprovalFromPlugin, Prompt: a.Prompt, Subject: a.Subject, OnExpiry: taskfile.OnExpiryReject}
	if a.ExpiresIn > 0 {
		req.Expires = w.clock.Now().Add(a.ExpiresIn)
	}
	task, _, err := w.cfg.Store.RequestApproval(ctx, l, req)
	return task, err
}

// leaseErr classifies a store error met while deciding on an approval: a
// lost lease ends the attempt uncommitted, anything else fails it.
func leaseErr(err error, doing string) error {
	if errors.Is(err, ledger.ErrLeaseLost) {
		return fmt.Errorf("%w: %v", errLeaseRanOut, err)
	}
	return fault.Wrap(fault.Internal, err, doing+": "+err.Error())
}
