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
}

// ModelUsage is what a task's model calls used, in total: each call
// counted once, however often its response was replayed.
type ModelUsage struct {
	Calls        int64   `json:"calls"`
	InputTokens  int64   `json:"input_tokens"`
	OutputTokens int64   `json:"output_tokens"`
	Cost         float64 `json:"cost"`
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
}

// ModelCall reads the journal entry of a unit's call key made with the
// request whose normalised sha256 is sum. ErrNotFound when there is none.
func (s *Store) ModelCall(task string, step, item int, key, sum string) (*ModelCall, error) {
	c := new(ModelCall)
	err := s.view(func(t *tx) error { return t.getJSON(modelCallKey(task, step, item, sum, key), c) })
	if err != nil {
		return nil, err
	}
	return c, nil
}

// RecordModelCall writes a call's journal entry durably, under the unit's
// lease (a zombie records nothing), adds its tokens and cost to the task's
// ModelUsage and records an EvModelCall event, all in one transaction. If
// the entry exists already (the same call recorded meanwhile), nothing is
// written or charged and the recorded entry is returned with recorded
// false.
func (s *Store) RecordModelCall(ctx context.Context, l Lease, c *ModelCall) (out *ModelCall, recorded bool, err error) {
	err = s.update(ctx, func(t *tx) error {
		_, task, err := s.leased(t, l)
		if err != nil {
			return err
		}
		k := modelCallKey(c.Task, c.Step, c.Item, c.RequestSHA256, c.Key)
		prev := new(ModelCall)
		switch err := t.getJSON(k, prev); {
		case err == nil:
			out, recorded = prev, false
			return nil
		case !errors.Is(err, ErrNotFound):
			return err
		}
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
// request hash.
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
