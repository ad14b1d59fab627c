// Command finalize is the last step of the report example: it assembles
// the verified draft into the final text, with its word count.
//
// Build, from the module root:
//
//	GOOS=wasip1 GOARCH=wasm go build -o plugins/examples/report/finalize.wasm ./plugins/examples/report/finalize
package main

import (
	"errors"
	"strings"

	sdk "github.com/lhengine/lhengine/plugins/sdk/go"
)

// Input is the finalize step's input: the draft and verify's verdict.
type Input struct {
	Draft struct {
		Title    string `json:"title"`
		Sections []struct {
			Heading string `json:"heading"`
			Body    string `json:"body"`
		} `json:"sections"`
	} `json:"draft"`
	Verdict struct {
		OK bool `json:"ok"`
	} `json:"verdict"`
}

// Report is the finalize step's output.
type Report struct {
	Text  string `json:"text"`
	Words int    `json:"words"`
}

func finalize(ctx *sdk.Context, in Input) (Report, error) {
	if !in.Verdict.OK {
		return Report{}, errors.New("the draft was not verified")
	}
	var b strings.Builder
	b.WriteString("# " + in.Draft.Title + "\n")
	for _, s := range in.Draft.Sections {
		b.WriteString("\n## " + s.Heading + "\n\n" + s.Body + "\n")
	}
	text := b.String()
	return Report{Text: text, Words: len(strings.Fields(text))}, nil
}

func main() { sdk.Run(finalize) }
