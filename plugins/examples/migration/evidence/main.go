// Command evidence is the last step of the migration example: it writes
// what a reviewer needs to trust the migration as one JSON artifact,
// evidence.json: the files changed with their sha256, the checks, the
// approval of the deploy change (who decided, their note), and the HEAD
// commit the plan was made against beside the one the task ended at (the
// task's environment fact "head" now). Its output is the artifact's ref.
//
//	GOOS=wasip1 GOARCH=wasm go build -o evidence.wasm ./plugins/examples/migration/evidence
package main

import (
	"encoding/json"
	"errors"
	"fmt"

	sdk "github.com/lhengine/lhengine/plugins/sdk/go"
)

type renamed struct {
	File         string `json:"file"`
	Replacements int    `json:"replacements"`
	SHA256       string `json:"sha256"`
	Head         string `json:"head"`
}

type input struct {
	Plan struct {
		Head string `json:"head"`
	} `json:"plan"`
	Renamed []renamed `json:"renamed"`
	Check   struct {
		Passed bool `json:"passed"`
		Checks int  `json:"checks"`
	} `json:"check"`
	Deploy struct {
		File     string          `json:"file"`
		Diff     string          `json:"diff"`
		SHA256   string          `json:"sha256"`
		Approval json.RawMessage `json:"approval"`
	} `json:"deploy"`
}

// Evidence is the artifact's content.
type Evidence struct {
	Task         string          `json:"task"`
	HeadBefore   string          `json:"head_before"` // the commit the plan was made against
	HeadAfter    string          `json:"head_after"`  // the commit at the end
	ChecksPassed bool            `json:"checks_passed"`
	Checks       int             `json:"checks"`
	FilesChanged []renamed       `json:"files_changed"`
	Deploy       deployChange    `json:"deploy_config"`
	Approval     json.RawMessage `json:"approval"` // id, decision, decided_by, note
}

type deployChange struct {
	File   string `json:"file"`
	Diff   string `json:"diff"`
	SHA256 string `json:"sha256"`
}

type output struct {
	Evidence   string `json:"evidence"` // the artifact's ref
	HeadBefore string `json:"head_before"`
	HeadAfter  string `json:"head_after"`
}

func main() {
	sdk.Run(evidence)
}

func evidence(ctx *sdk.Context, in input) (output, error) {
	if !in.Check.Passed {
		return output{}, errors.New("input: the checks did not pass; no evidence for a migration that failed them")
	}
	if len(in.Deploy.Approval) == 0 {
		return output{}, errors.New("input: the deploy change carries no approval")
	}
	ev := Evidence{
		Task:         ctx.TaskID,
		HeadBefore:   in.Plan.Head,
		HeadAfter:    ctx.Environment["head"],
		ChecksPassed: in.Check.Passed,
		Checks:       in.Check.Checks,
		FilesChanged: in.Renamed,
		Deploy:       deployChange{File: in.Deploy.File, Diff: in.Deploy.Diff, SHA256: in.Deploy.SHA256},
		Approval:     in.Deploy.Approval,
	}
	data, err := json.MarshalIndent(ev, "", "  ")
	if err != nil {
		return output{}, err
	}
	ref, err := ctx.PutArtifact("evidence.json", "application/json", append(data, '\n'))
	if err != nil {
		return output{}, fmt.Errorf("keeping the evidence: %w", err)
	}
	return output{Evidence: ref.Ref, HeadBefore: ev.HeadBefore, HeadAfter: ev.HeadAfter}, nil
}
