package engine_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lhengine/lhengine/ledger"
)

// TestCancelStopsRunningAttemptsAtOnce: attempts blocked in a fetch that
// never answers stop as soon as their task is cancelled in the same
// engine, not at their next lease renewal (the lease here is an hour).
func TestCancelStopsRunningAttemptsAtOnce(t *testing.T) {
	t.Parallel()
	b := setupInFlight(t)
	_, err := b.e.Cancel(b.ctx, b.id, "enough")
	require.NoError(t, err)
	require.NoError(t, <-b.worked, "Work returns without waiting for the hour-long leases")
	got, err := b.e.Task(b.ctx, b.id)
	require.NoError(t, err)
	require.Equal(t, ledger.Cancelled, got.Status)
	done, _ := got.Progress()
	require.Zero(t, done, "no attempt held by the gate committed")
}
