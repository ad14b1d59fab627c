// Command agent is an example tool-using agent on lhengine's model
// capability: it asks a model a question, under the system prompt the task
// pins (prompts/system.md), with one tool offered, runs each
// tool call the model makes through host capabilities, feeds the result
// back and asks again, until the model answers in text or the turn cap is
// reached.
//
// The tool, lookup, finds a fact in the step's input (the facts map) whose
// name appears in the tool's input; each lookup is counted (progress.count)
// and remembered in the unit's key/value state (kv.put), so a retried
// attempt can see what the last one looked up. Each model call has its own
// key (turn-1, turn-2, ...): a retry, a resume after a crash or a repair
// pass gets the responses already paid for from the engine's journal.
//
// Build, from the module root:
//
//	GOOS=wasip1 GOARCH=wasm go build -o plugins/examples/agent/agent.wasm ./plugins/examples/agent
package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"

	sdk "github.com/lhengine/lhengine/plugins/sdk/go"
)

type input struct {
	Model    string            `json:"model"`
	System   string            `json:"system"` // the system prompt, pinned by the task (prompt.system)
	Question string            `json:"question"`
	Facts    map[string]string `json:"facts"`
	MaxTurns int               `json:"max_turns"`
}

type output struct {
	Answer       string   `json:"answer"`
	Turns        int      `json:"turns"`
	Lookups      []string `json:"lookups"`
	InputTokens  int64    `json:"input_tokens"`
	OutputTokens int64    `json:"output_tokens"`
	Cost         float64  `json:"cost"`
	Replayed     int      `json:"replayed"` // turns answered from the journal
}

var lookupTool = sdk.Tool{
	Name:        "lookup",
	Description: "Look up a fact by name; returns what is known about it.",
	Parameters:  json.RawMessage(`{"type":"object","properties":{"input":{"type":"string","description":"the name to look up"}},"required":["input"]}`),
}

func main() {
	sdk.Run(func(ctx *sdk.Context, in input) (output, error) {
		if in.MaxTurns < 1 {
			in.MaxTurns = 4
		}
		out := output{Lookups: []string{}}
		if in.System == "" {
			return out, errors.New("input.system is empty: the task passes its system prompt (system = prompt.system)")
		}
		msgs := []sdk.Message{
			{Role: sdk.RoleSystem, Content: in.System},
			{Role: sdk.RoleUser, Content: in.Question},
		}
		for turn := 1; turn <= in.MaxTurns; turn++ {
			resp, err := ctx.Generate(sdk.GenerateRequest{Model: in.Model, Key: fmt.Sprintf("turn-%d", turn), Messages: msgs, Tools: []sdk.Tool{lookupTool}})
			if err != nil {
				return out, err
			}
			out.Turns = turn
			out.InputTokens += resp.Usage.InputTokens
			out.OutputTokens += resp.Usage.OutputTokens
			out.Cost += resp.Cost
			if resp.Replayed {
				out.Replayed++
			}
			if len(resp.ToolCalls) == 0 {
				out.Answer = resp.Text
				return out, nil
			}
			msgs = append(msgs, sdk.Message{Role: sdk.RoleAssistant, Content: resp.Text, ToolCalls: resp.ToolCalls})
			for _, tc := range resp.ToolCalls {
				result, err := runTool(ctx, in.Facts, tc)
				if err != nil {
					return out, err
				}
				out.Lookups = append(out.Lookups, result)
				msgs = append(msgs, sdk.Message{Role: sdk.RoleTool, ToolCallID: tc.ID, Content: result})
			}
		}
		return out, fmt.Errorf("no answer within %d turns", in.MaxTurns)
	})
}

// runTool runs one tool call. An unknown tool or bad arguments are told
// to the model as the tool's result, so it can correct itself.
func runTool(ctx *sdk.Context, facts map[string]string, tc sdk.ToolCall) (string, error) {
	if tc.Name != lookupTool.Name {
		return fmt.Sprintf("error: there is no tool %q; use lookup", tc.Name), nil
	}
	var args struct {
		Input string `json:"input"`
	}
	if err := tc.DecodeArguments(&args); err != nil || args.Input == "" {
		return `error: lookup wants {"input": "<name>"}`, nil
	}
	if err := ctx.Count("lookups", 1); err != nil {
		return "", err
	}
	if err := ctx.KVPut("last-lookup", args.Input); err != nil {
		return "", err
	}
	names := make([]string, 0, len(facts))
	for name := range facts {
		names = append(names, name)
	}
	sort.Strings(names)
	q := strings.ToLower(args.Input)
	for _, name := range names {
		if strings.Contains(q, strings.ToLower(name)) {
			return facts[name], nil
		}
	}
	return "nothing is known about " + args.Input, nil
}
