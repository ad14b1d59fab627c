package store

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lhengine/lhengine/ledger"
)

// TestReleaseGivesBackUncharged: a unit given back by a stopping worker is
// ready at once, for any worker, and the next claim runs the same attempt
// number: the attempt it was cut short in is not charged, to the unit or
// to the task. The old lease can neither commit nor be released again.
func TestReleaseGivesBackUncharged(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.submit(t, plainSteps("a"))
	first := b.claim1(t, "worker-a")
	require.Equal(t, 1, first.Attempt)

	require.NoError(t, b.s.Release(b.ctx, first))
	task, err := b.s.Task(b.ctx, first.Task)
	require.NoError(t, err)
	require.Zero(t, task.Attempts, "the cut-short attempt is not counted")
	require.Zero(t, task.Leases)
	require.Zero(t, task.Reclaims, "a release is not a takeover")

	// No waiting for the lease to expire, and another owner may take it.
	again := b.claim1(t, "worker-b")
	require.Equal(t, 1, again.Attempt, "the same attempt runs again")
	require.Greater(t, again.Epoch, first.Epoch, "under a new epoch")

	require.ErrorIs(t, b.s.Release(b.ctx, first), ledger.ErrLeaseLost)
	_, err = b.s.Commit(b.ctx, ledger.Result{Lease: first, Output: []byte(`1`)})
	require.ErrorIs(t, err, ledger.ErrLeaseLost)

	task = b.done(t, again, `"ok"`)
	require.Equal(t, ledger.Succeeded, task.Status)
	require.Equal(t, 1, task.Attempts)
	var evs []ledger.Event
	require.NoError(t, b.s.Read(func(r ledger.Reader) error {
		var err error
		evs, err = r.Events(first.Task, 0, 0)
		return err
	}))
	var released []ledger.Event
	for _, e := range evs {
		if e.Type == ledger.EvReleased {
			released = append(released, e)
		}
		require.NotEqual(t, ledger.EvLeaseExpired, e.Type)
	}
	require.Len(t, released, 1)
	require.Equal(t, 1, released[0].Attempt)
	require.Equal(t, first.Epoch, released[0].Epoch)
	require.Contains(t, released[0].Message, "not charged")
}

// TestReleaseOfAFanOutUnitKeepsTheStepsCount: a released fan-out unit
// frees its place under the step's concurrency limit at once.
func TestReleaseOfAFanOutUnitKeepsTheStepsCount(t *testing.T) {
	t.Parallel()
	b := setup(t, fanOutPlanner(3))
	b.submit(t, []ledger.StepState{{Name: "each", FanOut: true, Limit: 1}})
	c, err := b.s.Claim(b.ctx, ledger.ClaimRequest{Owner: b.s.Owner("w"), Max: 3, LeaseFor: 30 * time.Second})
	require.NoError(t, err)
	require.Len(t, c.Leases, 1, "the step's limit is 1")
	require.NoError(t, b.s.Release(b.ctx, c.Leases[0]))
	c, err = b.s.Claim(b.ctx, ledger.ClaimRequest{Owner: b.s.Owner("w"), Max: 3, LeaseFor: 30 * time.Second})
	require.NoError(t, err)
	require.Len(t, c.Leases, 1, "the released unit's place is free again")
	require.Equal(t, 1, c.Leases[0].Attempt)
}
