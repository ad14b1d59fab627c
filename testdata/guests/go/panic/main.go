// Command panic is a Go plugin whose handler panics; the SDK must turn that
// into {"error":"panic: ..."} and exit status 1.
//
// Build, from the module root:
//
//	GOOS=wasip1 GOARCH=wasm go build -o panic.wasm ./testdata/guests/go/panic
package main

import (
	"encoding/json"

	sdk "github.com/lhengine/lhengine/plugins/sdk/go"
)

func main() {
	sdk.Run(func(ctx *sdk.Context, in json.RawMessage) (json.RawMessage, error) {
		panic("handler gave up")
	})
}
