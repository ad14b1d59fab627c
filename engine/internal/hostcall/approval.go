package hostcall

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/lhengine/lhengine/engine/handoff"
	"github.com/lhengine/lhengine/engine/internal/guest"
	"github.com/lhengine/lhengine/ledger"
)

// ApprovalAsk is a person's decision a plugin asked for through
// approval.request: the attempt stops, and the unit waits for it.
type ApprovalAsk struct {
	Prompt    string
	Subject   json.RawMessage
	ExpiresIn time.Duration
}

// Ask is the decision the attempt's plugin asked for, nil when none: the
// worker makes the unit wait for it instead of committing the attempt.
func (a *Attempt) Ask() *ApprovalAsk {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.ask
}

type approvalRequest struct {
	Prompt    string          `json:"prompt"`
	Subject   json.RawMessage `json:"subject"`
	ExpiresIn string          `json:"expires_in"`
}

// approvalDecision is approval.request's answer once a person decided.
type approvalDecision struct {
	Approval string `json:"approval"`
	Decision string `json:"decision"` // approved, rejected or expired
	By       string `json:"by,omitempty"`
	Note     string `json:"note,omitempty"`
}

// maxPrompt bounds an approval prompt.
const maxPrompt = 4096

// approval answers approval.request (specs/abi.md): the decision on the
// unit's latest approval when it was asked by the plugin in the unit's
// current pass with the same prompt and subject; else the attempt must
// stop (StatusPaused) and the unit waits for a person, after which the
// step runs again and the same call returns the decision. A decided
// approval whose subject differs is voided and asked again.
func (a *Attempt) approval(ctx context.Context, raw []byte) ([]byte, error) {
	var r approvalRequest
	if err := json.Unmarshal(raw, &r); err != nil || r.Prompt == "" {
		return nil, herr(guest.StatusInvalid, "approval.request wants {\"prompt\": string, \"subject\": any JSON, \"expires_in\": duration string}")
	}
	if len(r.Prompt) > maxPrompt {
		return nil, herr(guest.StatusTooLarge, "approval.request: the prompt is %d bytes; at most %d", len(r.Prompt), maxPrompt)
	}
	var expires time.Duration
	if r.ExpiresIn != "" {
		d, err := time.ParseDuration(r.ExpiresIn)
		if err != nil || d <= 0 {
			return nil, herr(guest.StatusInvalid, "approval.request: expires_in %q: want a positive duration such as 24h", r.ExpiresIn)
		}
		expires = d
	}
	if len(r.Subject) == 0 {
		r.Subject = json.RawMessage("null")
	}
	subject, err := compactJSON(r.Subject)
	if err != nil {
		return nil, herr(guest.StatusInvalid, "approval.request: subject: %v", err)
	}
	sum := ledger.SubjectSum(subject)
	l := a.Lease
	var prev *ledger.Approval
	if id := l.Unit.Approval; id != "" {
		err := a.Store.Read(func(rd ledger.Reader) error {
			var err error
			prev, err = rd.Approval(l.Task, id)
			return err
		})
		if err != nil && !errors.Is(err, ledger.ErrNotFound) {
			return nil, herr(guest.StatusInternal, "reading the unit's approval: %v", err)
		}
		if prev != nil && (prev.Source != ledger.ApprovalFromPlugin || prev.Pass != l.Unit.Pass || prev.Prompt != r.Prompt) {
			prev = nil
		}
	}
	if prev != nil {
		switch {
		case prev.Decided() && prev.SubjectSHA256 == sum:
			if prev.State == ledger.ApprovalApproved {
				if err := a.Store.UseApproval(ctx, l, prev.ID); err != nil {
					return nil, leaseErr(err)
				}
			}
			return json.Marshal(approvalDecision{Approval: prev.ID, Decision: string(prev.State), By: prev.DecidedBy, Note: prev.Note})
		case prev.State == ledger.ApprovalPending && !prev.Expires.IsZero() && !l.Unit.Claimed.Before(prev.Expires):
			if _, err := a.Store.CloseApproval(ctx, l, prev.ID, ledger.ApprovalExpired, ""); err != nil {
				return nil, leaseErr(err)
			}
			return json.Marshal(approvalDecision{Approval: prev.ID, Decision: string(ledger.ApprovalExpired)})
		case prev.State == ledger.ApprovalExpired:
			return json.Marshal(approvalDecision{Approval: prev.ID, Decision: string(ledger.ApprovalExpired)})
		case prev.Decided():
			why := fmt.Sprintf("the subject changed since it was decided: sha256 %.12s… is now %.12s…", prev.SubjectSHA256, sum)
			if _, err := a.Store.CloseApproval(ctx, l, prev.ID, ledger.ApprovalVoided, why); err != nil {
				return nil, leaseErr(err)
			}
		}
	}
	a.mu.Lock()
	a.ask = &ApprovalAsk{Prompt: r.Prompt, Subject: subject, ExpiresIn: expires}
	a.mu.Unlock()
	return nil, herr(guest.StatusPaused, "waiting for approval: %s", r.Prompt)
}

// compactJSON returns raw without insignificant space, so that a subject's
// hash does not depend on how it was spaced.
func compactJSON(raw []byte) ([]byte, error) {
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, err
	}
	if d.More() {
		return nil, errors.New("more than one JSON value")
	}
	return json.Marshal(v)
}

// handoff answers handoff.get: the task's handoff (package handoff), as
// the store holds it now. The request is ignored.
func (a *Attempt) handoff() ([]byte, error) {
	var b *handoff.Bundle
	err := a.Store.Read(func(r ledger.Reader) error {
		var err error
		b, err = handoff.Build(r, a.Lease.Task, time.Now())
		return err
	})
	if err != nil {
		return nil, herr(guest.StatusInternal, "reading the task's handoff: %v", err)
	}
	return json.Marshal(b)
}
