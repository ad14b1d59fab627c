package sdk_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	sdk "github.com/lhengine/lhengine/plugins/sdk/go"
)

// TestServeEnvironment: Context.Environment is the request's
// "environment" (the task's environment facts the unit runs under), nil
// when the request has none.
func TestServeEnvironment(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ stdin, want string }{
		{`{"abi":1,"input":null,"environment":{"head":"4b825dc642cb6eb9a060e54bf8d69288fbee4904","config":"e3b0"}}`,
			`{"config":"e3b0","head":"4b825dc642cb6eb9a060e54bf8d69288fbee4904"}`},
		{`{"abi":1,"input":null,"environment":{}}`, `{}`},
		{`{"abi":1,"input":null}`, `null`},
	} {
		var stdout, stderr bytes.Buffer
		sdk.Serve(strings.NewReader(tc.stdin), &stdout, &stderr, func(ctx *sdk.Context, _ any) (map[string]string, error) {
			return ctx.Environment, nil
		})
		var res struct{ Output json.RawMessage }
		if err := json.Unmarshal(stdout.Bytes(), &res); err != nil {
			t.Fatalf("%s: result %q: %v", tc.stdin, stdout.String(), err)
		}
		if string(res.Output) != tc.want {
			t.Errorf("%s: got %s, want %s", tc.stdin, res.Output, tc.want)
		}
	}
}

// TestServeObjectiveAndConstraints: the request's objective and
// constraints reach the Context verbatim.
func TestServeObjectiveAndConstraints(t *testing.T) {
	t.Parallel()
	var stdout, stderr bytes.Buffer
	sdk.Serve(strings.NewReader(`{"abi":1,"input":null,"objective":"Audit every page","constraints":["never write to the site","ask  first"]}`),
		&stdout, &stderr, func(ctx *sdk.Context, _ any) (any, error) {
			return map[string]any{"o": ctx.Objective, "c": ctx.Constraints}, nil
		})
	var res struct{ Output json.RawMessage }
	if err := json.Unmarshal(stdout.Bytes(), &res); err != nil {
		t.Fatalf("result %q: %v", stdout.String(), err)
	}
	if want := `{"c":["never write to the site","ask  first"],"o":"Audit every page"}`; string(res.Output) != want {
		t.Errorf("got %s, want %s", res.Output, want)
	}
}
