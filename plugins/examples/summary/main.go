// Command summary is the step the periodic-summary policy inserts after
// matching steps (v1), or every N units of them (v2): it condenses the anchor step's output into one line
// (what it is and how big) and records it as a progress finding, so that a
// fresh model context resumed from the handoff sees what each stage
// produced without reading it all.
//
// Its output is the anchor's output, unchanged: inserted after a task's last
// step, it would otherwise replace what the task produces.
//
// The policy's "max_chars" parameter bounds the line (default 200).
//
// Build, from the module root:
//
//	GOOS=wasip1 GOARCH=wasm go build -o plugins/examples/summary/summary.wasm ./plugins/examples/summary
package main

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	sdk "github.com/lhengine/lhengine/plugins/sdk/go"
)

// Input is what the policy hands the step: the anchor step's output, and
// its name ("" for the anchor named in the step's own name). Inserted with
// every = N (periodic-summary v2), the output is that of one window of the
// anchor's units and Window says which: the step then outputs the line, as
// nothing depends on a window step's output.
type Input struct {
	Step   string          `json:"step"`
	Output json.RawMessage `json:"output"`
	Window *Window         `json:"window"`
}

// Window is each.value of a window step: the anchor's commits From+1 to To.
type Window struct {
	From int `json:"from"`
	To   int `json:"to"`
}

func summarize(ctx *sdk.Context, in Input) (json.RawMessage, error) {
	line := describe(in.Output)
	if in.Step == "" {
		// An inserted step is named POLICY.INSERT@ANCHOR.
		if i := strings.LastIndexByte(ctx.Step, '@'); i >= 0 {
			in.Step = ctx.Step[i+1:]
		}
	}
	switch {
	case in.Window != nil:
		units := fmt.Sprintf("units %d-%d", in.Window.From+1, in.Window.To)
		if in.Window.To == in.Window.From+1 {
			units = fmt.Sprintf("unit %d", in.Window.To)
		}
		line = fmt.Sprintf("%s of step %s produced %s", units, in.Step, line)
	case in.Step != "":
		line = fmt.Sprintf("step %s produced %s", in.Step, line)
	}
	if limit := ctx.Policy.Int("max_chars", 200); limit > 3 && len(line) > limit {
		line = line[:limit-3] + "..."
	}
	ctx.Log(sdk.LevelInfo, line)
	if err := ctx.Note(sdk.NoteFinding, line); err != nil {
		ctx.Logf(sdk.LevelWarn, "progress note not recorded: %v", err)
	}
	if in.Window != nil {
		return json.Marshal(line)
	}
	if len(in.Output) == 0 {
		return json.RawMessage("null"), nil
	}
	return in.Output, nil
}

// describe says what a JSON value is and how big, in a few words.
func describe(raw json.RawMessage) string {
	var v any
	if err := json.Unmarshal(raw, &v); err != nil || v == nil {
		return "nothing"
	}
	switch x := v.(type) {
	case []any:
		if len(x) == 1 {
			return "a list of 1 item"
		}
		return fmt.Sprintf("a list of %d items", len(x))
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		return fmt.Sprintf("an object with %d fields (%s)", len(keys), strings.Join(keys, ", "))
	case string:
		return fmt.Sprintf("a text of %d characters", len(x))
	default:
		return fmt.Sprintf("the value %v", x)
	}
}

func main() { sdk.Run(summarize) }
