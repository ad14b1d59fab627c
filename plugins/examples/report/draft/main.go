// Command draft is the first step of the report example: it writes the
// sections of a short report on the input's topic.
//
// The first pass leaves out the "Risks" section, which verify asks to be
// repaired; when the task comes back here (ctx.Repair.Count > 0) the draft
// includes it. The text is deterministic.
//
// Build, from the module root:
//
//	GOOS=wasip1 GOARCH=wasm go build -o plugins/examples/report/draft.wasm ./plugins/examples/report/draft
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
}

// Section is one headed part of the report.
type Section struct {
	Heading string `json:"heading"`
	Body    string `json:"body"`
}

// Draft is the draft step's output and verify's input.
type Draft struct {
	Title    string    `json:"title"`
	Sections []Section `json:"sections"`
}

func draft(ctx *sdk.Context, in Input) (Draft, error) {
	topic := strings.TrimSpace(in.Topic)
	if topic == "" {
		return Draft{}, errors.New("input.topic is empty")
	}
	if ctx.Repair.Count > 0 {
		ctx.Logf(sdk.LevelInfo, "repair pass %d: %s", ctx.Repair.Count, ctx.Repair.Reason)
	}
	d := Draft{
		Title: "A short report on " + topic,
		Sections: []Section{
			{"Summary", fmt.Sprintf("This report explains %s in a few paragraphs.", topic)},
			{"Background", fmt.Sprintf("Work that runs for hours meets crashes and restarts; %s keeps its progress.", topic)},
			{"Findings", fmt.Sprintf("Recording each step's result before moving on lets %s resume where it stopped.", topic)},
		},
	}
	if ctx.Repair.Count > 0 {
		d.Sections = append(d.Sections, Section{"Risks",
			fmt.Sprintf("Steps may run twice after a crash, so the side effects of %s must be idempotent.", topic)})
	}
	ctx.Logf(sdk.LevelInfo, "drafted %d sections", len(d.Sections))
	return d, nil
}

func main() { sdk.Run(draft) }
