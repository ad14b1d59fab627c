// Command model is a test guest calling a model through the Go SDK: a
// small tool-using loop. It asks the model with the tool "lookup" offered
// (when tools is set), answers each tool call with "result for <input>",
// and asks again, under the keys KEY-1, KEY-2, ... until the model
// answers with text or turns run out. It fails on purpose, after its
// calls, while its attempt is at most fail_attempts, so that the retry
// makes the same calls again.
//
// Build, from the module root:
//
//	GOOS=wasip1 GOARCH=wasm go build -o model.wasm ./testdata/guests/go/model
package main

import (
	"encoding/json"
	"errors"
	"fmt"

	sdk "github.com/lhengine/lhengine/plugins/sdk/go"
)

type input struct {
	Model        string `json:"model"`
	Key          string `json:"key"`
	Prompt       string `json:"prompt"`
	Tools        bool   `json:"tools"`
	FailAttempts int    `json:"fail_attempts"`
}

type output struct {
	Text         string  `json:"text"`
	Turns        int     `json:"turns"`
	Replayed     []bool  `json:"replayed"`
	InputTokens  int64   `json:"input_tokens"`
	OutputTokens int64   `json:"output_tokens"`
	Cost         float64 `json:"cost"`
	Status       int32   `json:"status,omitempty"` // of a refused call
	Message      string  `json:"message,omitempty"`
}

func main() {
	sdk.Run(func(ctx *sdk.Context, in input) (output, error) {
		var out output
		msgs := []sdk.Message{
			{Role: sdk.RoleSystem, Content: "Answer briefly."},
			{Role: sdk.RoleUser, Content: in.Prompt},
		}
		var tools []sdk.Tool
		if in.Tools {
			tools = []sdk.Tool{{Name: "lookup", Description: "looks a thing up",
				Parameters: json.RawMessage(`{"type":"object","properties":{"input":{"type":"string"}},"required":["input"]}`)}}
		}
		for turn := 1; turn <= 4; turn++ {
			resp, err := ctx.Generate(sdk.GenerateRequest{Model: in.Model, Key: fmt.Sprintf("%s-%d", in.Key, turn), Messages: msgs, Tools: tools})
			var he *sdk.HostError
			if errors.As(err, &he) {
				out.Status, out.Message = int32(he.Status), he.Message
				return out, nil
			}
			if err != nil {
				return out, err
			}
			out.Turns = turn
			out.Replayed = append(out.Replayed, resp.Replayed)
			out.InputTokens += resp.Usage.InputTokens
			out.OutputTokens += resp.Usage.OutputTokens
			out.Cost += resp.Cost
			if len(resp.ToolCalls) == 0 {
				out.Text = resp.Text
				break
			}
			msgs = append(msgs, sdk.Message{Role: sdk.RoleAssistant, Content: resp.Text, ToolCalls: resp.ToolCalls})
			for _, tc := range resp.ToolCalls {
				var args struct{ Input string }
				if err := tc.DecodeArguments(&args); err != nil {
					return out, err
				}
				msgs = append(msgs, sdk.Message{Role: sdk.RoleTool, ToolCallID: tc.ID, Content: "result for " + args.Input})
			}
		}
		if ctx.Attempt <= in.FailAttempts {
			return out, fmt.Errorf("failing attempt %d on purpose, after %d model calls", ctx.Attempt, out.Turns)
		}
		return out, nil
	})
}
