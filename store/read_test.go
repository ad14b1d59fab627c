package store

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lhengine/lhengine/fault"
	"github.com/lhengine/lhengine/ledger"
	"github.com/lhengine/lhengine/store/internal/kv"
)

// TestStepOutputReadsTheCommittedAttemptOfEachUnit: a fan-out step's output
// holds each unit's committed attempt, not an attempt that failed before it;
// a committed attempt whose record is missing makes the read fail rather
// than return a shorter list or the failed attempt's record.
func TestStepOutputReadsTheCommittedAttemptOfEachUnit(t *testing.T) {
	t.Parallel()
	b := setup(t, fanOutPlanner(3))
	task := b.submit(t, []ledger.StepState{{Name: "each", FanOut: true, Limit: 3}})
	c, err := b.s.Claim(b.ctx, ledger.ClaimRequest{Owner: b.s.Owner("w"), Max: 3})
	require.NoError(t, err)
	require.Len(t, c.Leases, 3)
	for _, l := range c.Leases {
		if l.Item == 1 {
			_, err := b.s.Commit(b.ctx, ledger.Result{Lease: l, Failure: &ledger.Failure{Kind: fault.Trap, Message: "boom"}, RetryAt: b.clock.Now()})
			require.NoError(t, err)
			continue
		}
		b.done(t, l, fmt.Sprintf(`"out-%d"`, l.Item))
	}
	l := b.claim1(t, "w")
	require.Equal(t, 1, l.Item)
	b.done(t, l, `"out-1-again"`)

	var committed int
	require.NoError(t, b.s.Read(func(r ledger.Reader) error {
		out, err := r.StepOutput(task.ID, 0)
		require.NoError(t, err)
		require.JSONEq(t, `["out-0","out-1-again","out-2"]`, string(out))
		attempts, err := r.Attempts(task.ID, 0)
		require.NoError(t, err)
		require.Len(t, attempts, 4, "the failed attempt is recorded too")
		units, err := r.Units(task.ID, 0)
		require.NoError(t, err)
		committed = units[1].Committed
		out, err = r.StepOutputLimited(mustTask(t, b, task.ID), 0, 10)
		require.ErrorIs(t, err, ledger.ErrTooLarge, "the limit is checked as outputs are read")
		require.Nil(t, out)
		return nil
	}))

	// Item 1's committed attempt gone, its failed one still there.
	require.NoError(t, b.s.update(b.ctx, func(t *kv.Tx) error { return t.Del(kv.AttemptKey(task.ID, 0, 1, committed)) }))
	require.NoError(t, b.s.Read(func(r ledger.Reader) error {
		_, err := r.StepOutput(task.ID, 0)
		require.ErrorIs(t, err, ledger.ErrNotFound)
		return nil
	}))
}

func mustTask(t *testing.T, b *testBundle, id string) *ledger.Task {
	t.Helper()
	task, err := b.s.Task(b.ctx, id)
	require.NoError(t, err)
	return task
}
