// Package testmodel is a loopback model server for tests. It speaks both
// protocols of model.generate: OpenAI's chat completions (POST
// /v1/chat/completions) and Anthropic's Messages (POST /v1/messages), with
// tool calls and usage, and answers deterministically:
//
//   - a request offering tools, none of whose calls has been answered yet
//     (no tool message, no tool_result block), gets a call of the first
//     tool with the arguments {"input": <the last user message>};
//   - any other request gets the text "echo: <the last user message>", or
//     "tool said: <result>" when the last message is a tool result.
//
// Usage is counted in words: every word of every message (and of the
// system prompt) is an input token, every word of the answer an output
// token, and a tool call 5 output tokens. The server records every request
// it gets, can be told to fail the next ones (FailNext), and refuses a
// request without the expected API key (Server.Key) with 401.
//
// A test that needs another model sets Server.Script: a function from the
// request's conversation to the answer (text, or any number of tool
// calls), spoken in the request's protocol. A scripted answer's input
// tokens also count 5 for every tool call of the conversation's assistant
// messages, so a context holding many calls costs what it holds.
//
// It listens on 127.0.0.1 only: tests reach no other network.
package testmodel

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// Server is a loopback model server.
type Server struct {
	// URL is the server's root, such as http://127.0.0.1:PORT. The base_url
	// of an openai model is URL+"/v1"; of an anthropic model, URL.
	URL string
	// Key, when set, is the API key a request must carry: Authorization:
	// Bearer KEY (openai) or x-api-key: KEY (anthropic).
	Key string
	// Script, when set, answers every request instead of the default
	// rules. Set it before the first request.
	Script Script

	srv      *httptest.Server
	mu       sync.Mutex
	requests []Request
	fail     []failure
	busy     time.Duration
}

// Request is a request the server got.
type Request struct {
	Protocol string // "openai" or "anthropic"
	Header   http.Header
	Body     json.RawMessage
	Answered int // the status the server answered with
}

type failure struct {
	status     int
	retryAfter string
}

// New starts a server on 127.0.0.1, closed when the test ends.
func New(t testing.TB) *Server {
	t.Helper()
	s := Start()
	t.Cleanup(s.Close)
	return s
}

// Start is New for a server that outlives a test (a benchmark's helper,
// say); stop it with Close.
func Start() *Server {
	s := &Server{}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve)) // on 127.0.0.1
	s.URL = s.srv.URL
	return s
}

// Close stops the server.
func (s *Server) Close() { s.srv.Close() }

// FailNext makes the next n requests fail with status (and a Retry-After
// header when retryAfter is not empty), after the failures already queued.
func (s *Server) FailNext(n, status int, retryAfter string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for range n {
		s.fail = append(s.fail, failure{status, retryAfter})
	}
}

// Requests returns the requests the server got, in order.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

// Answered counts the requests the server answered with 200.
func (s *Server) Answered() int {
	n := 0
	for _, r := range s.Requests() {
		if r.Answered == http.StatusOK {
			n++
		}
	}
	return n
}

// Busy is the time the server spent in its handler, reading requests and
// writing answers: what a benchmark subtracts to find its caller's share.
func (s *Server) Busy() time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.busy
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	defer func() {
		s.mu.Lock()
		s.busy += time.Since(start)
		s.mu.Unlock()
	}()
	var proto, key string
	switch {
	case r.Method == http.MethodPost && r.URL.Path == "/v1/chat/completions":
		proto, key = "openai", strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
	case r.Method == http.MethodPost && r.URL.Path == "/v1/messages":
		proto, key = "anthropic", r.Header.Get("x-api-key")
	default:
		http.NotFound(w, r)
		return
	}
	var body json.RawMessage
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
		body = nil
	}
	req := Request{Protocol: proto, Header: r.Header.Clone(), Body: body}
	s.mu.Lock()
	var f *failure
	if len(s.fail) > 0 {
		f = &s.fail[0]
		s.fail = s.fail[1:]
	}
	s.mu.Unlock()

	status, answer := http.StatusOK, any(nil)
	switch {
	case f != nil:
		status = f.status
		if f.retryAfter != "" {
			w.Header().Set("Retry-After", f.retryAfter)
		}
		answer = errorAnswer(proto, fmt.Sprintf("testmodel: failing with %d as told", f.status))
	case s.Key != "" && key != s.Key:
		status, answer = http.StatusUnauthorized, errorAnswer(proto, "testmodel: missing or wrong API key")
	case body == nil:
		status, answer = http.StatusBadRequest, errorAnswer(proto, "testmodel: the body is not JSON")
	case s.Script != nil:
		answer, status = scriptedReply(proto, body, s.Script)
	case proto == "openai":
		answer, status = openaiReply(body)
	default:
		answer, status = anthropicReply(body)
	}
	req.Answered = status
	s.mu.Lock()
	s.requests = append(s.requests, req)
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(answer)
}

