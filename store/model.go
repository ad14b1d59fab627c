package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// The model journal keeps the response of every model call a unit made,
// durably, before the plugin sees it:
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

// ModelCall is a model journal entry: one call's response and what it cost.
type ModelCall struct {
	Task          string `json:"task"`
	Step          int    `json:"step"`
	StepName      string `json:"step_name"`
	Item          int    `json:"item"`
	Key           string `json:"key"`
	RequestSHA256 string `json:"request_sha256"` // of the normalised request
	Model         string `json:"model"`          // the task's name for the model
	Provider      string `json:"provider"`
	ModelID       string `json:"model_id"`
	// Response is the normalised response the plugin was given (without
	// "replayed").
	Response     json.RawMessage `json:"response"`
	InputTokens  int64           `json:"input_tokens"`
	OutputTokens int64           `json:"output_tokens"`
	Cost         float64         `json:"cost"`
	Attempt      int             `json:"attempt"` // the attempt that made the call
	Time         time.Time       `json:"time"`

	// State is "" for a recorded response and ModelSending for an intent:
	// the call was being sent and no response is recorded.
	State string `json:"state,omitempty"`
	// RequestBytes is the size of the body sent to the provider.
	RequestBytes int64 `json:"request_bytes,omitempty"`
	// MaxCost is the most the call can cost: one input token per request
	// byte and the call's max_tokens out, at the model's prices.
	MaxCost float64 `json:"max_cost,omitempty"`
}

// ModelSending is the State of a model journal entry that records a call
// being sent: its intent, without a response.
const ModelSending = "sending"

// ModelUsage is what a task's model calls used, in total: each call
// counted once, however often its response was replayed.
type ModelUsage struct {
	Calls        int64   `json:"calls"`
	InputTokens  int64   `json:"input_tokens"`
	OutputTokens int64   `json:"output_tokens"`
	Cost         float64 `json:"cost"`
	// PossiblyBilled counts the sends whose outcome no one saw, apart
	// from the calls above: a call in flight when its process died and
	// sent again by a later attempt. The provider may or may not have
	// billed each.
	PossiblyBilled ModelPossiblyBilled `json:"possibly_billed,omitzero"`
}

// ModelPossiblyBilled totals the sends of model calls that may have been
// billed without their response being recorded.
type ModelPossiblyBilled struct {
	Calls        int64   `json:"calls"`
	RequestBytes int64   `json:"request_bytes"` // the bodies sent, in all
	MaxCost      float64 `json:"max_cost"`      // the sum of their ModelCall.MaxCost
}

// ModelCallEvent is the part of an EvModelCall event that describes the
// call: never the prompt or the response.
type ModelCallEvent struct {
	Model        string  `json:"model"`
	ModelID      string  `json:"model_id"`
	Key          string  `json:"key"`
	InputTokens  int64   `json:"input_tokens"`
	OutputTokens int64   `json:"output_tokens"`
	Cost         float64 `json:"cost"`
	Replayed     bool    `json:"replayed"`
	// PossiblyBilled: an earlier send of the call whose outcome is
	// unknown, counted as possibly billed; the tokens are 0 and Cost is the
	// most it can have cost.
	PossiblyBilled bool  `json:"possibly_billed,omitempty"`
	RequestBytes   int64 `json:"request_bytes,omitempty"` // of a possibly billed send
}

// ModelCall reads the recorded response of a unit's call key made with the
// request whose normalised sha256 is sum. ErrNotFound when there is none
// (an intent is not a response).
func (s *Store) ModelCall(task string, step, item int, key, sum string) (*ModelCall, error) {
	c := new(ModelCall)
	err := s.view(func(t *tx) error { return t.getJSON(modelCallKey(task, step, item, sum, key), c) })
	if err != nil {
		return nil, err
	}
	if c.State == ModelSending {
		return nil, fmt.Errorf("model call %q: %w", key, ErrNotFound)
	}
	return c, nil
}

// StartModelCall records durably, under the unit's lease, the intent c
// (State ModelSending) of a call about to be sent. An intent found at its
// key, left by a send whose outcome no one saw, is first counted as
// possibly billed (the task's ModelUsage and an EvModelCall event), in the
// same transaction. When the call's response is recorded already (recorded
// meanwhile), nothing is written and that entry is returned: answer from
// it; otherwise the result is nil and the caller sends.
func (s *Store) StartModelCall(ctx context.Context, l Lease, c *ModelCall) (recorded *ModelCall, err error) {
	err = s.update(ctx, func(t *tx) error {
		_, task, err := s.leased(t, l)
		if err != nil {
			return err
		}
		k := modelCallKey(c.Task, c.Step, c.Item, c.RequestSHA256, c.Key)
		prev := new(ModelCall)
		switch err := t.getJSON(k, prev); {
		case err == nil && prev.State != ModelSending:
			recorded = prev
			return nil
		case err == nil:
			if err := s.possiblyBilled(t, task, prev, l.Attempt); err != nil {
				return err
			}
		case !errors.Is(err, ErrNotFound):
			return err
		}
		if c.Time.IsZero() {
			c.Time = s.now()
		}
		c.State = ModelSending
		t.durable = true
		if err := t.putJSON(k, c); err != nil {
			return err
		}
		return t.saveTask(task)
	})
	return recorded, err
}

