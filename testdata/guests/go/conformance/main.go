// Command conformance is the Go half of the guest conformance suite (the C
// half is ../../c/conformance.c). Both must give identical classified
// results; see that file for the behaviours.
//
// Build, from the module root:
//
//	GOOS=wasip1 GOARCH=wasm go build -o conformance.wasm ./testdata/guests/go/conformance
package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"

	sdk "github.com/lhengine/lhengine/plugins/sdk/go"
)

type input struct {
	Mode string `json:"mode"`
}

func main() {
	sdk.Run(func(ctx *sdk.Context, raw json.RawMessage) (any, error) {
		var in input
		_ = json.Unmarshal(raw, &in) // a non-object input has no mode
		switch in.Mode {
		case "echo":
			return map[string]any{
				"input":   raw,
				"step":    ctx.Step,
				"attempt": ctx.Attempt,
				"item":    ctx.Item,
			}, nil
		case "error":
			return nil, errors.New("requested error")
		case "repair":
			return nil, sdk.NeedsRepair("requested repair")
		case "log":
			ctx.Logf(sdk.LevelInfo, "hello from %s", "guest")
			lease := "ok"
			if ctx.Heartbeat() != nil {
				lease = "lost"
			}
			return map[string]any{"logged": true, "lease": lease}, nil
		case "exit3":
			fmt.Fprintln(os.Stderr, "exit3: failing on purpose")
			os.Exit(3)
		}
		return nil, errors.New("unknown mode")
	})
}
