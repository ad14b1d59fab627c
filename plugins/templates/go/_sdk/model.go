package sdk

import (
	"encoding/json"
	"errors"
)

// Message roles of a GenerateRequest.
const (
	RoleSystem    = "system"
	RoleUser      = "user"
	RoleAssistant = "assistant"
	RoleTool      = "tool" // the result of a tool call, with ToolCallID
)

// Stop reasons of a GenerateResponse.
const (
	StopEnd          = "end"           // the model finished its answer
	StopToolCalls    = "tool_calls"    // the model asks for the tools in ToolCalls
	StopMaxTokens    = "max_tokens"    // the answer was cut at the token cap
	StopStopSequence = "stop_sequence" // a stop sequence ended it (anthropic models)
)

// Message is one message of a conversation with a model.
type Message struct {
	Role       string     `json:"role"`
	Content    string     `json:"content"`
	ToolCallID string     `json:"tool_call_id,omitempty"` // RoleTool: the call this answers
	ToolCalls  []ToolCall `json:"tool_calls,omitempty"`   // RoleAssistant: the calls it asked for
}

// ToolCall is a tool call a model asked for.
type ToolCall struct {
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"` // a JSON value, usually an object
}

// Tool is a tool a model may ask for.
type Tool struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters,omitempty"` // a JSON schema of the arguments
}

// GenerateRequest is a call to one of the step's models ("model.generate").
type GenerateRequest struct {
	// Model is the task's name for the model (a model "NAME" block the
	// step's models attribute grants).
	Model string `json:"model"`
	// Key names the call within the work unit. A later attempt of the unit
	// that makes the same call under the same key is given the recorded
	// response (Replayed) instead of paying for another; use a new key for
	// each turn of a conversation, such as "turn-3".
	Key         string    `json:"key"`
	Messages    []Message `json:"messages"`
	Tools       []Tool    `json:"tools,omitempty"`
	MaxTokens   int       `json:"max_tokens,omitempty"` // 0: the model's cap
	Temperature *float64  `json:"temperature,omitempty"`
	Stop        []string  `json:"stop,omitempty"`
}

// Usage is the tokens a call used.
type Usage struct {
	InputTokens  int64 `json:"input_tokens"`
	OutputTokens int64 `json:"output_tokens"`
}

// GenerateResponse is a model's answer.
type GenerateResponse struct {
	Text       string     `json:"text"`
	ToolCalls  []ToolCall `json:"tool_calls"`
	StopReason string     `json:"stop_reason"`
	Usage      Usage      `json:"usage"`
	Cost       float64    `json:"cost"` // in the task's cost units
	// Replayed: the response was recorded by an earlier attempt and
	// returned from the journal; nothing was sent or billed now.
	Replayed bool `json:"replayed"`
}

// Generate calls a model through the host ("model.generate"). A model the
// step is not granted is ErrDenied; a provider that keeps failing (rate
// limits, server errors) ErrUnavailable; a request the provider refuses
// ErrInvalid; each a *HostError with the host's message.
func (c *Context) Generate(req GenerateRequest) (*GenerateResponse, error) {
	if req.Model == "" || req.Key == "" {
		return nil, &HostError{Status: ErrInvalid, Message: "sdk: Generate needs a Model and a Key"}
	}
	var resp GenerateResponse
	if err := c.Call("model.generate", req, &resp); err != nil {
		return nil, err
	}
	return &resp, nil
}

// DecodeArguments decodes a tool call's arguments into v.
func (tc ToolCall) DecodeArguments(v any) error {
	if len(tc.Arguments) == 0 {
		return errors.New("sdk: the tool call has no arguments")
	}
	return json.Unmarshal(tc.Arguments, v)
}
