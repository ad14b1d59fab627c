package guest

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lhengine/lhengine/internal/testwasm"
)

// TestLogPassthroughIsCapped: a guest logging 2,000 messages of 4 KiB
// (testdata/guests/c/quota.c, mode log) reaches the Host's Log with 1 MiB
// of them (DefaultLogPassthrough, for a Host that sets no cap), then one
// notice, then nothing.
func TestLogPassthroughIsCapped(t *testing.T) {
	t.Parallel()
	p := loadAs(t, sharedRuntime(t), "quota", testwasm.CGuest(t, "quota"))
	h := &testHost{}
	res, err := p.Run(context.Background(), Request{Step: "s", Attempt: 1, Input: json.RawMessage(`{"mode":"log"}`)}, Limits{}, h)
	require.NoError(t, err)
	require.JSONEq(t, `{"ok":2000,"status":0,"error":""}`, string(res.Output))
	h.mu.Lock()
	defer h.mu.Unlock()
	require.Len(t, h.logs, DefaultLogPassthrough/4096+1)
	require.Equal(t, "warn: log passthrough suppressed after 1048576 bytes", h.logs[len(h.logs)-1])
	require.LessOrEqual(t, len(res.Log), DefaultMaxStderr+128, "the attempt's own log stays bounded apart")
}