func errorAnswer(proto, msg string) any {
	if proto == "anthropic" {
		return map[string]any{"type": "error", "error": map[string]any{"type": "api_error", "message": msg}}
	}
	return map[string]any{"error": map[string]any{"message": msg, "type": "server_error"}}
}

func words(s string) int64 { return int64(len(strings.Fields(s))) }

func openaiReply(body json.RawMessage) (any, int) {
	var req struct {
		Model    string `json:"model"`
		Messages []struct {
			Role    string  `json:"role"`
			Content *string `json:"content"`
		} `json:"messages"`
		Tools []struct {
			Function struct {
				Name string `json:"name"`
			} `json:"function"`
		} `json:"tools"`
		MaxTokens int `json:"max_tokens"`
	}
	if err := json.Unmarshal(body, &req); err != nil || len(req.Messages) == 0 || req.Model == "" {
		return errorAnswer("openai", "testmodel: want model and messages"), http.StatusBadRequest
	}
	var in int64
	lastUser, answered := "", false
	for _, m := range req.Messages {
		c := ""
		if m.Content != nil {
			c = *m.Content
		}
		in += words(c)
		switch m.Role {
		case "user":
			lastUser = c
		case "tool":
			answered = true
		}
	}
	last := req.Messages[len(req.Messages)-1]
	msg := map[string]any{"role": "assistant"}
	var out int64
	finish := "stop"
	switch {
	case len(req.Tools) > 0 && !answered:
		args, _ := json.Marshal(map[string]string{"input": lastUser})
		msg["content"] = nil
		msg["tool_calls"] = []any{map[string]any{"id": "call_1", "type": "function",
			"function": map[string]any{"name": req.Tools[0].Function.Name, "arguments": string(args)}}}
		out, finish = 5, "tool_calls"
	case last.Role == "tool":
		text := "tool said: " + *last.Content
		msg["content"], out = text, words(text)
	default:
		text := "echo: " + lastUser
		msg["content"], out = text, words(text)
	}
	return map[string]any{
		"id": "chatcmpl-test", "object": "chat.completion", "model": req.Model,
		"choices": []any{map[string]any{"index": 0, "message": msg, "finish_reason": finish}},
		"usage":   map[string]any{"prompt_tokens": in, "completion_tokens": out, "total_tokens": in + out},
	}, http.StatusOK
}

