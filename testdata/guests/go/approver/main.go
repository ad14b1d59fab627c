// Command approver asks a person through approval.request before it
// writes its answer: the subject is the text of the file named by the
// input's "subject_file" under the step's mount "cfg" (so a test can
// change it between a decision and the run). Its output is the decision.
//
// Build, from the module root:
//
//	GOOS=wasip1 GOARCH=wasm go build -o approver.wasm ./testdata/guests/go/approver
package main

import (
	"os"

	sdk "github.com/lhengine/lhengine/plugins/sdk/go"
)

type input struct {
	SubjectFile string `json:"subject_file"`
	ExpiresIn   string `json:"expires_in"`
}

func main() {
	sdk.Run(func(ctx *sdk.Context, in input) (any, error) {
		b, err := os.ReadFile("/mnt/cfg/" + in.SubjectFile)
		if err != nil {
			return nil, err
		}
		d, err := ctx.RequestApproval(sdk.ApprovalRequest{Prompt: "Apply this config?", Subject: string(b), ExpiresIn: in.ExpiresIn})
		if err != nil {
			return nil, err
		}
		return d, nil
	})
}
