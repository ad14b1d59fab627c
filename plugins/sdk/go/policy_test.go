package sdk

import (
	"bytes"
	"strings"
	"testing"
)

func TestPolicyParametersReachTheHandler(t *testing.T) {
	t.Parallel()
	req := `{"abi":1,"task_id":"t","task_name":"n","step":"draft","item":null,"attempt":1,"input":{},` +
		`"policy":{"single_tool":true,"few_shot":"examples/v2","reset_every":25,"odd":"x"}}`
	var got Policy
	var stdout, stderr bytes.Buffer
	status := Serve(strings.NewReader(req), &stdout, &stderr, func(ctx *Context, _ map[string]any) (string, error) {
		got = ctx.Policy
		return "ok", nil
	})
	if status != 0 {
		t.Fatalf("status %d: %s", status, stderr.String())
	}
	if !got.Bool("single_tool") || got.String("few_shot") != "examples/v2" || got.Int("reset_every", 0) != 25 {
		t.Fatalf("parameters not decoded: %v", got)
	}
	if got.Bool("odd") || got.Int("odd", 7) != 7 || got.Int("absent", 3) != 3 || got.Has("absent") || got.String("reset_every") != "" {
		t.Fatalf("absent or mistyped parameters must give the zero value or the default: %v", got)
	}
	var n int
	if err := got.Decode("absent", &n); err != nil || n != 0 {
		t.Fatalf("Decode of an absent parameter: %v, %d", err, n)
	}
}

func TestNoPolicyIsEmpty(t *testing.T) {
	t.Parallel()
	req := `{"abi":1,"task_id":"t","task_name":"n","step":"s","item":null,"attempt":1,"input":null}`
	var stdout, stderr bytes.Buffer
	Serve(strings.NewReader(req), &stdout, &stderr, func(ctx *Context, _ any) (bool, error) {
		if ctx.Policy.Has("single_tool") || ctx.Policy.Bool("single_tool") {
			t.Errorf("a request without policy has no parameters")
		}
		return true, nil
	})
}