func anthropicReply(body json.RawMessage) (any, int) {
	var req struct {
		Model     string `json:"model"`
		MaxTokens int    `json:"max_tokens"`
		System    string `json:"system"`
		Messages  []struct {
			Role    string `json:"role"`
			Content []struct {
				Type    string `json:"type"`
				Text    string `json:"text"`
				Content string `json:"content"`
			} `json:"content"`
		} `json:"messages"`
		Tools []struct {
			Name string `json:"name"`
		} `json:"tools"`
	}
	if err := json.Unmarshal(body, &req); err != nil || len(req.Messages) == 0 || req.Model == "" || req.MaxTokens < 1 {
		return errorAnswer("anthropic", "testmodel: want model, max_tokens and messages"), http.StatusBadRequest
	}
	in := words(req.System)
	lastUser, lastResult, answered := "", "", false
	for _, m := range req.Messages {
		for _, b := range m.Content {
			switch b.Type {
			case "text":
				in += words(b.Text)
				if m.Role == "user" {
					lastUser, lastResult = b.Text, ""
				}
			case "tool_result":
				in += words(b.Content)
				answered, lastResult = true, b.Content
			}
		}
	}
	var content []any
	var out int64
	stop := "end_turn"
	switch {
	case len(req.Tools) > 0 && !answered:
		content = append(content, map[string]any{"type": "tool_use", "id": "toolu_1", "name": req.Tools[0].Name,
			"input": map[string]string{"input": lastUser}})
		out, stop = 5, "tool_use"
	case lastResult != "":
		text := "tool said: " + lastResult
		content, out = append(content, map[string]any{"type": "text", "text": text}), words(text)
	default:
		text := "echo: " + lastUser
		content, out = append(content, map[string]any{"type": "text", "text": text}), words(text)
	}
	return map[string]any{
		"id": "msg_test", "type": "message", "role": "assistant", "model": req.Model,
		"content": content, "stop_reason": stop,
		"usage": map[string]any{"input_tokens": in, "output_tokens": out},
	}, http.StatusOK
}

// Script is a scripted model: the answer to a conversation.
type Script func(Conversation) Reply

// Conversation is a request as a Script sees it, whatever its protocol.
type Conversation struct {
	Model    string
	System   string    // the system prompt (openai: the system messages, joined)
	Messages []Message // user, assistant and tool messages, in order
	Tools    []string  // the names of the tools offered
}

// Message is one message of a Conversation. An Anthropic user message of
// tool_result blocks is one tool message per block.
type Message struct {
	Role       string // "user", "assistant" or "tool"
	Text       string
	ToolCalls  []ToolCall // an assistant message's calls
	ToolCallID string     // the call a tool message answers
}

// ToolCall is a tool call, asked for or answered.
type ToolCall struct {
	ID        string
	Name      string
	Arguments json.RawMessage // a JSON object
}

// Reply is a Script's answer: tool calls when it has any, else the text.
// A call without an ID gets call_N (openai) or toolu_N (anthropic), N from 1.
type Reply struct {
	Text      string
	ToolCalls []ToolCall
}

// Texts returns the texts of the conversation's messages of role, in order.
func (c Conversation) Texts(role string) []string {
	var out []string
	for _, m := range c.Messages {
		if m.Role == role {
			out = append(out, m.Text)
		}
	}
	return out
}