// EndModelCall closes call c's send: it counts unknown of its sends as
// possibly billed (their connection failed after the request may have
// reached the provider) and drops c's intent if no response was recorded
// (the call ended without one, its outcome seen: refused, say). An entry
// holding a response is left as it is.
func (s *Store) EndModelCall(ctx context.Context, l Lease, c *ModelCall, unknown int) error {
	return s.update(ctx, func(t *tx) error {
		_, task, err := s.leased(t, l)
		if err != nil {
			return err
		}
		for range unknown {
			if err := s.possiblyBilled(t, task, c, l.Attempt); err != nil {
				return err
			}
		}
		k := modelCallKey(c.Task, c.Step, c.Item, c.RequestSHA256, c.Key)
		prev := new(ModelCall)
		switch err := t.getJSON(k, prev); {
		case errors.Is(err, ErrNotFound):
		case err != nil:
			return err
		case prev.State == ModelSending:
			if err := t.del(k); err != nil {
				return err
			}
		}
		return t.saveTask(task)
	})
}

// possiblyBilled counts the send of intent c as possibly billed, noticed
// by attempt.
func (s *Store) possiblyBilled(t *tx, task *Task, c *ModelCall, attempt int) error {
	p := &task.ModelUsage.PossiblyBilled
	p.Calls++
	p.RequestBytes += c.RequestBytes
	p.MaxCost += c.MaxCost
	item := c.Item
	return s.event(t, task, Event{Type: EvModelCall, Step: c.StepName, Item: &item, Attempt: attempt,
		Message: fmt.Sprintf("model %q (%s) call %q: sent by attempt %d, whose outcome is unknown: possibly billed (request %d bytes, cost at most %g); no response was recorded",
			c.Model, c.ModelID, c.Key, c.Attempt, c.RequestBytes, c.MaxCost),
		Model: &ModelCallEvent{Model: c.Model, ModelID: c.ModelID, Key: c.Key, Cost: c.MaxCost,
			PossiblyBilled: true, RequestBytes: c.RequestBytes}})
}

// RecordModelCall writes a call's journal entry durably, under the unit's
// lease (a zombie records nothing), in place of its intent, adds its tokens
// and cost to the task's ModelUsage and records an EvModelCall event, all
// in one transaction. If the response is recorded already (the same call
// recorded meanwhile), nothing is written or charged and the recorded entry
// is returned with recorded false.
func (s *Store) RecordModelCall(ctx context.Context, l Lease, c *ModelCall) (out *ModelCall, recorded bool, err error) {
	err = s.update(ctx, func(t *tx) error {
		_, task, err := s.leased(t, l)
		if err != nil {
			return err
		}
		k := modelCallKey(c.Task, c.Step, c.Item, c.RequestSHA256, c.Key)
		prev := new(ModelCall)
		switch err := t.getJSON(k, prev); {
		case err == nil && prev.State != ModelSending:
			out, recorded = prev, false
			return nil
		case err != nil && !errors.Is(err, ErrNotFound):
			return err
		}
		c.State = ""
		if c.Time.IsZero() {
			c.Time = s.now()
		}
		t.durable = true
		if err := t.putJSON(k, c); err != nil {
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
		// the attempts in flight still commit (budget.go).
		if err := s.checkBudgets(t, task); err != nil {
			return err
		}
		out, recorded = c, true
		return t.saveTask(task)
	})
	return out, recorded, err
}

// ModelCallReplayed records an EvModelCall event for a call answered from
// the journal: nothing is charged.
func (s *Store) ModelCallReplayed(ctx context.Context, l Lease, c *ModelCall) error {
	return s.update(ctx, func(t *tx) error {
		_, task, err := s.leased(t, l)
		if err != nil {
			return err
		}
		if err := s.modelEvent(t, task, c, l.Attempt, true); err != nil {
			return err
		}
		return t.saveTask(task)
	})
}

func (s *Store) modelEvent(t *tx, task *Task, c *ModelCall, attempt int, replayed bool) error {
	item := c.Item
	how := "billed"
	if replayed {
		how = "replayed, not billed"
	}
	return s.event(t, task, Event{Type: EvModelCall, Step: c.StepName, Item: &item, Attempt: attempt,
		Message: fmt.Sprintf("model %q (%s) call %q: %d input and %d output tokens, cost %g, %s",
			c.Model, c.ModelID, c.Key, c.InputTokens, c.OutputTokens, c.Cost, how),
		Model: &ModelCallEvent{Model: c.Model, ModelID: c.ModelID, Key: c.Key, InputTokens: c.InputTokens,
			OutputTokens: c.OutputTokens, Cost: c.Cost, Replayed: replayed}})
}

// ModelCalls lists a task's model journal entries, by step, item and
// request hash: the recorded responses and the intents of calls being sent
// (State ModelSending).
func (r *Reader) ModelCalls(id string) ([]ModelCall, error) {
	var out []ModelCall
	err := r.t.scan([]byte("g/"+id+"/"), func(_, val []byte) (bool, error) {
		var c ModelCall
		if err := json.Unmarshal(val, &c); err != nil {
			return false, err
		}
		out = append(out, c)
		return true, nil
	})
	return out, err
}

func modelCallKey(task string, step, item int, sum, key string) []byte {
	return fmt.Appendf(nil, "g/%s/%04x/%08x/%s/%s", task, step, item, sum, key)
}
