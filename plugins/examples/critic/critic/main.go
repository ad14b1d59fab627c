// Command critic is the step the critic-after-draft policy inserts after
// each draft step: it reads the draft (the anchor step's output) and asks for
// a repair when a section still holds a placeholder or is empty, naming the
// first one it finds. Models leave "TODO" and "[citation needed]" behind more
// often than a downstream check for sections notices.
//
// The placeholders it looks for come from the policy's "markers" parameter
// (a list of strings) when the policy hands one, else DefaultMarkers.
//
// Build, from the module root:
//
//	GOOS=wasip1 GOARCH=wasm go build -o plugins/examples/critic/critic.wasm ./plugins/examples/critic/critic
package main

import (
	"errors"
	"fmt"
	"strings"

	sdk "github.com/lhengine/lhengine/plugins/sdk/go"
)

// DefaultMarkers are the placeholders looked for without a markers parameter.
var DefaultMarkers = []string{"TODO", "TBD", "XXX", "[citation needed]"}

// Input is the critic's input: the draft to check.
type Input struct {
	Draft struct {
		Title    string `json:"title"`
		Sections []struct {
			Heading string `json:"heading"`
			Body    string `json:"body"`
		} `json:"sections"`
	} `json:"draft"`
}

// Verdict is the critic's output when the draft passes.
type Verdict struct {
	OK       bool     `json:"ok"`
	Sections int      `json:"sections"`
	Markers  []string `json:"markers"`
}

func critic(ctx *sdk.Context, in Input) (Verdict, error) {
	markers := DefaultMarkers
	if ctx.Policy.Has("markers") {
		if err := ctx.Policy.Decode("markers", &markers); err != nil {
			return Verdict{}, fmt.Errorf("policy parameter markers: %w", err)
		}
	}
	if in.Draft.Title == "" {
		return Verdict{}, errors.New("input.draft has no title")
	}
	for _, s := range in.Draft.Sections {
		if strings.TrimSpace(s.Body) == "" {
			return Verdict{}, sdk.NeedsRepair(fmt.Sprintf("critic: section %q is empty", s.Heading))
		}
		for _, m := range markers {
			if strings.Contains(s.Body, m) {
				ctx.Logf(sdk.LevelWarn, "section %q holds placeholder %q", s.Heading, m)
				return Verdict{}, sdk.NeedsRepair(fmt.Sprintf("critic: section %q still holds the placeholder %q", s.Heading, m))
			}
		}
	}
	return Verdict{OK: true, Sections: len(in.Draft.Sections), Markers: markers}, nil
}

func main() { sdk.Run(critic) }
