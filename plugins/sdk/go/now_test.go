package sdk_test

import (
	"bytes"
	"strings"
	"testing"
	"time"

	sdk "github.com/lhengine/lhengine/plugins/sdk/go"
)

// TestServeNow: Context.Now is the request's "now" (the time the attempt
// was leased), zero when the request has none.
func TestServeNow(t *testing.T) {
	for _, tc := range []struct{ stdin, want string }{
		{`{"abi":1,"input":null,"now":"2031-05-06T07:08:09.5Z"}`, `{"output":"2031-05-06T07:08:09.5Z"}` + "\n"},
		{`{"abi":1,"input":null}`, `{"output":"zero"}` + "\n"},
	} {
		var stdout, stderr bytes.Buffer
		sdk.Serve(strings.NewReader(tc.stdin), &stdout, &stderr, func(ctx *sdk.Context, _ any) (string, error) {
			if ctx.Now.IsZero() {
				return "zero", nil
			}
			return ctx.Now.Format(time.RFC3339Nano), nil
		})
		if stdout.String() != tc.want {
			t.Errorf("%s: got %s, want %s", tc.stdin, stdout.String(), tc.want)
		}
	}
}
