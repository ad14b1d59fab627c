package sdk_test

import (
	"fmt"
	"os"
	"strings"

	sdk "github.com/lhengine/lhengine/plugins/sdk/go"
)

// Input and Output are a step's own types; the SDK decodes the request's
// input into Input and encodes Output as the step's output.
type Input struct {
	Topic string `json:"topic"`
}

type Output struct {
	Title string `json:"title"`
	Pass  int    `json:"pass"`
}

// Draft is a step handler: it may log, heartbeat during long work, ask for
// a repair, or fail.
func Draft(ctx *sdk.Context, in Input) (Output, error) {
	if in.Topic == "" {
		return Output{}, sdk.NeedsRepair("no topic given")
	}
	ctx.Logf(sdk.LevelInfo, "drafting %q (attempt %d)", in.Topic, ctx.Attempt)
	if err := ctx.Heartbeat(); err != nil {
		return Output{}, err // the lease is lost: stop
	}
	return Output{Title: "On " + in.Topic, Pass: ctx.Repair.Count + 1}, nil
}

// A plugin's main is one line: sdk.Run(Draft). Serve does the same with
// explicit streams, which is how a handler is tested natively.
func ExampleServe() {
	stdin := strings.NewReader(`{"abi":1,"task_id":"t1","task_name":"report","step":"draft","item":null,"attempt":1,"input":{"topic":"durable execution"}}`)
	status := sdk.Serve(stdin, os.Stdout, os.Stderr, Draft)
	fmt.Println("exit status", status)
	// Output:
	// {"output":{"title":"On durable execution","pass":1}}
	// exit status 0
}

func ExampleNeedsRepair() {
	stdin := strings.NewReader(`{"abi":1,"step":"draft","attempt":1,"input":{}}`)
	sdk.Serve(stdin, os.Stdout, os.Stderr, Draft)
	// Output:
	// {"needs_repair":true,"reason":"no topic given"}
}
