package hostcall

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/lhengine/lhengine/engine/internal/guest"
	"github.com/lhengine/lhengine/engine/internal/taskfile"
	"github.com/lhengine/lhengine/internal/crashpoint"
	"github.com/lhengine/lhengine/ledger"
)

// model.generate: a call to a model the step is granted, journaled so that
// a call the engine already paid for is never paid for again (specs/abi.md
// section 4.1).

// Limits of model.generate.
const (
	modelKeyMax       = 256     // bytes of a call key
	modelResponseMax  = 8 << 20 // bytes of a provider's answer read
	modelTries        = 10      // sends of one call at most, when the step has no deadline
	modelBackoff      = 500 * time.Millisecond
	modelBackoffMax   = 20 * time.Second
	modelErrorTextMax = 512 // bytes of a provider's error message passed on
)

// ModelMessage is one message of a model.generate request.
type ModelMessage struct {
	Role       string          `json:"role"` // system, user, assistant or tool
	Content    string          `json:"content"`
	ToolCallID string          `json:"tool_call_id,omitempty"` // role tool: the call it answers
	ToolCalls  []ModelToolCall `json:"tool_calls,omitempty"`   // role assistant: the calls it made
}

// ModelToolCall is a tool call a model asked for.
type ModelToolCall struct {
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
}

// ModelTool is a tool a model may ask for.
type ModelTool struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters,omitempty"` // a JSON schema
}

// ModelRequest is a model.generate request.
type ModelRequest struct {
	Model       string         `json:"model"` // the task's name for the model
	Key         string         `json:"key"`   // names the call within the unit
	Messages    []ModelMessage `json:"messages"`
	Tools       []ModelTool    `json:"tools,omitempty"`
	MaxTokens   int            `json:"max_tokens,omitempty"`
	Temperature *float64       `json:"temperature,omitempty"`
	Stop        []string       `json:"stop,omitempty"`
}

// ModelUsage is the tokens of one call.
type ModelUsage struct {
	InputTokens  int64 `json:"input_tokens"`
	OutputTokens int64 `json:"output_tokens"`
}

// ModelResponse is a model.generate response.
type ModelResponse struct {
	Text       string          `json:"text"`
	ToolCalls  []ModelToolCall `json:"tool_calls"`
	StopReason string          `json:"stop_reason"`
	Usage      ModelUsage      `json:"usage"`
	Cost       float64         `json:"cost"`
	Replayed   bool            `json:"replayed"`
}

// Stop reasons of a ModelResponse.
const (
	StopEnd       = "end"           // the model finished
	StopToolCalls = "tool_calls"    // the model asks for tools
	StopMaxTokens = "max_tokens"    // cut at the token cap
	StopSequence  = "stop_sequence" // a stop sequence was produced (anthropic; openai reports end)
)

var modelRoles = []string{"system", "user", "assistant", "tool"}

// generate performs model.generate: from the journal when the unit made the
// same call before, otherwise from the provider, recording the response
// (and charging its cost) durably before returning it.
func (a *Attempt) generate(ctx context.Context, raw []byte) ([]byte, error) {
	var r ModelRequest
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		return nil, herr(guest.StatusInvalid, "model.generate wants {\"model\": string, \"key\": string, \"messages\": [{\"role\": string, \"content\": string}, ...], \"tools\"?, \"max_tokens\"?, \"temperature\"?, \"stop\"?}: %v", err)
	}
	if r.Model == "" {
		return nil, herr(guest.StatusInvalid, "model.generate: model is empty; name one of the step's models")
	}
	m := a.Step.Models[r.Model]
	if m == nil {
		if len(a.Step.Models) == 0 {
			return nil, herr(guest.StatusDenied, "step %q may call no model (grant it some with models = [...])", a.Step.Name)
		}
		return nil, herr(guest.StatusDenied, "step %q may not call model %q (models: %s)", a.Step.Name, r.Model, strings.Join(slices.Sorted(maps.Keys(a.Step.Models)), ", "))
	}
	if err := checkModelRequest(&r, m); err != nil {
		return nil, err
	}
	sum, err := requestHash(&r, m)
	if err != nil {
		return nil, err
	}

	l := a.Lease
	switch c, err := a.Store.ModelCall(l.Task, l.Step, l.Item, r.Key, sum); {
	case err == nil:
		return a.replayModel(ctx, c)
	case !errors.Is(err, ledger.ErrNotFound):
		return nil, err
	}

	call := &ledger.ModelCall{
		Task: l.Task, Step: l.Step, StepName: a.Step.Name, Item: l.Item, Key: r.Key, RequestSHA256: sum,
		Model: m.Name, Provider: m.Provider, ModelID: m.ID, Attempt: l.Attempt,
	}
	var resp *ModelResponse
	unknown := 0 // sends of a live call whose outcome is unknown
	if a.Replay != nil {
		resp, err = a.recorded(m, sum)
	} else {
		var prior *ledger.ModelCall
		resp, prior, unknown, err = a.live(ctx, &r, m, call)
		if prior != nil {
			return a.replayModel(ctx, prior)
		}
	}
	if err != nil {
		return nil, err
	}
	resp.Cost = m.Cost(resp.Usage.InputTokens, resp.Usage.OutputTokens)
	recorded, err := json.Marshal(resp)
	if err != nil {
		return nil, err
	}
	call.Response, call.InputTokens, call.OutputTokens, call.Cost = recorded, resp.Usage.InputTokens, resp.Usage.OutputTokens, resp.Cost
	c, fresh, err := a.Store.RecordModelCall(ctx, l, call)
	if errors.Is(err, ledger.ErrLeaseLost) {
		return nil, herr(guest.StatusLeaseLost, "%v", err)
	}
	if err != nil {
		return nil, err
	}
	crashpoint.Reached(crashpoint.ModelAfterRecord)
	if unknown > 0 {
		// Sends before the one answered whose connection failed midway.
		if err := a.Store.EndModelCall(ctx, l, call, unknown); err != nil {
			return nil, leaseErr(err)
		}
	}
	if !fresh {
		return a.replayModel(ctx, c)
	}
	a.Metrics.Model(call.InputTokens, call.OutputTokens, call.Cost)
	return recorded, nil
}

