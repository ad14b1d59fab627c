package engine_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lhengine/lhengine/ledger"
)

// TestUnitsBudgetPausesWorkAndARaiseFinishes: a fan-out of 20 under
// budget units = 7 (concurrency 4) pauses with exactly 7 units committed;
// Work returns; the usage is the same after the engine is opened again;
// a resume without a raise is refused; with units=+20 the task finishes,
// no committed unit having run twice.
func TestUnitsBudgetPausesWorkAndARaiseFinishes(t *testing.T) {
	t.Parallel()
	b := setup(t, `
task "audit" {
  budget {
    units = 7
  }
  step "each" {
    plugin      = "step.wasm"
    for_each    = range(20)
    concurrency = 4
    input       = { mode = "item" }
  }
}`)
	task := b.submit(t, nil)
	got := b.work(t, task.ID)
	require.Equal(t, ledger.Paused, got.Status)
	require.Equal(t, ledger.PauseBudget, got.Pause.Kind)
	require.Equal(t, "units", got.Pause.Name)
	done, _ := got.Progress()
	require.Equal(t, 7, done, "exactly the budget's units committed")
	require.Equal(t, 7, got.Attempts, "no unit started past the budget")

	b.reopen(t)
	got, err := b.e.Task(b.ctx, task.ID)
	require.NoError(t, err)
	require.Equal(t, int64(7), got.Budget.Units, "the usage is in the ledger")
	_, err = b.e.Resume(b.ctx, task.ID)
	require.ErrorIs(t, err, ledger.ErrBudgetReached)

	_, err = b.e.RaiseBudgets(b.ctx, task.ID, []string{"units=+20"}, "alice")
	require.NoError(t, err)
	_, err = b.e.Resume(b.ctx, task.ID)
	require.NoError(t, err)
	got = b.work(t, task.ID)
	require.Equal(t, ledger.Succeeded, got.Status)
	require.Equal(t, 20, got.Attempts, "each unit ran once")
	require.Equal(t, int64(20), got.Budget.Units)
}

// TestConsecutiveFailuresBudgetPauses: a step that keeps failing under
// consecutive_failures = 3 pauses after its third failure instead of
// using up its retries and failing the task.
func TestConsecutiveFailuresBudgetPauses(t *testing.T) {
	t.Parallel()
	b := setup(t, `
task "flaky" {
  budget {
    consecutive_failures = 3
  }
  step "a" {
    plugin = "step.wasm"
    input  = { mode = "fail_until", ok_at = 9 }
    retry {
      attempts = 10
      backoff  = "1ms"
    }
  }
}`)
	task := b.submit(t, nil)
	got := b.work(t, task.ID)
	require.Equal(t, ledger.Paused, got.Status)
	require.Equal(t, "consecutive_failures", got.Pause.Name)
	require.Equal(t, 3, got.Failures)
}
