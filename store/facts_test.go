package store

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lhengine/lhengine/ledger"
)

func (b *testBundle) submitFacts(t *testing.T, steps []ledger.StepState, facts map[string]string) *ledger.Task {
	t.Helper()
	task, created, err := b.s.Submit(b.ctx, ledger.NewTask{Name: "t", Steps: steps, Facts: facts})
	require.NoError(t, err)
	require.True(t, created)
	return task
}

func (b *testBundle) events(t *testing.T, id string, typ ledger.EventType) []ledger.Event {
	t.Helper()
	var out []ledger.Event
	require.NoError(t, b.s.Read(func(r ledger.Reader) error {
		evs, err := r.Events(id, 0, 0)
		for _, e := range evs {
			if e.Type == typ {
				out = append(out, e)
			}
		}
		return err
	}))
	return out
}

// TestCheckFactsContinue: facts recorded at submit; the same values change
// nothing; a changed value is recorded once, with an event naming the fact,
// its old and new values, and the unit runs.
func TestCheckFactsContinue(t *testing.T) {
	t.Parallel()
	b := setup(t)
	task := b.submitFacts(t, plainSteps("a", "b"), map[string]string{"head": "aaa", "config": "c1"})
	var rec *ledger.Facts
	require.NoError(t, b.s.Read(func(r ledger.Reader) (err error) { rec, err = r.Facts(task.ID); return }))
	require.Equal(t, map[string]string{"head": "aaa", "config": "c1"}, rec.Values)

	l := b.claim1(t, "w")
	changes, run, _, err := b.s.CheckFacts(b.ctx, l, map[string]string{"head": "aaa", "config": "c1"}, ledger.OnDrift{Name: "continue"})
	require.NoError(t, err)
	require.True(t, run)
	require.Empty(t, changes)
	b.done(t, l, `1`)

	l = b.claim1(t, "w")
	changes, run, tk, err := b.s.CheckFacts(b.ctx, l, map[string]string{"head": "bbb", "config": "c1"}, ledger.OnDrift{Name: "continue"})
	require.NoError(t, err)
	require.True(t, run)
	require.Len(t, changes, 1)
	require.Equal(t, ledger.FactChange{Name: "head", Old: "aaa", New: "bbb", At: b.clock.Now(), Action: "continue"}, changes[0])
	require.Equal(t, &changes[0], tk.Drift)
	// A second check with the same values (a concurrent unit) sees no drift.
	changes, run, _, err = b.s.CheckFacts(b.ctx, l, map[string]string{"head": "bbb", "config": "c1"}, ledger.OnDrift{Name: "continue"})
	require.NoError(t, err)
	require.True(t, run)
	require.Empty(t, changes)
	done := b.done(t, l, `2`)
	require.Equal(t, ledger.Succeeded, done.Status)
	drift := b.events(t, task.ID, ledger.EvDrift)
	require.Len(t, drift, 1)
	require.Equal(t, "head", drift[0].Fact.Name)
	require.Contains(t, drift[0].Message, "from aaa to bbb")
}

// TestCheckFactsPause: the lease is given back uncharged and the task
// pauses with a drift reason naming the fact; resumed, the same attempt
// runs with no further drift.
func TestCheckFactsPause(t *testing.T) {
	t.Parallel()
	b := setup(t)
	task := b.submitFacts(t, plainSteps("a"), map[string]string{"head": "aaa"})
	l := b.claim1(t, "w")
	_, run, tk, err := b.s.CheckFacts(b.ctx, l, map[string]string{"head": "bbb"}, ledger.OnDrift{Pause: true, Name: "pause"})
	require.NoError(t, err)
	require.False(t, run)
	require.Equal(t, ledger.Paused, tk.Status)
	require.Equal(t, ledger.PauseDrift, tk.Pause.Kind)
	require.Equal(t, "head", tk.Pause.Name)
	require.Contains(t, tk.Reason, "environment fact head changed")
	require.Zero(t, tk.Attempts, "not charged")
	require.Zero(t, tk.Leases)
	_, err = b.s.Commit(b.ctx, ledger.Result{Lease: l, Output: []byte(`1`)})
	require.ErrorIs(t, err, ledger.ErrLeaseLost)

	_, err = b.s.Resume(b.ctx, task.ID)
	require.NoError(t, err)
	l2 := b.claim1(t, "w")
	require.Equal(t, l.Attempt, l2.Attempt)
	changes, run, _, err := b.s.CheckFacts(b.ctx, l2, map[string]string{"head": "bbb"}, ledger.OnDrift{Pause: true, Name: "pause"})
	require.NoError(t, err)
	require.True(t, run)
	require.Empty(t, changes)
	require.Equal(t, ledger.Succeeded, b.done(t, l2, `1`).Status)
}