// live is the provider's response to r; with ModelRecord set it is
// recorded to that folder. The call's intent (call, State
// store.ModelSending) is recorded durably before the first send, so that a
// send whose process dies is counted as possibly billed by the attempt that
// finds it; when that finds the call's response recorded instead, prior is
// that entry and nothing is sent. unknown counts the sends whose connection
// failed after the request may have reached the provider. A call that ends
// without a response drops its intent and counts those sends.
func (a *Attempt) live(ctx context.Context, r *ModelRequest, m *taskfile.Model, call *ledger.ModelCall) (resp *ModelResponse, prior *ledger.ModelCall, unknown int, err error) {
	body, err := providerRequest(r, m)
	if err != nil {
		return nil, nil, 0, err
	}
	if a.After != nil {
		if err := a.After.Wait(ctx); err != nil {
			return nil, nil, 0, err
		}
	}
	call.RequestBytes = int64(len(body))
	// At most one input token per byte of the body, and max_tokens out.
	call.MaxCost = m.Cost(call.RequestBytes, int64(r.MaxTokens))
	intent := *call
	if prior, err := a.Store.StartModelCall(ctx, a.Lease, &intent); err != nil || prior != nil {
		return nil, prior, 0, leaseErr(err)
	}
	answer, unknown, err := a.sendModel(ctx, m, body)
	if err == nil {
		resp, err = parseProviderAnswer(m, answer)
		if err != nil {
			unknown++ // answered, so perhaps billed, but its usage cannot be read
		}
	}
	if err != nil {
		// The call ends here, its outcome seen. Should the record fail, the
		// intent stays and a later attempt counts the call as possibly
		// billed: counted once more, never less; the plugin gets the
		// call's own error.
		_ = a.Store.EndModelCall(context.WithoutCancel(ctx), a.Lease, &intent, unknown)
		return nil, nil, 0, err
	}
	if a.ModelRecord != "" {
		if err := a.saveRecording(m, call.RequestSHA256, resp); err != nil {
			return nil, nil, 0, err
		}
	}
	return resp, nil, unknown, nil
}

// leaseErr is err, as StatusLeaseLost when the attempt's lease is lost.
func leaseErr(err error) error {
	if errors.Is(err, ledger.ErrLeaseLost) {
		return herr(guest.StatusLeaseLost, "%v", err)
	}
	return err
}

// replayModel answers a call from its journal entry, with "replayed":
// true, and records the replay as an event.
func (a *Attempt) replayModel(ctx context.Context, c *ledger.ModelCall) ([]byte, error) {
	var resp ModelResponse
	if err := json.Unmarshal(c.Response, &resp); err != nil {
		return nil, fmt.Errorf("model journal entry %q: %w", c.Key, err)
	}
	resp.Replayed = true
	if err := a.Store.ModelCallReplayed(ctx, a.Lease, c); err != nil {
		if errors.Is(err, ledger.ErrLeaseLost) {
			return nil, herr(guest.StatusLeaseLost, "%v", err)
		}
		return nil, err
	}
	return json.Marshal(resp)
}

