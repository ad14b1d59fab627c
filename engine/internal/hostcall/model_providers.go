package hostcall

import (
	"encoding/json"
	"strings"

	"github.com/lhengine/lhengine/engine/internal/guest"
	"github.com/lhengine/lhengine/engine/internal/taskfile"
)

// The two wire protocols of model.generate: OpenAI's chat completions
// (spoken by OpenAI, vLLM, llama.cpp's server and Ollama) and Anthropic's
// Messages. Each turns a ModelRequest into the provider's request body and
// the provider's answer into a ModelResponse.

// providerRequest is the body to post for r.
func providerRequest(r *ModelRequest, m *taskfile.Model) ([]byte, error) {
	var body any
	if m.Provider == taskfile.ProviderAnthropic {
		body = anthropicRequest(r, m)
	} else {
		body = openaiRequest(r, m)
	}
	b, err := json.Marshal(body)
	if err != nil {
		return nil, herr(guest.StatusInvalid, "model.generate: %v", err)
	}
	return b, nil
}

// parseProviderAnswer reads a provider's 2xx answer.
func parseProviderAnswer(m *taskfile.Model, b []byte) (*ModelResponse, error) {
	var resp *ModelResponse
	var err error
	if m.Provider == taskfile.ProviderAnthropic {
		resp, err = anthropicAnswer(b)
	} else {
		resp, err = openaiAnswer(b)
	}
	if err != nil {
		return nil, herr(guest.StatusUnavailable, "model %q: the provider's answer cannot be read: %v", m.Name, err)
	}
	if resp.ToolCalls == nil {
		resp.ToolCalls = []ModelToolCall{}
	}
	return resp, nil
}

// arguments is a tool call's arguments as a JSON value: an object, or
// the text as a JSON string when it is not JSON.
func arguments(text string) json.RawMessage {
	if text == "" {
		return json.RawMessage("{}")
	}
	if json.Valid([]byte(text)) {
		return json.RawMessage(text)
	}
	b, _ := json.Marshal(text)
	return b
}

// argumentsText is a tool call's arguments as the text OpenAI expects.
func argumentsText(v json.RawMessage) string {
	if len(v) == 0 {
		return "{}"
	}
	var s string
	if json.Unmarshal(v, &s) == nil {
		return s
	}
	return string(canonical(v))
}

type openaiFunction struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters,omitempty"`
	Arguments   *string         `json:"arguments,omitempty"`
}

type openaiToolCall struct {
	ID       string         `json:"id"`
	Type     string         `json:"type"`
	Function openaiFunction `json:"function"`
}

type openaiMessage struct {
	Role       string           `json:"role"`
	Content    *string          `json:"content"`
	ToolCallID string           `json:"tool_call_id,omitempty"`
	ToolCalls  []openaiToolCall `json:"tool_calls,omitempty"`
}

func openaiRequest(r *ModelRequest, m *taskfile.Model) any {
	msgs := make([]openaiMessage, 0, len(r.Messages))
	for _, msg := range r.Messages {
		content := msg.Content
		om := openaiMessage{Role: msg.Role, Content: &content, ToolCallID: msg.ToolCallID}
		if msg.Role == "assistant" && content == "" && len(msg.ToolCalls) > 0 {
			om.Content = nil
		}
		for _, tc := range msg.ToolCalls {
			args := argumentsText(tc.Arguments)
			om.ToolCalls = append(om.ToolCalls, openaiToolCall{ID: tc.ID, Type: "function", Function: openaiFunction{Name: tc.Name, Arguments: &args}})
		}
		msgs = append(msgs, om)
	}
	type tool struct {
		Type     string         `json:"type"`
		Function openaiFunction `json:"function"`
	}
	var tools []tool
	for _, t := range r.Tools {
		tools = append(tools, tool{Type: "function", Function: openaiFunction{Name: t.Name, Description: t.Description, Parameters: t.Parameters}})
	}
	return struct {
		Model       string          `json:"model"`
		Messages    []openaiMessage `json:"messages"`
		Tools       []tool          `json:"tools,omitempty"`
		MaxTokens   int             `json:"max_tokens"`
		Temperature *float64        `json:"temperature,omitempty"`
		Stop        []string        `json:"stop,omitempty"`
	}{m.ID, msgs, tools, r.MaxTokens, r.Temperature, r.Stop}
}

func openaiAnswer(b []byte) (*ModelResponse, error) {
	var a struct {
		Choices []struct {
			Message struct {
				Content   *string          `json:"content"`
				ToolCalls []openaiToolCall `json:"tool_calls"`
			} `json:"message"`
			FinishReason string `json:"finish_reason"`
		} `json:"choices"`
		Usage struct {
			PromptTokens     int64 `json:"prompt_tokens"`
			CompletionTokens int64 `json:"completion_tokens"`
		} `json:"usage"`
	}
	if err := json.Unmarshal(b, &a); err != nil {
		return nil, err
	}
	if len(a.Choices) == 0 {
		return nil, errNoChoice
	}
	c := a.Choices[0]
	resp := &ModelResponse{Usage: ModelUsage{InputTokens: a.Usage.PromptTokens, OutputTokens: a.Usage.CompletionTokens}}
	if c.Message.Content != nil {
		resp.Text = *c.Message.Content
	}
	for _, tc := range c.Message.ToolCalls {
		args := ""
		if tc.Function.Arguments != nil {
			args = *tc.Function.Arguments
		}
		resp.ToolCalls = append(resp.ToolCalls, ModelToolCall{ID: tc.ID, Name: tc.Function.Name, Arguments: arguments(args)})
	}
	switch c.FinishReason {
	case "stop":
		resp.StopReason = StopEnd
	case "length":
		resp.StopReason = StopMaxTokens
	case "tool_calls", "function_call":
		resp.StopReason = StopToolCalls
	default:
		resp.StopReason = c.FinishReason
	}
	return resp, nil
}

