package guest

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lhengine/lhengine/ledger"
)

// TestRefusedHostCallsAreLogged: a host call refused for a quota, a budget
// or the store's disk space leaves a line in the attempt's own log, so a
// plugin that ignores the status still leaves a trace.
func TestRefusedHostCallsAreLogged(t *testing.T) {
	t.Parallel()
	mod := memoryModule(t)
	require.True(t, mod.Memory().Write(0, []byte(`kv.put{"key":"a","value":1}`)))
	cases := []struct {
		err  error
		line string
	}{
		{fmt.Errorf("kv.put: %w", ledger.ErrNoSpace), "[warn] host failed call kv.put: kv.put: no space left on device"},
		{&HostError{Status: StatusBudget, Message: "kv quota"}, "[warn] host refused call kv.put: kv quota"},
		{&HostError{Status: StatusTooLarge, Message: "value over the quota"}, "[warn] host refused call kv.put: value over the quota"},
	}
	for _, tc := range cases {
		att := &attempt{host: &errHost{err: tc.err}, log: newLogBuffer(1 << 10), cancel: func(error) {}}
		rc := callDirect(context.Background(), att, mod, "call", 0, 6, 6, 21, 100, 100)
		require.Negative(t, rc)
		require.Contains(t, string(att.log.Bytes()), tc.line)
	}
}
