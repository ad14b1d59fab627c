// Command handoff is an agent step that starts in a fresh context: with
// input {"mode": "decide", "text": T} it records T as a decision note and a
// finding; with {"mode": "read"} it reads the task's handoff (handoff.get)
// and its own request's objective and constraints, and outputs what it
// would rebuild its working set from. With {"mode": "work"} it fails its
// first attempt (an error naming the item) and then records three
// findings; with {"mode": "compact"} it is a deliberately lossy
// summariser: it replaces every note it may (notes.list) with one summary
// that keeps only their number, after trying to replace a decision, and
// outputs what it saw and whether that try was refused. With {"mode":
// "page"} (a fan-out item) it records one finding, and item 7 a decision.
//
// Build, from the module root:
//
//	GOOS=wasip1 GOARCH=wasm go build -o handoff.wasm ./testdata/guests/go/handoff
package main

import (
	"encoding/json"
	"errors"
	"fmt"

	sdk "github.com/lhengine/lhengine/plugins/sdk/go"
)

type input struct {
	Mode string `json:"mode"`
	Text string `json:"text"`
}

type compacted struct {
	Listed          int      `json:"listed"`
	Kinds           []string `json:"kinds"`
	Summary         uint64   `json:"summary"`
	DecisionRefused bool     `json:"decision_refused"`
}

func compact(ctx *sdk.Context) (any, error) {
	var out compacted
	h, err := ctx.Handoff()
	if err != nil {
		return nil, err
	}
	if len(h.Decisions) > 0 {
		var raw struct {
			Decisions []struct {
				Seq uint64 `json:"seq"`
			} `json:"decisions"`
		}
		if err := json.Unmarshal(h.Raw, &raw); err != nil {
			return nil, err
		}
		_, err := ctx.CompactNotes([]uint64{raw.Decisions[0].Seq}, "nothing to see")
		out.DecisionRefused = errors.Is(err, sdk.ErrDenied)
	}
	notes, err := ctx.OpenNotes(-1, 0)
	if err != nil {
		return nil, err
	}
	var seqs []uint64
	for _, n := range notes {
		seqs = append(seqs, n.Seq)
		out.Kinds = append(out.Kinds, n.Kind)
	}
	out.Listed = len(notes)
	if len(seqs) > 0 {
		if out.Summary, err = ctx.CompactNotes(seqs, fmt.Sprintf("%d notes", len(seqs))); err != nil {
			return nil, err
		}
	}
	return out, nil
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
		switch in.Mode {
		case "work":
			if ctx.Attempt == 1 {
				return nil, fmt.Errorf("item %d: first try fails", ctx.Item.Index)
			}
			for i := range 3 {
				if err := ctx.Note(sdk.NoteFinding, fmt.Sprintf("item %d finding %d", ctx.Item.Index, i)); err != nil {
					return nil, err
				}
			}
			return ctx.Item.Index, nil
		case "compact":
			return compact(ctx)
		case "page":
			// One finding per item; item 7 also decides something.
			i := ctx.Item.Index
			if i == 7 {
				if err := ctx.Note(sdk.NoteDecision, "pages under /old are out of scope"); err != nil {
					return nil, err
				}
			}
			return i, ctx.Note(sdk.NoteFinding, fmt.Sprintf("page %d: no title", i))
		}
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
