package guest

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestAttemptClock: the guest's wall clock starts at the request's Now, in
// a fresh instance and in a reused one, and the same request reads the same
// time again; the envelope carries it as "now" (RFC 3339).
func TestAttemptClock(t *testing.T) {
	t.Parallel()
	now := time.Date(2031, 5, 6, 7, 8, 9, 123456789, time.UTC)
	env, err := json.Marshal(Request{TaskID: "t", Step: "s", Attempt: 1, Now: now})
	require.NoError(t, err)
	var wire map[string]any
	require.NoError(t, json.Unmarshal(env, &wire))
	require.Equal(t, "2031-05-06T07:08:09.123456789Z", wire["now"])

	for _, reuse := range []bool{true, false} {
		_, p := statelessPlugin(t, Config{NoInstanceReuse: !reuse})
		var first string
		for range 3 {
			req := statelessReq("t-clock", 2, 1, "env")
			req.Now = now
			res, err := p.Run(context.Background(), req, Limits{}, &testHost{})
			require.NoError(t, err)
			var out struct{ Now string }
			require.NoError(t, json.Unmarshal(res.Output, &out))
			got, err := time.Parse(time.RFC3339Nano, out.Now)
			require.NoError(t, err)
			require.False(t, got.Before(now), "reuse %v: the guest read %s, before the attempt's %s", reuse, got, now)
			require.Less(t, got.Sub(now), time.Second, "reuse %v: the clock starts at the attempt's time", reuse)
			if first == "" {
				first = out.Now
			}
			require.Equal(t, first, out.Now, "reuse %v: the same attempt reads the same time", reuse)
		}
	}
}
