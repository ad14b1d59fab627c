// Package models is the model journal: it keeps the response of every
// model call a unit made, durably, before the plugin sees it:
//
//	g/<task>/<step>/<item>/<request sha256>/<key>   ModelCall
//
// A later attempt of the unit (a retry, a takeover, a repair pass, a resume
// after a crash) that makes the same call, under the same key with the same
// request, is answered from here and is not billed again; the same key with
// another request is another call, recorded beside it. The record holds no
// prompt text, only the request's hash and the response.
//
// Before a call is sent, the same key holds its intent (State ModelSending):
// the model, the size of the request and what the call can cost at most. The
// response replaces it. An attempt that finds an intent left by another (the
// process died, or lost its lease, while the call was in flight) cannot know
// whether the provider answered and billed it: the call is counted in the
// task's ModelUsage as possibly billed, and then sent again.
package models

import (
	"context"
	"errors"
	"fmt"

	"github.com/lhengine/lhengine/ledger"
	"github.com/lhengine/lhengine/store/internal/budget"
	"github.com/lhengine/lhengine/store/internal/kv"
	"github.com/lhengine/lhengine/store/internal/lease"
	"github.com/lhengine/lhengine/store/internal/outbox"
)

// Journal is a store's model journal: DB its views, Update its group
// commit, Events its event log (and clock), Budgets the cost budget a
// recorded call may reach.
type Journal struct {
	DB      *kv.DB
	Update  kv.Update
	Events  *outbox.Events
	Budgets *budget.Budgets
}

// Call reads the recorded response of a unit's call key made with the
// request whose normalised sha256 is sum. ErrNotFound when there is none
// (an intent is not a response).
func (s *Journal) Call(task string, step, item int, key, sum string) (*ledger.ModelCall, error) {
	c := new(ledger.ModelCall)
	err := s.DB.View(func(t *kv.Tx) error { return t.GetJSON(kv.ModelCallKey(task, step, item, sum, key), c) })
	if err != nil {
		return nil, err
	}
	if c.State == ledger.ModelSending {
		return nil, fmt.Errorf("model call %q: %w", key, ledger.ErrNotFound)
	}
	return c, nil
}

// Start records durably, under the unit's lease, the intent c
// (State ModelSending) of a call about to be sent. An intent found at its
// key, left by a send whose outcome no one saw, is first counted as
// possibly billed (the task's ModelUsage and an EvModelCall event), in the
// same transaction. When the call's response is recorded already (recorded
// meanwhile), nothing is written and that entry is returned: answer from
// it; otherwise the result is nil and the caller sends.
func (s *Journal) Start(ctx context.Context, l ledger.Lease, c *ledger.ModelCall) (recorded *ledger.ModelCall, err error) {
	err = s.Update(ctx, func(t *kv.Tx) error {
		_, task, err := lease.Leased(t, l)
		if err != nil {
			return err
		}
		k := kv.ModelCallKey(c.Task, c.Step, c.Item, c.RequestSHA256, c.Key)
		prev := new(ledger.ModelCall)
		switch err := t.GetJSON(k, prev); {
		case err == nil && prev.State != ledger.ModelSending:
			recorded = prev
			return nil
		case err == nil:
			if err := s.possiblyBilled(t, task, prev, l.Attempt); err != nil {
				return err
			}
		case !errors.Is(err, ledger.ErrNotFound):
			return err
		}
		if c.Time.IsZero() {
			c.Time = s.Events.Now()
		}
		c.State = ledger.ModelSending
		t.Durable = true
		if err := t.PutJSON(k, c); err != nil {
			return err
		}
		return t.SaveTask(task)
	})
	return recorded, err
}

// End closes call c's send: it counts unknown of its sends as
// possibly billed (their connection failed after the request may have
// reached the provider) and drops c's intent if no response was recorded
// (the call ended without one, its outcome seen: refused, say). An entry
// holding a response is left as it is.
func (s *Journal) End(ctx context.Context, l ledger.Lease, c *ledger.ModelCall, unknown int) error {
	return s.Update(ctx, func(t *kv.Tx) error {
		_, task, err := lease.Leased(t, l)
		if err != nil {
			return err
		}
		for range unknown {
			if err := s.possiblyBilled(t, task, c, l.Attempt); err != nil {
				return err
			}
		}
		k := kv.ModelCallKey(c.Task, c.Step, c.Item, c.RequestSHA256, c.Key)
		prev := new(ledger.ModelCall)
		switch err := t.GetJSON(k, prev); {
		case errors.Is(err, ledger.ErrNotFound):
		case err != nil:
			return err
		case prev.State == ledger.ModelSending:
			if err := t.Del(k); err != nil {
				return err
			}
		}
		return t.SaveTask(task)
	})
}

