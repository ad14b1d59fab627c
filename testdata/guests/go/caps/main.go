// Command caps is the Go half of the capability conformance suite (the C
// half is ../../c/caps.c, which lists the modes). Both must make the same
// host calls and give the same output.
//
// Build, from the module root:
//
//	GOOS=wasip1 GOARCH=wasm go build -o caps.wasm ./testdata/guests/go/caps
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"unsafe"

	sdk "github.com/lhengine/lhengine/plugins/sdk/go"
)

// The SDK fetches pending results itself; the guest asks once more to see
// that nothing is left pending.
//
//go:wasmimport lhengine_v1 result
func lhResult(outPtr unsafe.Pointer, outCap int32) int32

type input struct {
	Mode string `json:"mode"`
	N    int    `json:"n"`
}

// status is [status, message] of a refused call.
func status(err error) []any {
	var he *sdk.HostError
	if !errors.As(err, &he) {
		return []any{0, fmt.Sprint(err)}
	}
	return []any{int32(he.Status), he.Message}
}

func main() {
	sdk.Run(func(ctx *sdk.Context, in input) (any, error) {
		switch in.Mode {
		case "kv":
			if err := ctx.KVPut("cursor", map[string]int{"page": 3}); err != nil {
				return nil, err
			}
			var v json.RawMessage
			found, err := ctx.KVGet("cursor", &v)
			if err != nil {
				return nil, err
			}
			missing, err := ctx.KVGet("missing", nil)
			if err != nil {
				return nil, err
			}
			return map[string]any{"found": found, "value": v, "missing": missing}, nil
		case "big":
			resp, err := ctx.Fetch(sdk.FetchRequest{Method: "GET", URL: "http://example.test/big"})
			if err != nil {
				return nil, err
			}
			buf := make([]byte, 16)
			again := lhResult(unsafe.Pointer(&buf[0]), int32(len(buf)))
			return map[string]any{"status": resp.Status, "body_len": len(resp.Body), "again": again}, nil
		case "artifact":
			data := make([]byte, 2<<20)
			for i := range data {
				data[i] = byte(uint32(i)*31 + uint32(i)>>11)
			}
			ref, err := ctx.PutArtifact("data.bin", "application/octet-stream", data)
			if err != nil {
				return nil, err
			}
			back, err := ctx.ReadArtifact(ref.Ref)
			if err != nil {
				return nil, err
			}
			_, uerr := ctx.ReadArtifact("sha256:0000")
			return map[string]any{"ref": ref.Ref, "size": ref.Size, "same": bytes.Equal(data, back), "unknown": status(uerr)}, nil
		case "refused":
			out := map[string]any{}
			out["unknown"] = status(ctx.Call("mail.send", map[string]any{}, nil))
			_, err := ctx.CallRaw("kv.get", []byte("not json"))
			out["invalid"] = status(err)
			out["denied"] = status(ctx.KVPut("denied", 1))
			_, err = ctx.KVGet("x", nil)
			out["ok"] = err == nil
			out["after_ok"] = ctx.LastError()
			return out, nil
		case "effect":
			req := sdk.HTTPEffect{Method: "POST", URL: "http://127.0.0.1:8080/mail",
				Headers: map[string]string{"Content-Type": "application/json"}, Body: "{}"}
			var res sdk.HTTPEffectResult
			r1, err := ctx.EffectReplayed("send-1", sdk.EffectHTTP, req, &res)
			if err != nil {
				return nil, err
			}
			r2, err := ctx.EffectReplayed("send-1", sdk.EffectHTTP, req, nil)
			if err != nil {
				return nil, err
			}
			progress := ctx.Count("pages", 1) == nil && ctx.Note(sdk.NoteFinding, "two pages") == nil
			return map[string]any{"status": res.Status, "body": res.Body, "replayed": []bool{r1, r2}, "progress": progress}, nil
		case "bench":
			ok := 0
			for range in.N {
				if found, err := ctx.KVGet("cursor", nil); err == nil && found {
					ok++
				}
			}
			return ok, nil
		}
		return nil, errors.New("unknown mode")
	})
}
