package testmodel

import (
	"bytes"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
)

func post(t *testing.T, url, body string) map[string]any {
	t.Helper()
	resp, err := http.Post(url, "application/json", bytes.NewReader([]byte(body)))
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var out map[string]any
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&out))
	return out
}

// TestScript: a script sees the conversation of either protocol alike
// (system prompt, messages, tool calls and results, tools offered), its
// two tool calls are answered in the request's protocol, and the input
// tokens count the words and 5 per tool call held in the context.
func TestScript(t *testing.T) {
	t.Parallel()
	s := New(t)
	var seen []Conversation
	s.Script = func(c Conversation) Reply {
		seen = append(seen, c)
		return Reply{ToolCalls: []ToolCall{
			{Name: "lookup", Arguments: json.RawMessage(`{"input":"a"}`)},
			{Name: "lookup", Arguments: json.RawMessage(`{"input":"b"}`)},
		}}
	}
	oa := post(t, s.URL+"/v1/chat/completions", `{"model":"m","tools":[{"type":"function","function":{"name":"lookup"}}],"messages":[
		{"role":"system","content":"be brief"},
		{"role":"user","content":"two words"},
		{"role":"assistant","content":null,"tool_calls":[{"id":"x","type":"function","function":{"name":"lookup","arguments":"{}"}}]},
		{"role":"tool","tool_call_id":"x","content":"one"}]}`)
	an := post(t, s.URL+"/v1/messages", `{"model":"m","max_tokens":9,"system":"be brief","tools":[{"name":"lookup"}],"messages":[
		{"role":"user","content":[{"type":"text","text":"two words"}]},
		{"role":"assistant","content":[{"type":"tool_use","id":"x","name":"lookup","input":{}}]},
		{"role":"user","content":[{"type":"tool_result","tool_use_id":"x","content":"one"}]}]}`)
	require.Len(t, seen, 2)
	require.Equal(t, seen[0], seen[1], "one conversation, whatever the protocol")
	c := seen[0]
	require.Equal(t, "be brief", c.System)
	require.Equal(t, []string{"lookup"}, c.Tools)
	require.Equal(t, []string{"two words"}, c.Texts("user"))
	require.Equal(t, []string{"one"}, c.Texts("tool"))
	require.Equal(t, "x", c.Messages[1].ToolCalls[0].ID)

	msg := oa["choices"].([]any)[0].(map[string]any)["message"].(map[string]any)
	calls := msg["tool_calls"].([]any)
	require.Len(t, calls, 2)
	require.Equal(t, "call_2", calls[1].(map[string]any)["id"])
	require.Equal(t, `{"input":"b"}`, calls[1].(map[string]any)["function"].(map[string]any)["arguments"])
	require.EqualValues(t, 2+2+5+1, oa["usage"].(map[string]any)["prompt_tokens"])
	require.EqualValues(t, 10, oa["usage"].(map[string]any)["completion_tokens"])
	blocks := an["content"].([]any)
	require.Len(t, blocks, 2)
	require.Equal(t, "toolu_2", blocks[1].(map[string]any)["id"])
	require.Equal(t, "tool_use", an["stop_reason"])
	require.EqualValues(t, 2+2+5+1, an["usage"].(map[string]any)["input_tokens"])
}
