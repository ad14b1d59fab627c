package engine_test

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lhengine/lhengine/ledger"
)

// allowTask is a 100-item fan-out whose items 3, 50 and 77 fail their two
// attempts (the pipeline guest fails while attempt < ok_at), and a step
// after it that counts the outputs it sees.
func allowTask(allow string) string {
	return fmt.Sprintf(`
task "audit" {
  step "pages" {
    plugin         = "step.wasm"
    for_each       = range(100)
    concurrency    = 8
    allow_failures = %s
    input          = { mode = "fail_until", ok_at = contains([3, 50, 77], each.value) ? 3 : 1, page = each.value }
    retry {
      attempts = 2
      backoff  = "0s"
    }
  }
  step "count" {
    plugin = "step.wasm"
    input  = { mode = "echo", n = length(step.pages.output), pages = [for o in step.pages.output : o.page] }
  }
}`, allow)
}

// TestAllowFailuresToleratesFailedItems: with allow_failures = 5, 3 failed
// items of 100 let the step complete; they are listed with their kind and
// reason, the next step sees the 97 outputs of the others, and a retry runs
// only the 3 (and the step after them) and ends with 100.
func TestAllowFailuresToleratesFailedItems(t *testing.T) {
	t.Parallel()
	b := setup(t, allowTask("5"))
	task := b.submit(t, nil)
	got := b.work(t, task.ID)
	require.Equal(t, ledger.Succeeded, got.Status, got.Reason)
	require.Equal(t, 3, got.Steps[0].Failed)
	require.Equal(t, 97, got.Steps[0].Done)
	var out struct {
		N     int   `json:"n"`
		Pages []int `json:"pages"`
	}
	require.NoError(t, json.Unmarshal(got.Output, &out))
	require.Equal(t, 97, out.N, "the next step sees the outputs of the items that did not fail")
	require.NotContains(t, out.Pages, 3)
	require.NotContains(t, out.Pages, 50)
	require.Contains(t, out.Pages, 51)

	var failed []ledger.FailedItem
	require.NoError(t, b.e.Read(func(r ledger.Reader) error {
		var err error
		failed, err = r.FailedItems(task.ID)
		return err
	}))
	require.Len(t, failed, 3)
	for i, want := range []int{3, 50, 77} {
		f := failed[i]
		require.Equal(t, "pages", f.Step)
		require.Equal(t, want, f.Item)
		require.JSONEq(t, fmt.Sprint(want), string(f.Value))
		require.Equal(t, 2, f.Attempt)
		require.Equal(t, "plugin_error", string(f.Failure.Kind))
		require.Contains(t, f.Failure.Message, "attempt 2 fails on purpose")
	}
	attemptsBefore := got.Attempts
	require.Equal(t, 97+3*2+1, attemptsBefore)

	_, err := b.e.Retry(b.ctx, task.ID, "", "ana")
	require.NoError(t, err)
	got = b.work(t, task.ID)
	require.Equal(t, ledger.Succeeded, got.Status, got.Reason)
	require.Equal(t, attemptsBefore+3+1, got.Attempts, "the retry ran the 3 failed items and the step after them, nothing else")
	require.Zero(t, got.Steps[0].Failed)
	require.NoError(t, json.Unmarshal(got.Output, &out))
	require.Equal(t, 100, out.N)
	require.NoError(t, b.e.Read(func(r ledger.Reader) error {
		var err error
		failed, err = r.FailedItems(task.ID)
		return err
	}))
	require.Empty(t, failed)
}

// TestAllowFailuresPercentRoundsDown: "2%" of 100 items allows 2, so the
// third failed item fails the task.
func TestAllowFailuresPercentRoundsDown(t *testing.T) {
	t.Parallel()
	b := setup(t, allowTask(`"2%"`))
	task := b.submit(t, nil)
	got := b.work(t, task.ID)
	require.Equal(t, ledger.Failed, got.Status)
	require.Contains(t, got.Reason, "(3 items failed, 2 allowed)")
	require.Equal(t, 2, got.Steps[0].Failed)
}
