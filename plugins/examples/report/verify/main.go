// Command verify is the second step of the report example: it checks that
// the draft has every required section and asks for a repair naming the
// first one missing.
//
// Build, from the module root:
//
//	GOOS=wasip1 GOARCH=wasm go build -o plugins/examples/report/verify.wasm ./plugins/examples/report/verify
package main

import (
	"errors"
	"strings"

	sdk "github.com/lhengine/lhengine/plugins/sdk/go"
)

// Required are the sections a report must have, in order.
var Required = []string{"Summary", "Background", "Findings", "Risks"}

// Draft is the draft step's output.
type Draft struct {
	Title    string `json:"title"`
	Sections []struct {
		Heading string `json:"heading"`
		Body    string `json:"body"`
	} `json:"sections"`
}

// Verdict is the verify step's output.
type Verdict struct {
	OK      bool     `json:"ok"`
	Checked []string `json:"checked"`
	Words   int      `json:"words"`
}

func verify(ctx *sdk.Context, d Draft) (Verdict, error) {
	if d.Title == "" {
		return Verdict{}, errors.New("draft has no title")
	}
	have := map[string]bool{}
	words := 0
	for _, s := range d.Sections {
		if strings.TrimSpace(s.Body) != "" {
			have[s.Heading] = true
		}
		words += len(strings.Fields(s.Body))
	}
	for _, h := range Required {
		if !have[h] {
			ctx.Logf(sdk.LevelWarn, "section %q is missing", h)
			return Verdict{}, sdk.NeedsRepair("missing section: " + h)
		}
	}
	return Verdict{OK: true, Checked: Required, Words: words}, nil
}

func main() { sdk.Run(verify) }