func scriptedReply(proto string, body json.RawMessage, script Script) (any, int) {
	var conv Conversation
	if proto == "openai" {
		var req struct {
			Model    string `json:"model"`
			Messages []struct {
				Role       string  `json:"role"`
				Content    *string `json:"content"`
				ToolCallID string  `json:"tool_call_id"`
				ToolCalls  []struct {
					ID       string `json:"id"`
					Function struct {
						Name      string `json:"name"`
						Arguments string `json:"arguments"`
					} `json:"function"`
				} `json:"tool_calls"`
			} `json:"messages"`
			Tools []struct {
				Function struct {
					Name string `json:"name"`
				} `json:"function"`
			} `json:"tools"`
		}
		if err := json.Unmarshal(body, &req); err != nil || len(req.Messages) == 0 || req.Model == "" {
			return errorAnswer(proto, "testmodel: want model and messages"), http.StatusBadRequest
		}
		conv.Model = req.Model
		var system []string
		for _, m := range req.Messages {
			text := ""
			if m.Content != nil {
				text = *m.Content
			}
			if m.Role == "system" {
				system = append(system, text)
				continue
			}
			msg := Message{Role: m.Role, Text: text, ToolCallID: m.ToolCallID}
			for _, tc := range m.ToolCalls {
				msg.ToolCalls = append(msg.ToolCalls, ToolCall{ID: tc.ID, Name: tc.Function.Name, Arguments: json.RawMessage(tc.Function.Arguments)})
			}
			conv.Messages = append(conv.Messages, msg)
		}
		conv.System = strings.Join(system, "\n\n")
		for _, t := range req.Tools {
			conv.Tools = append(conv.Tools, t.Function.Name)
		}
	} else {
		var req struct {
			Model     string `json:"model"`
			MaxTokens int    `json:"max_tokens"`
			System    string `json:"system"`
			Messages  []struct {
				Role    string `json:"role"`
				Content []struct {
					Type      string          `json:"type"`
					Text      string          `json:"text"`
					ID        string          `json:"id"`
					Name      string          `json:"name"`
					Input     json.RawMessage `json:"input"`
					ToolUseID string          `json:"tool_use_id"`
					Content   string          `json:"content"`
				} `json:"content"`
			} `json:"messages"`
			Tools []struct {
				Name string `json:"name"`
			} `json:"tools"`
		}
		if err := json.Unmarshal(body, &req); err != nil || len(req.Messages) == 0 || req.Model == "" || req.MaxTokens < 1 {
			return errorAnswer(proto, "testmodel: want model, max_tokens and messages"), http.StatusBadRequest
		}
		conv.Model, conv.System = req.Model, req.System
		for _, m := range req.Messages {
			msg := Message{Role: m.Role}
			var texts []string
			for _, b := range m.Content {
				switch b.Type {
				case "text":
					texts = append(texts, b.Text)
				case "tool_use":
					msg.ToolCalls = append(msg.ToolCalls, ToolCall{ID: b.ID, Name: b.Name, Arguments: b.Input})
				case "tool_result":
					conv.Messages = append(conv.Messages, Message{Role: "tool", Text: b.Content, ToolCallID: b.ToolUseID})
				}
			}
			msg.Text = strings.Join(texts, "\n\n")
			if msg.Text != "" || len(msg.ToolCalls) > 0 {
				conv.Messages = append(conv.Messages, msg)
			}
		}
		for _, t := range req.Tools {
			conv.Tools = append(conv.Tools, t.Name)
		}
	}
	in := words(conv.System)
	for _, m := range conv.Messages {
		in += words(m.Text) + 5*int64(len(m.ToolCalls))
	}
	reply := script(conv)
	out := words(reply.Text)
	if len(reply.ToolCalls) > 0 {
		out = 5 * int64(len(reply.ToolCalls))
	}
	if proto == "openai" {
		msg := map[string]any{"role": "assistant", "content": reply.Text}
		finish := "stop"
		if len(reply.ToolCalls) > 0 {
			var calls []any
			for i, tc := range reply.ToolCalls {
				id := tc.ID
				if id == "" {
					id = fmt.Sprintf("call_%d", i+1)
				}
				calls = append(calls, map[string]any{"id": id, "type": "function",
					"function": map[string]any{"name": tc.Name, "arguments": string(tc.Arguments)}})
			}
			msg["content"], msg["tool_calls"], finish = nil, calls, "tool_calls"
		}
		return map[string]any{
			"id": "chatcmpl-test", "object": "chat.completion", "model": conv.Model,
			"choices": []any{map[string]any{"index": 0, "message": msg, "finish_reason": finish}},
			"usage":   map[string]any{"prompt_tokens": in, "completion_tokens": out, "total_tokens": in + out},
		}, http.StatusOK
	}
	var content []any
	stop := "end_turn"
	for i, tc := range reply.ToolCalls {
		id := tc.ID
		if id == "" {
			id = fmt.Sprintf("toolu_%d", i+1)
		}
		content = append(content, map[string]any{"type": "tool_use", "id": id, "name": tc.Name, "input": tc.Arguments})
		stop = "tool_use"
	}
	if len(reply.ToolCalls) == 0 {
		content = append(content, map[string]any{"type": "text", "text": reply.Text})
	}
	return map[string]any{
		"id": "msg_test", "type": "message", "role": "assistant", "model": conv.Model,
		"content": content, "stop_reason": stop,
		"usage": map[string]any{"input_tokens": in, "output_tokens": out},
	}, http.StatusOK
}
