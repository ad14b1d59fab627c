// Command agent is a verifier of the eval set testdata/evals/agent.hcl:
// lhengine eval runs it on a case's output (the agent example's output,
// {"answer": ..., "turns": N, ...}) with the case's variables, and it
// answers {"pass": bool, "reason": "..."}. An answer passes when it states
// the fact of every name of the facts map that the question asks about,
// and no fact of a name it does not.
//
// Build, from the module root:
//
//	GOOS=wasip1 GOARCH=wasm go build -o testdata/evals/verifiers/agent.wasm ./testdata/evals/verifiers/agent
package main

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	sdk "github.com/lhengine/lhengine/plugins/sdk/go"
)

// Input is what lhengine eval hands a verifier plugin: the case's
// variables as given (facts is the JSON text of the facts map).
type Input struct {
	Output struct {
		Answer string `json:"answer"`
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
	var facts map[string]string
	if err := json.Unmarshal([]byte(in.Vars["facts"]), &facts); err != nil {
		return Verdict{}, fmt.Errorf("vars.facts is not a JSON object of strings: %w", err)
	}
	question := in.Vars["question"]
	if question == "" {
		return Verdict{}, fmt.Errorf("vars.question is empty")
	}
	names := make([]string, 0, len(facts))
	for name := range facts {
		names = append(names, name)
	}
	sort.Strings(names)
	asked := 0
	for _, name := range names {
		stated := strings.Contains(in.Output.Answer, facts[name])
		switch {
		case strings.Contains(question, name) && !stated:
			return Verdict{Reason: fmt.Sprintf("the answer does not state %q", facts[name])}, nil
		case !strings.Contains(question, name) && stated:
			return Verdict{Reason: fmt.Sprintf("the answer states %q, which the question does not ask", facts[name])}, nil
		}
		if stated {
			asked++
		}
	}
	if asked == 0 {
		return Verdict{Reason: "the question asks about no name of the facts map"}, nil
	}
	return Verdict{Pass: true}, nil
}

func main() { sdk.Run(verify) }
