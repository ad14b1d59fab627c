// Command draft is the first step of the critic example: it writes a short
// report with every section a downstream check asks for, but its first pass
// plants a defect that such a check does not look for, a placeholder left in
// the Findings section ("TODO" unless the input's "plant" names another; an
// empty "plant" plants nothing, a clean draft). A repair pass
// (ctx.Repair.Count > 0) writes the finished text. The text is
// deterministic.
//
// Build, from the module root:
//
//	GOOS=wasip1 GOARCH=wasm go build -o plugins/examples/critic/draft.wasm ./plugins/examples/critic/draft
package main

import (
	"errors"
	"fmt"
	"strings"

	sdk "github.com/lhengine/lhengine/plugins/sdk/go"
)

// Input is the draft step's input.
type Input struct {
	Topic string `json:"topic"`
	// Plant is the placeholder the first pass leaves; nil means "TODO", ""
	// none.
	Plant *string `json:"plant"`
}

// Section is one headed part of the report.
type Section struct {
	Heading string `json:"heading"`
	Body    string `json:"body"`
}

// Draft is the draft step's output.
type Draft struct {
	Title    string    `json:"title"`
	Sections []Section `json:"sections"`
}

func draft(ctx *sdk.Context, in Input) (Draft, error) {
	topic := strings.TrimSpace(in.Topic)
	if topic == "" {
		return Draft{}, errors.New("input.topic is empty")
	}
	plant := "TODO"
	if in.Plant != nil {
		plant = *in.Plant
	}
	findings := fmt.Sprintf("Recording each step's result before moving on lets %s resume where it stopped.", topic)
	switch {
	case ctx.Repair.Count > 0:
		ctx.Logf(sdk.LevelInfo, "repair pass %d: %s", ctx.Repair.Count, ctx.Repair.Reason)
	case plant != "":
		findings = plant + ": say what was found."
	}
	return Draft{
		Title: "A short report on " + topic,
		Sections: []Section{
			{"Summary", fmt.Sprintf("This report explains %s in a few paragraphs.", topic)},
			{"Background", fmt.Sprintf("Work that runs for hours meets crashes and restarts; %s keeps its progress.", topic)},
			{"Findings", findings},
			{"Risks", fmt.Sprintf("Steps may run twice after a crash, so the side effects of %s must be idempotent.", topic)},
		},
	}, nil
}

func main() { sdk.Run(draft) }