// checkModelRequest refuses a malformed request and caps its max_tokens at
// the model's.
func checkModelRequest(r *ModelRequest, m *taskfile.Model) error {
	switch {
	case r.Key == "":
		return herr(guest.StatusInvalid, "model.generate: key is empty; it names the call within the unit, so a later attempt making the same call gets the recorded response")
	case len(r.Key) > modelKeyMax:
		return herr(guest.StatusInvalid, "model.generate: key of %d bytes; at most %d", len(r.Key), modelKeyMax)
	case len(r.Messages) == 0:
		return herr(guest.StatusInvalid, "model.generate: messages is empty")
	case r.MaxTokens < 0:
		return herr(guest.StatusInvalid, "model.generate: max_tokens %d is negative", r.MaxTokens)
	case r.Temperature != nil && (*r.Temperature < 0 || *r.Temperature > 2 || math.IsNaN(*r.Temperature)):
		return herr(guest.StatusInvalid, "model.generate: temperature %g is not between 0 and 2", *r.Temperature)
	}
	if r.MaxTokens == 0 || r.MaxTokens > m.MaxTokens {
		r.MaxTokens = m.MaxTokens
	}
	for i, msg := range r.Messages {
		if !slices.Contains(modelRoles, msg.Role) {
			return herr(guest.StatusInvalid, "model.generate: message %d has role %q; want system, user, assistant or tool", i, msg.Role)
		}
		if msg.Role == "tool" && msg.ToolCallID == "" {
			return herr(guest.StatusInvalid, "model.generate: message %d (role tool) has no tool_call_id", i)
		}
		if msg.Role != "tool" && msg.ToolCallID != "" {
			return herr(guest.StatusInvalid, "model.generate: message %d has a tool_call_id but role %q; only tool messages answer calls", i, msg.Role)
		}
		if msg.Role != "assistant" && len(msg.ToolCalls) > 0 {
			return herr(guest.StatusInvalid, "model.generate: message %d has tool_calls but role %q; only assistant messages make calls", i, msg.Role)
		}
		for j, tc := range msg.ToolCalls {
			if tc.ID == "" || tc.Name == "" {
				return herr(guest.StatusInvalid, "model.generate: message %d tool call %d needs an id and a name", i, j)
			}
		}
	}
	for i, t := range r.Tools {
		if t.Name == "" {
			return herr(guest.StatusInvalid, "model.generate: tool %d has no name", i)
		}
		if len(t.Parameters) > 0 {
			var schema map[string]any
			if json.Unmarshal(t.Parameters, &schema) != nil || schema == nil {
				return herr(guest.StatusInvalid, "model.generate: tool %q: parameters must be a JSON schema object", t.Name)
			}
		}
	}
	return nil
}

// requestHash is the sha256 of the normalised request: the model's
// provider and id and everything of the request but its key, with every
// JSON value in one canonical form (object keys sorted, no spaces).
func requestHash(r *ModelRequest, m *taskfile.Model) (string, error) {
	n := *r
	n.Key = ""
	n.Messages = slices.Clone(r.Messages)
	for i := range n.Messages {
		n.Messages[i].ToolCalls = slices.Clone(n.Messages[i].ToolCalls)
		for j := range n.Messages[i].ToolCalls {
			n.Messages[i].ToolCalls[j].Arguments = canonical(n.Messages[i].ToolCalls[j].Arguments)
		}
	}
	n.Tools = slices.Clone(r.Tools)
	for i := range n.Tools {
		n.Tools[i].Parameters = canonical(n.Tools[i].Parameters)
	}
	b, err := json.Marshal(struct {
		Provider string        `json:"provider"`
		ModelID  string        `json:"model_id"`
		Request  *ModelRequest `json:"request"`
	}{m.Provider, m.ID, &n})
	if err != nil {
		return "", herr(guest.StatusInvalid, "model.generate: %v", err)
	}
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:]), nil
}

// canonical is a JSON value re-encoded with sorted keys and no spaces;
// empty stays empty.
func canonical(v json.RawMessage) json.RawMessage {
	if len(v) == 0 {
		return v
	}
	var x any
	if json.Unmarshal(v, &x) != nil {
		return v
	}
	b, err := json.Marshal(x)
	if err != nil {
		return v
	}
	return b
}

