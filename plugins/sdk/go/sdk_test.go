package sdk_test

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"

	sdk "github.com/lhengine/lhengine/plugins/sdk/go"
)

type in struct {
	Mode string `json:"mode"`
}

func handler(ctx *sdk.Context, in in) (map[string]any, error) {
	switch in.Mode {
	case "error":
		return nil, errors.New("it broke")
	case "repair":
		return nil, fmt.Errorf("checking: %w", sdk.NeedsRepair("missing section: Risks"))
	case "panic":
		panic("oh no")
	case "nil":
		return nil, nil
	}
	item := -1
	if ctx.Item != nil {
		item = ctx.Item.Index
	}
	ctx.Logf(sdk.LevelInfo, "ran %s", ctx.Step) // no-op off wasip1
	return map[string]any{"step": ctx.Step, "attempt": ctx.Attempt, "repairs": ctx.Repair.Count,
		"reason": ctx.Repair.Reason, "item": item, "task": ctx.TaskID + "/" + ctx.TaskName}, nil
}

func TestServe(t *testing.T) {
	cases := []struct {
		name, stdin, stdout string
		status              int
		stderr              string
	}{
		{
			name:   "output",
			stdin:  `{"abi":1,"task_id":"t","task_name":"n","step":"s","item":{"index":2,"key":"k","value":1},"attempt":3,"repair":{"count":1,"reason":"r"},"input":{"mode":"ok"}}`,
			stdout: `{"output":{"attempt":3,"item":2,"reason":"r","repairs":1,"step":"s","task":"t/n"}}` + "\n",
		},
		{
			name:   "no repair, no item, null input",
			stdin:  `{"abi":1,"step":"s","item":null,"attempt":1,"input":null}`,
			stdout: `{"output":{"attempt":1,"item":-1,"reason":"","repairs":0,"step":"s","task":"/"}}` + "\n",
		},
		{name: "nil output", stdin: `{"abi":1,"input":{"mode":"nil"}}`, stdout: `{"output":null}` + "\n"},
		{name: "error", stdin: `{"abi":1,"input":{"mode":"error"}}`, stdout: `{"error":"it broke"}` + "\n"},
		{name: "repair", stdin: `{"abi":1,"input":{"mode":"repair"}}`, stdout: `{"needs_repair":true,"reason":"missing section: Risks"}` + "\n"},
		{name: "panic", stdin: `{"abi":1,"input":{"mode":"panic"}}`, stdout: `{"error":"panic: oh no"}` + "\n", status: 1, stderr: "panic: oh no\n\ngoroutine"},
		{name: "bad envelope", stdin: `not json`, stdout: `{"error":"sdk: reading the request: invalid character 'o' in literal null (expecting 'u')"}` + "\n"},
		{name: "other abi", stdin: `{"abi":2}`, stdout: `{"error":"sdk: request is for ABI 2, this plugin speaks ABI 1"}` + "\n"},
		{name: "bad input", stdin: `{"abi":1,"input":{"mode":7}}`, stdout: `{"error":"sdk: decoding the input: json: cannot unmarshal number into Go struct field in.mode of type string"}` + "\n"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			status := sdk.Serve(strings.NewReader(tc.stdin), &stdout, &stderr, handler)
			if status != tc.status {
				t.Errorf("status %d, want %d", status, tc.status)
			}
			if stdout.String() != tc.stdout {
				t.Errorf("stdout\n got %s\nwant %s", stdout.String(), tc.stdout)
			}
			if !strings.HasPrefix(stderr.String(), tc.stderr) {
				t.Errorf("stderr %q, want prefix %q", stderr.String(), tc.stderr)
			}
		})
	}
}

// TestNativeDefaults: natively (a handler's unit test), Log discards and
// Heartbeat reports the lease held, as the package documents. How the SDK
// maps each status of the real host is tested in host_test.go (a fake host)
// and in engine/internal/guest (TestGoSDKHostCalls, the engine's host).
func TestNativeDefaults(t *testing.T) {
	var ctx sdk.Context
	ctx.Log(sdk.LevelError, strings.Repeat("é", sdk.LogMax))
	if err := ctx.Heartbeat(); err != nil {
		t.Fatalf("Heartbeat off wasip1: %v, want nil", err)
	}
	if !errors.Is(fmt.Errorf("wrapped: %w", sdk.ErrLeaseLost), sdk.ErrLeaseLost) {
		t.Fatal("Errno does not match through wrapping")
	}
	if got := sdk.Errno(-6).Error(); got != "lhengine: lease lost" {
		t.Fatal(got)
	}
	if got := sdk.Errno(-42).Error(); got != "lhengine: status -42" {
		t.Fatal(got)
	}
}
