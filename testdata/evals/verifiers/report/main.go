// Command report is a verifier of the eval set testdata/evals/critic.hcl:
// lhengine eval runs it on a case's output (the report example's finalize
// output, {"text": ..., "words": N}) and it answers {"pass": bool,
// "reason": "..."}. A report passes when its text has every section the
// report example requires and no placeholder is left in it.
//
// Build, from the module root:
//
//	GOOS=wasip1 GOARCH=wasm go build -o testdata/evals/verifiers/report.wasm ./testdata/evals/verifiers/report
package main

import (
	"fmt"
	"strings"

	sdk "github.com/lhengine/lhengine/plugins/sdk/go"
)

// Sections are the headings a finished report has.
var Sections = []string{"Summary", "Background", "Findings", "Risks"}

// Placeholders are what an unfinished report still holds.
var Placeholders = []string{"TODO", "TBD", "XXX", "[citation needed]"}

// Input is what lhengine eval hands a verifier plugin.
type Input struct {
	Output struct {
		Text string `json:"text"`
	} `json:"output"`
	Case string            `json:"case"`
	Vars map[string]string `json:"vars"`
}

// Verdict is a verifier's answer.
type Verdict struct {
	Pass   bool   `json:"pass"`
	Reason string `json:"reason,omitempty"`
}

func verify(ctx *sdk.Context, in Input) (Verdict, error) {
	for _, s := range Sections {
		if !strings.Contains(in.Output.Text, "\n## "+s+"\n") {
			return Verdict{Reason: fmt.Sprintf("section %q is missing", s)}, nil
		}
	}
	for _, p := range Placeholders {
		if strings.Contains(in.Output.Text, p) {
			return Verdict{Reason: fmt.Sprintf("the report still holds %q", p)}, nil
		}
	}
	return Verdict{Pass: true}, nil
}

func main() { sdk.Run(verify) }
