package engine_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lhengine/lhengine/engine"
	"github.com/lhengine/lhengine/internal/testgate"
	"github.com/lhengine/lhengine/ledger"
)

// inFlightBundle is a task of 10 gated units with four of them in flight:
// Work (leases of an hour) returns on worked.
type inFlightBundle struct {
	*testBundle
	g      *testgate.Gate
	id     string
	worked chan error
}

func setupInFlight(t *testing.T) inFlightBundle {
	t.Helper()
	g := testgate.New(t)
	b := setupGated(t, `task "gated" {`+g.Step("each", "gate.wasm", 10, 4)+`}`)
	task := b.submit(t, nil)
	worked := make(chan error, 1)
	go func() {
		worked <- b.e.Work(b.ctx, engine.WorkOptions{Task: task.ID, Concurrency: 4, ExitWhenIdle: true, LeaseFor: time.Hour})
	}()
	for range 4 {
		select { // four attempts are in the fetch, held by the gate
		case <-g.Arrived():
		case err := <-worked:
			got, _ := b.e.Task(b.ctx, task.ID)
			t.Fatalf("Work returned (%v) before the gate was reached: task %s %s %v", err, got.Status, got.Reason, got.Failure)
		}
	}
	return inFlightBundle{testBundle: b, g: g, id: task.ID, worked: worked}
}

// waitStatus waits for the task to be in status st.
func (b inFlightBundle) waitStatus(t *testing.T, st ledger.Status) {
	for {
		changed := b.e.Changed()
		got, err := b.e.Task(b.ctx, b.id)
		require.NoError(t, err)
		if got.Status == st {
			return
		}
		<-changed
	}
}

// resumeToEnd resumes the task and works it to its end with the gate open;
// it checks that every unit committed exactly once over the task's life.
func (b inFlightBundle) resumeToEnd(t *testing.T) {
	_, err := b.e.Resume(b.ctx, b.id)
	require.NoError(t, err)
	b.g.Open()
	require.NoError(t, b.e.Work(b.ctx, engine.WorkOptions{Task: b.id, Concurrency: 4, ExitWhenIdle: true}))
	got, err := b.e.Task(b.ctx, b.id)
	require.NoError(t, err)
	require.Equal(t, ledger.Succeeded, got.Status)
	require.Equal(t, 10, got.Attempts, "each unit ran once to its commit: none twice")
}

// TestPauseLetsInFlightFinish: a pause claims nothing more of the task;
// the four attempts in flight end within the grace and commit; Pause
// returns once none is leased; Work, left with nothing runnable, returns;
// the resumed task runs the other six units once each.
func TestPauseLetsInFlightFinish(t *testing.T) {
	t.Parallel()
	b := setupInFlight(t)
	paused := make(chan *ledger.Task, 1)
	go func() {
		p, err := b.e.Pause(b.ctx, b.id, ledger.PauseReason{Kind: ledger.PauseOperator, By: "alice", Note: "lunch"}, time.Hour)
		if err != nil {
			t.Error(err)
		}
		paused <- p
	}()
	b.waitStatus(t, ledger.Paused)
	b.g.Release(4)
	p := <-paused
	require.NotNil(t, p)
	require.Equal(t, ledger.Paused, p.Status)
	require.Zero(t, p.Leases)
	done, _ := p.Progress()
	require.Equal(t, 4, done, "the attempts in flight committed")
	require.Equal(t, "alice", p.Pause.By)
	require.Equal(t, "paused by alice: lunch", p.Reason)
	require.NoError(t, <-b.worked, "Work returns: nothing of the task can run")
	select {
	case it := <-b.g.Arrived():
		t.Fatalf("item %s ran while the task was paused", it)
	default:
	}
	b.resumeToEnd(t)
}

// TestPauseGivesBackWhenTheGraceRunsOut: with no grace, the four attempts
// in flight are cut short and their units given back uncharged: nothing
// commits, no attempt is counted, and the resume runs all ten once.
func TestPauseGivesBackWhenTheGraceRunsOut(t *testing.T) {
	t.Parallel()
	b := setupInFlight(t)
	p, err := b.e.Pause(b.ctx, b.id, ledger.PauseReason{Kind: ledger.PauseOperator, By: "bob"}, 0)
	require.NoError(t, err)
	require.Equal(t, ledger.Paused, p.Status)
	require.Zero(t, p.Leases, "every unit in flight is given back")
	done, _ := p.Progress()
	require.Zero(t, done)
	require.Zero(t, p.Attempts, "the attempts cut short are not charged")
	require.NoError(t, <-b.worked)
	b.resumeToEnd(t)
}