// TestCheckFactsRestart: a drift at step c goes back to step b (a is kept);
// a restart target not reached yet runs the unit.
func TestCheckFactsRestart(t *testing.T) {
	t.Parallel()
	b := setup(t)
	task := b.submitFacts(t, plainSteps("a", "b", "c"), map[string]string{"head": "1"})
	on := ledger.OnDrift{Restart: true, RestartFrom: 1, Name: "restart:b"}
	l := b.claim1(t, "w")
	_, run, _, err := b.s.CheckFacts(b.ctx, l, map[string]string{"head": "2"}, on)
	require.NoError(t, err)
	require.True(t, run, "step b not reached: nothing to run again")
	b.done(t, l, `"a"`)
	l = b.claim1(t, "w")
	b.done(t, l, `"b"`)
	l = b.claim1(t, "w")
	require.Equal(t, 2, l.Step)
	_, run, tk, err := b.s.CheckFacts(b.ctx, l, map[string]string{"head": "3"}, on)
	require.NoError(t, err)
	require.False(t, run)
	require.Equal(t, 1, tk.Cursor)
	require.Equal(t, ledger.Running, tk.Status)
	_, err = b.s.Commit(b.ctx, ledger.Result{Lease: l, Output: []byte(`1`)})
	require.ErrorIs(t, err, ledger.ErrLeaseLost)
	l = b.claim1(t, "w")
	require.Equal(t, 1, l.Step, "b runs again")
	b.done(t, l, `"b2"`)
	l = b.claim1(t, "w")
	require.Equal(t, 2, l.Step)
	require.Equal(t, ledger.Succeeded, b.done(t, l, `"c"`).Status)
	require.Len(t, b.events(t, task.ID, ledger.EvDrift), 2)
}

// TestCheckFactsPauseStopsUnitsLeasedBefore: two units leased; the first
// one's check pauses the task; the second, reading the same new values,
// sees no new drift but does not start: it is given back uncharged.
func TestCheckFactsPauseStopsUnitsLeasedBefore(t *testing.T) {
	t.Parallel()
	b := setup(t, fanOutPlanner(2))
	task := b.submitFacts(t, []ledger.StepState{{Name: "each", FanOut: true, Limit: 2}}, map[string]string{"head": "aaa"})
	c, err := b.s.Claim(b.ctx, ledger.ClaimRequest{Owner: b.s.Owner("w"), Max: 2, LeaseFor: 30 * time.Second})
	require.NoError(t, err)
	require.Len(t, c.Leases, 2)
	on := ledger.OnDrift{Pause: true, Name: "pause"}
	_, run, tk, err := b.s.CheckFacts(b.ctx, c.Leases[0], map[string]string{"head": "bbb"}, on)
	require.NoError(t, err)
	require.False(t, run)
	require.Equal(t, ledger.Paused, tk.Status)
	changes, run, tk, err := b.s.CheckFacts(b.ctx, c.Leases[1], map[string]string{"head": "bbb"}, on)
	require.NoError(t, err)
	require.Empty(t, changes)
	require.False(t, run, "the task is paused: the unit does not start")
	require.Zero(t, tk.Leases)
	require.Zero(t, tk.Attempts)
	require.Len(t, b.events(t, task.ID, ledger.EvDrift), 1)

	_, err = b.s.Resume(b.ctx, task.ID)
	require.NoError(t, err)
	c, err = b.s.Claim(b.ctx, ledger.ClaimRequest{Owner: b.s.Owner("w"), Max: 2, LeaseFor: 30 * time.Second})
	require.NoError(t, err)
	require.Len(t, c.Leases, 2, "both units ready again")
	for _, l := range c.Leases {
		require.Equal(t, 1, l.Attempt)
	}
}
