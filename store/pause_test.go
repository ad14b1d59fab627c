package store

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lhengine/lhengine/ledger"
)

// TestPauseTaskStopsClaimsAndLetsInFlightCommit: PauseTask takes effect at
// once for new claims, a unit already leased still commits, the reason is
// structured on the task and its event, a second pause keeps the first
// reason, and Resume lets the rest run.
func TestPauseTaskStopsClaimsAndLetsInFlightCommit(t *testing.T) {
	t.Parallel()
	b := setup(t, fanOutPlanner(3))
	b.submit(t, []ledger.StepState{{Name: "each", FanOut: true, Limit: 3}})
	c, err := b.s.Claim(b.ctx, ledger.ClaimRequest{Owner: b.s.Owner("w"), Max: 1, LeaseFor: 30 * time.Second})
	require.NoError(t, err)
	require.Len(t, c.Leases, 1)
	id := c.Leases[0].Task

	why := ledger.PauseReason{Kind: ledger.PauseOperator, By: "alice", Note: "maintenance"}
	task, err := b.s.PauseTask(b.ctx, id, why)
	require.NoError(t, err)
	require.Equal(t, ledger.Paused, task.Status)
	require.NotNil(t, task.Pause)
	require.Equal(t, ledger.PauseOperator, task.Pause.Kind)
	require.Equal(t, "alice", task.Pause.By)
	require.False(t, task.Pause.At.IsZero())
	require.Equal(t, "paused by alice: maintenance", task.Reason)

	again, err := b.s.PauseTask(b.ctx, id, ledger.PauseReason{Kind: ledger.PauseBudget, Name: "units"})
	require.NoError(t, err)
	require.Equal(t, ledger.PauseOperator, again.Pause.Kind, "the first reason stays")

	none, err := b.s.Claim(b.ctx, ledger.ClaimRequest{Owner: b.s.Owner("w"), Max: 3, LeaseFor: 30 * time.Second})
	require.NoError(t, err)
	require.Empty(t, none.Leases, "nothing is claimed while paused")

	task, err = b.s.Commit(b.ctx, ledger.Result{Lease: c.Leases[0], Output: []byte(`1`)})
	require.NoError(t, err, "the unit in flight still commits")
	require.Equal(t, ledger.Paused, task.Status)
	require.Equal(t, 1, task.Steps[0].Done)

	task, err = b.s.Resume(b.ctx, id)
	require.NoError(t, err)
	require.Equal(t, ledger.Running, task.Status)
	require.Nil(t, task.Pause)
	rest, err := b.s.Claim(b.ctx, ledger.ClaimRequest{Owner: b.s.Owner("w"), Max: 3, LeaseFor: 30 * time.Second})
	require.NoError(t, err)
	require.Len(t, rest.Leases, 2)

	var evs []ledger.Event
	require.NoError(t, b.s.Read(func(r ledger.Reader) error {
		var err error
		evs, err = r.Events(id, 0, 0)
		return err
	}))
	var paused []ledger.Event
	for _, e := range evs {
		if e.Type == ledger.EvPaused {
			paused = append(paused, e)
		}
	}
	require.Len(t, paused, 1)
	require.NotNil(t, paused[0].Pause)
	require.Equal(t, "alice", paused[0].Pause.By)
}

// TestPauseTaskOfAFinishedTask: a finished task cannot be paused; an
// unknown one is not found.
func TestPauseTaskOfAFinishedTask(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.submit(t, plainSteps("a"))
	l := b.claim1(t, "w")
	b.done(t, l, `"ok"`)
	_, err := b.s.PauseTask(b.ctx, l.Task, ledger.PauseReason{Kind: ledger.PauseOperator})
	require.ErrorIs(t, err, ledger.ErrTerminal)
	_, err = b.s.PauseTask(b.ctx, "nope", ledger.PauseReason{Kind: ledger.PauseOperator})
	require.ErrorIs(t, err, ledger.ErrNotFound)
}

// TestSettlingAnEffectDoesNotResumeAnOperatorsPause: an effect settled
// while its task is paused by a person (or a budget) leaves the task
// paused: only a pause the effect itself caused ends with it.
func TestSettlingAnEffectDoesNotResumeAnOperatorsPause(t *testing.T) {
	t.Parallel()
	b := setup(t)
	task := b.submit(t, plainSteps("send"))
	l := b.claim1(t, "w")
	e := &ledger.Effect{Task: task.ID, Step: 0, StepName: "send", Key: "mail-1", Kind: "http", Mode: "manual",
		IdempotencyKey: ledger.IdempotencyKey(task.ID, "send", 0, "mail-1"), State: ledger.EffectUnknown, Attempt: 1}
	require.NoError(t, b.s.RecordEffect(b.ctx, l, e))
	_, err := b.s.PauseTask(b.ctx, task.ID, ledger.PauseReason{Kind: ledger.PauseOperator, By: "alice"})
	require.NoError(t, err)
	require.NoError(t, b.s.Release(b.ctx, l))
	_, err = b.s.ResolveEffect(b.ctx, task.ID, 0, 0, "mail-1", true, "sent")
	require.NoError(t, err)
	got, err := b.s.Task(b.ctx, task.ID)
	require.NoError(t, err)
	require.Equal(t, ledger.Paused, got.Status, "the operator's pause stands")
	require.Equal(t, "alice", got.Pause.By)
}
