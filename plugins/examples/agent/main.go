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
// It reads two harness policy parameters (specs/policies.md §2.2, the
// step request's policy object):
//
//   - single_tool = true (policy single-tool-at-a-time): only the first
//     tool call of a model turn runs; every other call of that turn is
//     answered with a tool result saying it was not run and to ask again,
//     one call per turn.
//   - context_reset_every = N (policy context-reset-every-n): after every
//     N model turns the conversation starts again from the system prompt
//     and one user message: the question and the facts found so far (the
//     lookups that found a fact), each once, in the order found.
//
// Without them it keeps one conversation and runs every call of a turn.
//
// Build, from the module root:
//
//	GOOS=wasip1 GOARCH=wasm go build -o plugins/examples/agent/agent.wasm ./plugins/examples/agent
package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
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
	Replayed     int      `json:"replayed"`          // turns answered from the journal
	NotRun       int      `json:"not_run,omitempty"` // tool calls refused under single_tool
	Resets       int      `json:"resets,omitempty"`  // fresh contexts under context_reset_every
}

var lookupTool = sdk.Tool{
	Name:        "lookup",
	Description: "Look up a fact by name; returns what is known about it.",
	Parameters:  json.RawMessage(`{"type":"object","properties":{"input":{"type":"string","description":"the name to look up"}},"required":["input"]}`),
}

// NotRun is the tool result of a call not run under single_tool.
const NotRun = "not run: this agent runs one tool call per turn, and only the first call of this turn ran. Ask for this one again in a later turn, one call at a time."

// FactsHeading starts the list of facts found in a fresh context's user
// message.
const FactsHeading = "Facts found so far:"

func main() {
	sdk.Run(func(ctx *sdk.Context, in input) (output, error) {
		if in.MaxTurns < 1 {
			in.MaxTurns = 4
		}
		out := output{Lookups: []string{}}
		if in.System == "" {
			return out, errors.New("input.system is empty: the task passes its system prompt (system = prompt.system)")
		}
		singleTool := ctx.Policy.Bool("single_tool")
		resetEvery := ctx.Policy.Int("context_reset_every", 0)
		if resetEvery < 0 {
			return out, fmt.Errorf("policy parameter context_reset_every is %d: want a whole number of turns, at least 1", resetEvery)
		}
		msgs := []sdk.Message{
			{Role: sdk.RoleSystem, Content: in.System},
			{Role: sdk.RoleUser, Content: in.Question},
		}
		var found []string // facts found, each once, in the order found
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
			// The assistant message keeps every call: each gets a tool
			// result, run or not.
			msgs = append(msgs, sdk.Message{Role: sdk.RoleAssistant, Content: resp.Text, ToolCalls: resp.ToolCalls})
			for i, tc := range resp.ToolCalls {
				if singleTool && i > 0 {
					out.NotRun++
					msgs = append(msgs, sdk.Message{Role: sdk.RoleTool, ToolCallID: tc.ID, Content: NotRun})
					continue
				}
				result, fact, err := runTool(ctx, in.Facts, tc)
				if err != nil {
					return out, err
				}
				out.Lookups = append(out.Lookups, result)
				if fact && !slices.Contains(found, result) {
					found = append(found, result)
				}
				msgs = append(msgs, sdk.Message{Role: sdk.RoleTool, ToolCallID: tc.ID, Content: result})
			}
			if resetEvery > 0 && turn%resetEvery == 0 && turn < in.MaxTurns {
				out.Resets++
				msgs = freshContext(in, found)
			}
		}
		return out, fmt.Errorf("no answer within %d turns", in.MaxTurns)
	})
}

// freshContext is the conversation a context reset starts: the system
// prompt, then the question with the facts found so far.
func freshContext(in input, found []string) []sdk.Message {
	var b strings.Builder
	b.WriteString(in.Question)
	b.WriteString("\n\n" + FactsHeading)
	if len(found) == 0 {
		b.WriteString(" none.")
	}
	for _, f := range found {
		b.WriteString("\n- " + f)
	}
	return []sdk.Message{
		{Role: sdk.RoleSystem, Content: in.System},
		{Role: sdk.RoleUser, Content: b.String()},
	}
}

// runTool runs one tool call and says whether its result is a fact found.
// An unknown tool or bad arguments are told to the model as the tool's
// result, so it can correct itself.
func runTool(ctx *sdk.Context, facts map[string]string, tc sdk.ToolCall) (string, bool, error) {
	if tc.Name != lookupTool.Name {
		return fmt.Sprintf("error: there is no tool %q; use lookup", tc.Name), false, nil
	}
	var args struct {
		Input string `json:"input"`
	}
	if err := tc.DecodeArguments(&args); err != nil || args.Input == "" {
		return `error: lookup wants {"input": "<name>"}`, false, nil
	}
	if err := ctx.Count("lookups", 1); err != nil {
		return "", false, err
	}
	if err := ctx.KVPut("last-lookup", args.Input); err != nil {
		return "", false, err
	}
	names := make([]string, 0, len(facts))
	for name := range facts {
		names = append(names, name)
	}
	sort.Strings(names)
	q := strings.ToLower(args.Input)
	for _, name := range names {
		if strings.Contains(q, strings.ToLower(name)) {
			return facts[name], true, nil
		}
	}
	return "nothing is known about " + args.Input, false, nil
}
