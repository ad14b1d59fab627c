// Command hog is a Go plugin that keeps allocating until the Go runtime
// runs out of memory (it fails with "fatal error: out of memory" when the
// host refuses to grow linear memory).
//
// Build, from the module root:
//
//	GOOS=wasip1 GOARCH=wasm go build -o hog.wasm ./testdata/guests/go/hog
package main

import (
	"encoding/json"

	sdk "github.com/lhengine/lhengine/plugins/sdk/go"
)

var kept [][]byte

func main() {
	sdk.Run(func(ctx *sdk.Context, in json.RawMessage) (int, error) {
		for {
			b := make([]byte, 1<<20)
			for i := range b {
				b[i] = byte(i)
			}
			kept = append(kept, b)
		}
	})
}
