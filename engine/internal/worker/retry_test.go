package worker

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lhengine/lhengine/internal/testwait"
	"github.com/lhengine/lhengine/ledger"
)

// TestTheRetryBudgetStartsAgainAfterARepair: a unit entered again by a
// repair gets every attempt of its step's retry block, although its attempt
// numbers go on from the pass before.
func TestTheRetryBudgetStartsAgainAfterARepair(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	b := setup(t)
	// The fetch is refused (the step has no http block): every attempt fails.
	id := b.submit(t, "budget", `
task "budget" {
  step "one" {
    plugin = "unit.wasm"
    input  = { url = "http://127.0.0.1:9/refused" }
    retry {
      attempts = 2
      backoff  = "0s"
    }
  }
}
`)
	w := b.worker("w", id, func(c *Config) { c.ExitWhenIdle = true })
	// The first pass ends in a repair, as a verify step's answer would.
	c, err := b.st.Claim(ctx, ledger.ClaimRequest{Owner: w.Owner(), Max: 1, LeaseFor: lease, Task: id})
	require.NoError(t, err)
	require.Len(t, c.Leases, 1)
	_, err = b.st.Commit(ctx, ledger.Result{Lease: c.Leases[0], Repair: &ledger.Repair{RestartFrom: 0, Max: 3, Reason: "again"}})
	require.NoError(t, err)

	errc, _ := start(t, ctx, w)
	require.NoError(t, testwait.Receive(t, ctx, errc, "Run"))
	require.NoError(t, b.st.Read(func(r ledger.Reader) error {
		task, err := r.Task(id)
		require.NoError(t, err)
		require.Equal(t, ledger.Failed, task.Status)
		require.Equal(t, 2, task.Failures, "the second pass got both attempts of its budget")
		require.Equal(t, 3, task.Failure.Attempt, "attempts 2 and 3, after the first pass's 1")
		return nil
	}))
}