// possiblyBilled counts the send of intent c as possibly billed, noticed
// by attempt.
func (s *Journal) possiblyBilled(t *kv.Tx, task *ledger.Task, c *ledger.ModelCall, attempt int) error {
	p := &task.ModelUsage.PossiblyBilled
	p.Calls++
	p.RequestBytes += c.RequestBytes
	p.MaxCost += c.MaxCost
	item := c.Item
	return s.Events.Append(t, task, ledger.Event{Type: ledger.EvModelCall, Step: c.StepName, Item: &item, Attempt: attempt,
		Message: fmt.Sprintf("model %q (%s) call %q: sent by attempt %d, whose outcome is unknown: possibly billed (request %d bytes, cost at most %g); no response was recorded",
			c.Model, c.ModelID, c.Key, c.Attempt, c.RequestBytes, c.MaxCost),
		Model: &ledger.ModelCallEvent{Model: c.Model, ModelID: c.ModelID, Key: c.Key, Cost: c.MaxCost,
			PossiblyBilled: true, RequestBytes: c.RequestBytes}})
}

// Record writes a call's journal entry durably, under the unit's
// lease (a zombie records nothing), in place of its intent, adds its tokens
// and cost to the task's ModelUsage and records an EvModelCall event, all
// in one transaction. If the response is recorded already (the same call
// recorded meanwhile), nothing is written or charged and the recorded entry
// is returned with recorded false.
func (s *Journal) Record(ctx context.Context, l ledger.Lease, c *ledger.ModelCall) (out *ledger.ModelCall, recorded bool, err error) {
	err = s.Update(ctx, func(t *kv.Tx) error {
		_, task, err := lease.Leased(t, l)
		if err != nil {
			return err
		}
		k := kv.ModelCallKey(c.Task, c.Step, c.Item, c.RequestSHA256, c.Key)
		prev := new(ledger.ModelCall)
		switch err := t.GetJSON(k, prev); {
		case err == nil && prev.State != ledger.ModelSending:
			out, recorded = prev, false
			return nil
		case err != nil && !errors.Is(err, ledger.ErrNotFound):
			return err
		}
		c.State = ""
		if c.Time.IsZero() {
			c.Time = s.Events.Now()
		}
		t.Durable = true
		if err := t.PutJSON(k, c); err != nil {
			return err
		}
		task.ModelUsage.Calls++
		task.ModelUsage.InputTokens += c.InputTokens
		task.ModelUsage.OutputTokens += c.OutputTokens
		task.ModelUsage.Cost += c.Cost
		if err := s.modelEvent(t, task, c, l.Attempt, false); err != nil {
			return err
		}
		// A call that reaches the cost budget pauses the task at once;
		// the attempts in flight still commit.
		if err := s.Budgets.Check(t, task); err != nil {
			return err
		}
		out, recorded = c, true
		return t.SaveTask(task)
	})
	return out, recorded, err
}

// Replayed records an EvModelCall event for a call answered from
// the journal: nothing is charged.
func (s *Journal) Replayed(ctx context.Context, l ledger.Lease, c *ledger.ModelCall) error {
	return s.Update(ctx, func(t *kv.Tx) error {
		_, task, err := lease.Leased(t, l)
		if err != nil {
			return err
		}
		if err := s.modelEvent(t, task, c, l.Attempt, true); err != nil {
			return err
		}
		return t.SaveTask(task)
	})
}

func (s *Journal) modelEvent(t *kv.Tx, task *ledger.Task, c *ledger.ModelCall, attempt int, replayed bool) error {
	item := c.Item
	how := "billed"
	if replayed {
		how = "replayed, not billed"
	}
	return s.Events.Append(t, task, ledger.Event{Type: ledger.EvModelCall, Step: c.StepName, Item: &item, Attempt: attempt,
		Message: fmt.Sprintf("model %q (%s) call %q: %d input and %d output tokens, cost %g, %s",
			c.Model, c.ModelID, c.Key, c.InputTokens, c.OutputTokens, c.Cost, how),
		Model: &ledger.ModelCallEvent{Model: c.Model, ModelID: c.ModelID, Key: c.Key, InputTokens: c.InputTokens,
			OutputTokens: c.OutputTokens, Cost: c.Cost, Replayed: replayed}})
}