// sendModel posts body to the model's endpoint and returns the answer of
// the first 2xx. Rate limits (429), 408, 5xx and failed connections are
// sent again after a backoff (the provider's Retry-After when it gives
// one), within the step's deadline; when time or tries run out the call is
// StatusUnavailable. Any other answer is StatusInvalid with the provider's
// message. The API key is read from the environment now and never leaves
// the request's header: it is cut out of every message passed on. unknown
// counts the sends whose connection failed after it was made: the request
// may have reached the provider, and its answer was lost.
func (a *Attempt) sendModel(ctx context.Context, m *taskfile.Model, body []byte) (answer []byte, unknown int, err error) {
	getenv := a.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	key := ""
	if m.APIKeyEnv != "" {
		if key = getenv(m.APIKeyEnv); key == "" {
			return nil, unknown, herr(guest.StatusUnavailable, "model %q: the environment variable %s, which holds its API key, is not set in the worker's environment", m.Name, m.APIKeyEnv)
		}
	}
	redact := func(s string) string {
		if key != "" {
			s = strings.ReplaceAll(s, key, "[api key]")
		}
		return s
	}
	endpoint := strings.TrimRight(m.BaseURL, "/") + "/chat/completions"
	if m.Provider == taskfile.ProviderAnthropic {
		endpoint = strings.TrimRight(m.BaseURL, "/") + "/v1/messages"
	}
	backoff := a.ModelBackoff
	if backoff <= 0 {
		backoff = modelBackoff
	}
	deadline, hasDeadline := ctx.Deadline()
	var last string
	for try := 1; ; try++ {
		code, answer, retryAfter, err := a.postModel(ctx, m, endpoint, key, body)
		if err != nil && !notSent(err) {
			unknown++
		}
		switch {
		case err != nil && ctx.Err() != nil:
			return nil, unknown, herr(guest.StatusUnavailable, "model %q: %s", m.Name, redact(err.Error()))
		case err != nil:
			last = redact(err.Error())
		case code/100 == 2:
			return answer, unknown, nil
		case code == http.StatusTooManyRequests || code == http.StatusRequestTimeout || code >= 500:
			last = fmt.Sprintf("the provider answered %d: %s", code, redact(providerMessage(answer)))
		default:
			return nil, unknown, herr(guest.StatusInvalid, "model %q: the provider refused the request with %d: %s", m.Name, code, redact(providerMessage(answer)))
		}
		wait := min(backoff<<min(try-1, 16), modelBackoffMax)
		if retryAfter > 0 {
			wait = retryAfter
		}
		if !hasDeadline && try >= modelTries || hasDeadline && time.Until(deadline) <= wait {
			return nil, unknown, herr(guest.StatusUnavailable, "model %q: gave up after %d sends within the step's time; the last: %s", m.Name, try, last)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, unknown, herr(guest.StatusUnavailable, "model %q: the step's time ran out while waiting to send again; the last send: %s", m.Name, last)
		case <-t.C:
		}
	}
}

// notSent reports whether a failed send failed before a connection was
// made (the dial, name resolution included), so that nothing reached the
// provider.
func notSent(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// postModel sends one request under the model's per-request timeout and
// returns the status, the body (at most modelResponseMax bytes) and the
// Retry-After the provider asked for (0 for none).
func (a *Attempt) postModel(ctx context.Context, m *taskfile.Model, endpoint, key string, body []byte) (int, []byte, time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, m.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, bytes.NewReader(body))
	if err != nil {
		return 0, nil, 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	switch m.Provider {
	case taskfile.ProviderAnthropic:
		req.Header.Set("anthropic-version", "2023-06-01")
		if key != "" {
			req.Header.Set("x-api-key", key)
		}
	default:
		if key != "" {
			req.Header.Set("Authorization", "Bearer "+key)
		}
	}
	resp, err := a.effectClient().Do(req)
	if err != nil {
		return 0, nil, 0, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, modelResponseMax+1))
	if err != nil {
		return 0, nil, 0, err
	}
	if len(b) > modelResponseMax {
		return 0, nil, 0, fmt.Errorf("the answer is larger than %d bytes", modelResponseMax)
	}
	return resp.StatusCode, b, retryAfter(resp.Header.Get("Retry-After")), nil
}

// retryAfter reads a Retry-After header: seconds or an HTTP date.
func retryAfter(v string) time.Duration {
	if v == "" {
		return 0
	}
	if s, err := strconv.ParseFloat(v, 64); err == nil && s >= 0 && s < 1e6 {
		return time.Duration(s * float64(time.Second))
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(time.Until(t), 0)
	}
	return 0
}

// providerMessage is the message of a provider's error answer (both
// providers say {"error": {"message": ...}}), or the start of the body.
func providerMessage(b []byte) string {
	var e struct {
		Error struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	msg := strings.TrimSpace(string(b))
	if json.Unmarshal(b, &e) == nil && e.Error.Message != "" {
		msg = e.Error.Message
	}
	if len(msg) > modelErrorTextMax {
		msg = msg[:modelErrorTextMax] + "..."
	}
	return msg
}
