package engine_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lhengine/lhengine/engine"
	"github.com/lhengine/lhengine/internal/testgate"
	"github.com/lhengine/lhengine/internal/testwasm"
	"github.com/lhengine/lhengine/ledger"
)

// TestCancelStopsRunningAttemptsAtOnce: attempts blocked in a fetch that
// never answers stop as soon as their task is cancelled in the same
// engine, not at their next lease renewal (the lease here is an hour).
func TestCancelStopsRunningAttemptsAtOnce(t *testing.T) {
	t.Parallel()
	g := testgate.New(t)
	gate := testwasm.BuildC(t, filepath.Join(testwasm.ModuleRoot(t), "testdata/guests/c/gate.c"))
	b := setup(t, `task "gated" {`+g.Step("each", "gate.wasm", 10, 4)+`}`)
	wasm, err := os.ReadFile(gate)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(b.dir, "gate.wasm"), wasm, 0o644))
	task, _, err := b.e.Submit(b.ctx, filepath.Join(b.dir, "task.hcl"), engine.SubmitOptions{})
	require.NoError(t, err)

	worked := make(chan error, 1)
	go func() {
		worked <- b.e.Work(b.ctx, engine.WorkOptions{Task: task.ID, Concurrency: 4, ExitWhenIdle: true, LeaseFor: time.Hour})
	}()
	for range 4 {
		select { // four attempts are in the fetch, held by the gate
		case <-g.Arrived():
		case err := <-worked:
			got, _ := b.e.Task(b.ctx, task.ID)
			t.Fatalf("Work returned (%v) before the gate was reached: task %s %s %v", err, got.Status, got.Reason, got.Failure)
		}
	}
	_, err = b.e.Cancel(b.ctx, task.ID, "enough")
	require.NoError(t, err)
	require.NoError(t, <-worked, "Work returns without waiting for the hour-long leases")
	got, err := b.e.Task(b.ctx, task.ID)
	require.NoError(t, err)
	require.Equal(t, ledger.Cancelled, got.Status)
	done, _ := got.Progress()
	require.Zero(t, done, "no attempt held by the gate committed")
}
