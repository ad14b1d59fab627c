// Command planner is the step the plan-before-execute policy inserts before
// matching steps: it writes down, before the step acts, what the task is for,
// the constraints it must keep and the step about to run, and records that
// as a progress decision. A model asked to act at once tends to start on the
// first thing it sees; a plan written first is durable and shows in the
// handoff.
//
// Build, from the module root:
//
//	GOOS=wasip1 GOARCH=wasm go build -o plugins/examples/planner/planner.wasm ./plugins/examples/planner
package main

import (
	"errors"
	"fmt"
	"strings"

	sdk "github.com/lhengine/lhengine/plugins/sdk/go"
)

// Input is what the policy hands the step.
type Input struct {
	Task        string   `json:"task"`
	Objective   string   `json:"objective"`
	Constraints []string `json:"constraints"`
	Next        string   `json:"next"` // the step the plan is for; "" for the anchor
}

// Plan is the step's output.
type Plan struct {
	Next  string   `json:"next"`
	Steps []string `json:"steps"`
}

func plan(ctx *sdk.Context, in Input) (Plan, error) {
	if in.Next == "" {
		// An inserted step is named POLICY.INSERT@ANCHOR.
		if i := strings.LastIndexByte(ctx.Step, '@'); i >= 0 {
			in.Next = ctx.Step[i+1:]
		}
	}
	if in.Next == "" {
		return Plan{}, errors.New("input.next names no step, and the step is not one a policy inserted")
	}
	p := Plan{Next: in.Next}
	if in.Objective != "" {
		p.Steps = append(p.Steps, "restate the objective: "+in.Objective)
	}
	for _, c := range in.Constraints {
		p.Steps = append(p.Steps, "keep the constraint: "+c)
	}
	p.Steps = append(p.Steps, fmt.Sprintf("run step %s of task %s, then check its output against the objective", in.Next, in.Task))
	if err := ctx.Note(sdk.NoteDecision, "plan before "+in.Next+": "+strings.Join(p.Steps, "; ")); err != nil {
		ctx.Logf(sdk.LevelWarn, "progress note not recorded: %v", err)
	}
	return p, nil
}

func main() { sdk.Run(plan) }
