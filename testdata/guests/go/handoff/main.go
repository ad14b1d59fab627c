// Command handoff is an agent step that starts in a fresh context: with
// input {"mode": "decide", "text": T} it records T as a decision note and a
// finding; with {"mode": "read"} it reads the task's handoff (handoff.get)
// and its own request's objective and constraints, and outputs what it
// would rebuild its working set from.
//
// Build, from the module root:
//
//	GOOS=wasip1 GOARCH=wasm go build -o handoff.wasm ./testdata/guests/go/handoff
package main

import (
	sdk "github.com/lhengine/lhengine/plugins/sdk/go"
)

type input struct {
	Mode string `json:"mode"`
	Text string `json:"text"`
}

type view struct {
	Objective        string   `json:"objective"`
	Constraints      []string `json:"constraints"`
	ReqObjective     string   `json:"request_objective"`
	ReqConstraints   []string `json:"request_constraints"`
	Completed        []string `json:"completed"`
	Pending          []string `json:"pending"`
	Decisions        []string `json:"decisions"`
	Findings         int      `json:"findings"`
	NextActions      []string `json:"next_actions"`
	CheckpointStep   string   `json:"checkpoint_step"`
	CheckpointDone   int      `json:"checkpoint_done"`
	CheckpointTotal  int      `json:"checkpoint_total"`
	EnvironmentKnown bool     `json:"environment_known"`
}

func main() {
	sdk.Run(func(ctx *sdk.Context, in input) (any, error) {
		if in.Mode == "decide" {
			if err := ctx.Note(sdk.NoteDecision, in.Text); err != nil {
				return nil, err
			}
			return in.Text, ctx.Note(sdk.NoteFinding, "found while deciding: "+in.Text)
		}
		h, err := ctx.Handoff()
		if err != nil {
			return nil, err
		}
		v := view{Objective: h.Objective, Constraints: h.Constraints, ReqObjective: ctx.Objective, ReqConstraints: ctx.Constraints,
			Findings: h.Findings.Total, NextActions: h.NextActions, CheckpointStep: h.Checkpoint.Step,
			CheckpointDone: h.Checkpoint.Done, CheckpointTotal: h.Checkpoint.Total, EnvironmentKnown: h.Environment != nil}
		for _, s := range h.Completed {
			v.Completed = append(v.Completed, s.Name)
		}
		for _, s := range h.Pending {
			v.Pending = append(v.Pending, s.Name)
		}
		for _, d := range h.Decisions {
			v.Decisions = append(v.Decisions, d.Text)
		}
		return v, nil
	})
}
