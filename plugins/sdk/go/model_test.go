package sdk_test

import (
	"encoding/json"
	"errors"
	"testing"

	sdk "github.com/lhengine/lhengine/plugins/sdk/go"
)

// TestGenerateOffWasm: natively the capability is unavailable; a request
// without model or key is refused before any host call.
func TestGenerateOffWasm(t *testing.T) {
	ctx := &sdk.Context{}
	_, err := ctx.Generate(sdk.GenerateRequest{Model: "m", Key: "k", Messages: []sdk.Message{{Role: sdk.RoleUser, Content: "hi"}}})
	if !errors.Is(err, sdk.ErrUnavailable) {
		t.Fatalf("got %v, want ErrUnavailable", err)
	}
	if _, err := ctx.Generate(sdk.GenerateRequest{Model: "m"}); !errors.Is(err, sdk.ErrInvalid) {
		t.Fatalf("no key: got %v, want ErrInvalid", err)
	}
}

// TestGenerateWireShape: the request and response encode as specs/abi.md
// says.
func TestGenerateWireShape(t *testing.T) {
	temp := 0.2
	b, err := json.Marshal(sdk.GenerateRequest{Model: "m", Key: "turn-1", Temperature: &temp, Stop: []string{"END"},
		Messages: []sdk.Message{
			{Role: sdk.RoleUser, Content: "hi"},
			{Role: sdk.RoleAssistant, ToolCalls: []sdk.ToolCall{{ID: "c1", Name: "look", Arguments: json.RawMessage(`{"q":1}`)}}},
			{Role: sdk.RoleTool, ToolCallID: "c1", Content: "found"},
		},
		Tools: []sdk.Tool{{Name: "look", Parameters: json.RawMessage(`{"type":"object"}`)}}})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"model":"m","key":"turn-1","messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"","tool_calls":[{"id":"c1","name":"look","arguments":{"q":1}}]},{"role":"tool","content":"found","tool_call_id":"c1"}],"tools":[{"name":"look","parameters":{"type":"object"}}],"temperature":0.2,"stop":["END"]}`
	if string(b) != want {
		t.Fatalf("got  %s\nwant %s", b, want)
	}
	var r sdk.GenerateResponse
	if err := json.Unmarshal([]byte(`{"text":"","tool_calls":[{"id":"c2","name":"look","arguments":{"q":"x"}}],"stop_reason":"tool_calls","usage":{"input_tokens":3,"output_tokens":5},"cost":0.5,"replayed":true}`), &r); err != nil {
		t.Fatal(err)
	}
	var args struct{ Q string }
	if err := r.ToolCalls[0].DecodeArguments(&args); err != nil || args.Q != "x" {
		t.Fatalf("arguments: %+v, %v", args, err)
	}
	if r.StopReason != sdk.StopToolCalls || r.Usage.OutputTokens != 5 || !r.Replayed || r.Cost != 0.5 {
		t.Fatalf("decoded %+v", r)
	}
}
