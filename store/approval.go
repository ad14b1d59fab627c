package store

import (
	"context"

	"github.com/lhengine/lhengine/ledger"
)

// Approvals (internal/approval): a unit that needs a person's decision
// before it runs waits for it in the state UnitWaiting, out of the claim
// queue, while the rest of the task runs on; the approval is a record of
// its own, written with the unit's change in one transaction.

// RequestApproval makes the unit of lease l wait for a person's decision:
// it records a (the store sets its id, task, unit, state and created time),
// gives the unit back without charging the attempt, and takes it out of
// the claim queue until the approval is decided or, if it has an expiry,
// until then. The task shows WaitingApproval when nothing else of it can
// run. It returns the task and the approval as recorded.
func (s *Store) RequestApproval(ctx context.Context, l ledger.Lease, a ledger.Approval) (*ledger.Task, *ledger.Approval, error) {
	return s.approvals.Request(ctx, l, a)
}

// DecideApproval records a person's decision on approval id of task:
// approved, or rejected, by whom, with a note. Only a pending approval
// that has not expired takes a decision (else ErrApprovalClosed); a
// finished task's approvals take none (ErrTerminal). The unit waiting for
// it becomes ready: its next attempt runs on an approval, and fails (or
// goes to its step's repair) on a rejection.
func (s *Store) DecideApproval(ctx context.Context, task, id string, approve bool, by, note string) (*ledger.Approval, *ledger.Task, error) {
	return s.approvals.Decide(ctx, task, id, approve, by, note)
}

// CloseApproval ends approval id of the unit of lease l without a
// person's decision: expired (its expiry passed while pending) or voided
// (its subject changed: why says how). The unit stays leased for the
// caller to commit, ask again or give back. A voided approval's event
// names why.
func (s *Store) CloseApproval(ctx context.Context, l ledger.Lease, id string, state ledger.ApprovalState, why string) (*ledger.Approval, error) {
	return s.approvals.Close(ctx, l, id, state, why)
}

// UseApproval records that the attempt of lease l runs on approval id
// (Approval.UsedBy), once: the first attempt to run on it.
func (s *Store) UseApproval(ctx context.Context, l ledger.Lease, id string) error {
	return s.approvals.Use(ctx, l, id)
}

// WaitEffect makes the unit of lease l wait for a person to settle its
// effect key, whose outcome is unknown (mode manual): the attempt is given
// back uncharged, the unit leaves the claim queue until ResolveEffect
// settles the effect, and the task's other units run on. reason says so,
// with the commands that settle it. When nothing else of the task can
// run, the task pauses (PauseEffect) with that reason.
func (s *Store) WaitEffect(ctx context.Context, l ledger.Lease, key, reason string) (*ledger.Task, error) {
	return s.approvals.WaitEffect(ctx, l, key, reason)
}
