package store

import (
	"fmt"
	"strconv"
	"strings"
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

// FuzzAttemptKeySuffix: the item and attempt a fan-out's output read takes
// from an attempt key are those the key was made with, and a suffix the
// store does not write is refused, never misread.
func FuzzAttemptKeySuffix(f *testing.F) {
	f.Add(0, 1, "00000000/00000001")
	f.Add(99999, 3, "0001869f/00000003")
	f.Add(1<<31-1, 1<<31-1, "x/1")
	f.Add(5, 2, "/")
	f.Fuzz(func(t *testing.T, item, attempt int, raw string) {
		if item >= 0 && attempt >= 0 && item < 1<<31 && attempt < 1<<31 {
			key := kv.AttemptKey("01J", 1, item, attempt)
			got, ok := parseAttemptSuffix(key[len(kv.AttemptPrefix("01J", 1)):])
			if !ok || got != (unitAttempt{item, attempt}) {
				t.Fatalf("attempt key %s read as %v, %v", key, got, ok)
			}
		}
		if got, ok := parseAttemptSuffix([]byte(raw)); ok && !sameHexPair(raw, got) {
			t.Fatalf("%q read as %v", raw, got)
		}
	})
}

// sameHexPair reports whether raw is "A/B" with A and B the hex (any
// leading zeros or letter case) of a's item and attempt.
func sameHexPair(raw string, a unitAttempt) bool {
	x, y, ok := strings.Cut(raw, "/")
	if !ok {
		return false
	}
	i, err1 := strconv.ParseUint(x, 16, 64)
	j, err2 := strconv.ParseUint(y, 16, 64)
	return err1 == nil && err2 == nil && int(i) == a.item && int(j) == a.attempt
}
