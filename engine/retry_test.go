package engine_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lhengine/lhengine/engine"
	"github.com/lhengine/lhengine/fault"
	"github.com/lhengine/lhengine/internal/testgate"
	"github.com/lhengine/lhengine/ledger"
)

// TestRetryOfACancelledFanOutRunsOnlyTheItemsNotCommitted: a fan-out of
// counting gate items cancelled part-way, then retried, ends with every item
// committed once and its counter equal to the number of items.
func TestRetryOfACancelledFanOutRunsOnlyTheItemsNotCommitted(t *testing.T) {
	t.Parallel()
	const items, before = 12, 5
	g := testgate.New(t)
	b := setupGated(t, fmt.Sprintf(`
task "audit" {
  step "pages" {
    plugin      = "gate.wasm"
    for_each    = range(%d)
    concurrency = 3
    input       = { url = %q, count = "pages_audited" }
    http {
      allow = [%q]
    }
  }
}`, items, g.URL(), g.Host()))
	task := b.submit(t, nil)

	commits := make(chan *ledger.Task, items*2)
	work := func(ctx context.Context) <-chan error {
		worked := make(chan error, 1)
		go func() {
			worked <- b.e.Work(ctx, engine.WorkOptions{Task: task.ID, Concurrency: 3, ExitWhenIdle: true, LeaseFor: time.Hour,
				OnCommit: func(t *ledger.Task) { commits <- t }})
		}()
		return worked
	}
	worked := work(b.ctx)
	g.Release(before)
	for range before {
		select {
		case <-commits:
		case err := <-worked:
			t.Fatalf("Work returned (%v) before %d units committed", err, before)
		}
	}
	_, err := b.e.Cancel(b.ctx, task.ID, "enough for today")
	require.NoError(t, err)
	require.NoError(t, <-worked)
	got, err := b.e.Task(b.ctx, task.ID)
	require.NoError(t, err)
	require.Equal(t, ledger.Cancelled, got.Status)
	require.Equal(t, before, got.Steps[0].Done)
	require.Equal(t, int64(before), got.Counters["pages_audited"])
	// attempts counts each item's attempt records, and those that
	// committed an output.
	attempts := func() (all, committed map[int]int) {
		all, committed = map[int]int{}, map[int]int{}
		require.NoError(t, b.e.Read(func(r ledger.Reader) error {
			recs, err := r.Attempts(task.ID, 0)
			for _, a := range recs {
				all[a.Item]++
				if a.Output != nil {
					committed[a.Item]++
				}
			}
			return err
		}))
		return all, committed
	}
	_, kept := attempts()
	require.Len(t, kept, before)

	_, err = b.e.Retry(b.ctx, task.ID, "", "ana")
	require.NoError(t, err)
	g.Open()
	require.NoError(t, <-work(b.ctx))
	got, err = b.e.Task(b.ctx, task.ID)
	require.NoError(t, err)
	require.Equal(t, ledger.Succeeded, got.Status, got.Reason)
	require.Equal(t, map[string]int64{"pages_audited": items}, got.Counters, "every item counted once")
	all, committed := attempts()
	require.Len(t, committed, items)
	for item, n := range committed {
		require.Equal(t, 1, n, "item %d committed %d times", item, n)
	}
	for item := range kept {
		require.Equal(t, 1, all[item], "item %d, committed before the cancel, ran again", item)
	}
}

// TestARetryGivesTheStepItsWholeRetryBudget: a step with attempts = 2
// that always fails gets two attempts, and two more after a retry.
func TestARetryGivesTheStepItsWholeRetryBudget(t *testing.T) {
	t.Parallel()
	b := setup(t, `
task "flaky" {
  step "a" {
    plugin = "step.wasm"
    input  = { mode = "fail_until", ok_at = 99 }
    retry {
      attempts = 2
      backoff  = "1ms"
    }
  }
}`)
	task := b.submit(t, nil)
	got := b.work(t, task.ID)
	require.Equal(t, ledger.Failed, got.Status)
	require.Equal(t, 2, got.Attempts)
	_, err := b.e.Retry(b.ctx, task.ID, "", "ana")
	require.NoError(t, err)
	got = b.work(t, task.ID)
	require.Equal(t, ledger.Failed, got.Status)
	require.Equal(t, fault.PluginError, got.Failure.Kind)
	require.Equal(t, 4, got.Attempts, "two attempts before the retry, two after")
	require.Equal(t, 4, got.Failure.Attempt, "attempt numbers go on")
}
