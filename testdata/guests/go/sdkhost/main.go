// Command sdkhost runs the Go SDK's log and heartbeat against the real host
// and reports what the SDK made of the host's answers (the capabilities are
// covered by ../caps). Modes of the input {"mode": ..., "n": N}:
//
//	heartbeat  N heartbeats; the output lists the status the SDK returned
//	           for each (0 for nil, else the sdk.Errno)
//	log        one Log of 2*LogMax bytes of "é" (the SDK must cut it to
//	           LogMax bytes at a rune boundary, or the host refuses it),
//	           then one Logf
//
// Build, from the module root:
//
//	GOOS=wasip1 GOARCH=wasm go build -o sdkhost.wasm ./testdata/guests/go/sdkhost
package main

import (
	"errors"
	"strings"

	sdk "github.com/lhengine/lhengine/plugins/sdk/go"
)

type input struct {
	Mode string `json:"mode"`
	N    int    `json:"n"`
}

func main() {
	sdk.Run(func(ctx *sdk.Context, in input) (any, error) {
		switch in.Mode {
		case "heartbeat":
			statuses := []int32{}
			for range in.N {
				err := ctx.Heartbeat()
				var st sdk.Errno
				if err != nil && !errors.As(err, &st) {
					return nil, err
				}
				statuses = append(statuses, int32(st))
			}
			return map[string]any{"heartbeats": statuses}, nil
		case "log":
			ctx.Log(sdk.LevelWarn, strings.Repeat("é", sdk.LogMax))
			ctx.Logf(sdk.LevelInfo, "step %s attempt %d", ctx.Step, ctx.Attempt)
			return map[string]any{"logged": true}, nil
		}
		return nil, errors.New("unknown mode")
	})
}