type errString string

func (e errString) Error() string { return string(e) }

const errNoChoice = errString("the answer has no choices")

type anthropicBlock struct {
	Type      string          `json:"type"`
	Text      string          `json:"text,omitempty"`
	ID        string          `json:"id,omitempty"`
	Name      string          `json:"name,omitempty"`
	Input     json.RawMessage `json:"input,omitempty"`
	ToolUseID string          `json:"tool_use_id,omitempty"`
	Content   string          `json:"content,omitempty"`
}

type anthropicMessage struct {
	Role    string           `json:"role"`
	Content []anthropicBlock `json:"content"`
}

// anthropicRequest: system messages become the system prompt; a tool
// message becomes a user message's tool_result block; consecutive messages
// of one role are merged, since the Messages API wants the roles to
// alternate.
func anthropicRequest(r *ModelRequest, m *taskfile.Model) any {
	var system []string
	var msgs []anthropicMessage
	for _, msg := range r.Messages {
		role := msg.Role
		var blocks []anthropicBlock
		switch msg.Role {
		case "system":
			system = append(system, msg.Content)
			continue
		case "tool":
			role = "user"
			blocks = append(blocks, anthropicBlock{Type: "tool_result", ToolUseID: msg.ToolCallID, Content: msg.Content})
		default:
			if msg.Content != "" || len(msg.ToolCalls) == 0 {
				blocks = append(blocks, anthropicBlock{Type: "text", Text: msg.Content})
			}
			for _, tc := range msg.ToolCalls {
				input := canonical(tc.Arguments)
				var obj map[string]any
				if json.Unmarshal(input, &obj) != nil || obj == nil {
					input = json.RawMessage("{}")
				}
				blocks = append(blocks, anthropicBlock{Type: "tool_use", ID: tc.ID, Name: tc.Name, Input: input})
			}
		}
		if n := len(msgs); n > 0 && msgs[n-1].Role == role {
			msgs[n-1].Content = append(msgs[n-1].Content, blocks...)
			continue
		}
		msgs = append(msgs, anthropicMessage{Role: role, Content: blocks})
	}
	type tool struct {
		Name        string          `json:"name"`
		Description string          `json:"description,omitempty"`
		InputSchema json.RawMessage `json:"input_schema"`
	}
	var tools []tool
	for _, t := range r.Tools {
		schema := t.Parameters
		if len(schema) == 0 {
			schema = json.RawMessage(`{"type":"object","properties":{}}`)
		}
		tools = append(tools, tool{Name: t.Name, Description: t.Description, InputSchema: schema})
	}
	return struct {
		Model         string             `json:"model"`
		MaxTokens     int                `json:"max_tokens"`
		System        string             `json:"system,omitempty"`
		Messages      []anthropicMessage `json:"messages"`
		Tools         []tool             `json:"tools,omitempty"`
		Temperature   *float64           `json:"temperature,omitempty"`
		StopSequences []string           `json:"stop_sequences,omitempty"`
	}{m.ID, r.MaxTokens, strings.Join(system, "\n\n"), msgs, tools, r.Temperature, r.Stop}
}

func anthropicAnswer(b []byte) (*ModelResponse, error) {
	var a struct {
		Content    []anthropicBlock `json:"content"`
		StopReason string           `json:"stop_reason"`
		Usage      struct {
			InputTokens  int64 `json:"input_tokens"`
			OutputTokens int64 `json:"output_tokens"`
		} `json:"usage"`
	}
	if err := json.Unmarshal(b, &a); err != nil {
		return nil, err
	}
	resp := &ModelResponse{Usage: ModelUsage{InputTokens: a.Usage.InputTokens, OutputTokens: a.Usage.OutputTokens}}
	var text []string
	for _, blk := range a.Content {
		switch blk.Type {
		case "text":
			text = append(text, blk.Text)
		case "tool_use":
			input := blk.Input
			if len(input) == 0 {
				input = json.RawMessage("{}")
			}
			resp.ToolCalls = append(resp.ToolCalls, ModelToolCall{ID: blk.ID, Name: blk.Name, Arguments: input})
		}
	}
	resp.Text = strings.Join(text, "")
	switch a.StopReason {
	case "end_turn":
		resp.StopReason = StopEnd
	case "tool_use":
		resp.StopReason = StopToolCalls
	case "max_tokens":
		resp.StopReason = StopMaxTokens
	case "stop_sequence":
		resp.StopReason = StopSequence
	default:
		resp.StopReason = a.StopReason
	}
	return resp, nil
}
