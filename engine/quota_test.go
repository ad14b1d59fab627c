package engine_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lhengine/lhengine/fault"
	"github.com/lhengine/lhengine/ledger"
)

// TestOutputQuotaOfTheLimitsBlock: the task file's limits.output_bytes
// reaches the store; the step whose output does not fit fails with kind
// budget, not retried.
func TestOutputQuotaOfTheLimitsBlock(t *testing.T) {
	t.Parallel()
	b := setup(t, `
task "outputs" {
  limits {
    output_bytes = 100
  }
  step "a" {
    plugin = "step.wasm"
    input  = { mode = "echo", text = "0123456789012345678901234567890123456789" }
  }
  step "b" {
    plugin = "step.wasm"
    input  = { mode = "echo", text = "0123456789012345678901234567890123456789" }
    retry {
      attempts = 3
      backoff  = "1ms"
    }
  }
}`)
	task := b.submit(t, nil)
	got := b.work(t, task.ID)
	require.Equal(t, ledger.Failed, got.Status)
	require.Equal(t, fault.Budget, got.Failure.Kind)
	require.Equal(t, "b", got.Failure.Step)
	require.Contains(t, got.Failure.Message, "output_bytes quota is exhausted")
	require.Equal(t, 2, got.Attempts, "a quota refusal is not retried")
	var u ledger.Usage
	require.NoError(t, b.e.Read(func(r ledger.Reader) (err error) { u, err = r.Usage(task.ID); return err }))
	require.Equal(t, int64(len(`{"mode":"echo","text":"0123456789012345678901234567890123456789"}`)), u.Outputs)
}
