package main

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lhengine/lhengine/api"
	"github.com/lhengine/lhengine/internal/testgate"
)

// status reads a task's report through the CLI (-o json).
func (b *procBundle) status(t *testing.T, id string) api.Report {
	t.Helper()
	return lhJSON[api.Report](t, b, "status", id)
}

// TestPauseUnderServe: under serve, `pause` lets the four units in flight
// commit and returns with the task paused by the OS user; while it is
// paused nothing of it runs or commits, and another task of the home runs
// to its end; `resume` continues it, and every unit commits exactly once.
func TestPauseUnderServe(t *testing.T) {
	t.Parallel()
	b := setupProcs(t)
	g, other := testgate.New(t), testgate.New(t)
	srv := b.serve(t, "--concurrency", "4")
	id := submit(t, b, b.task(t, "gated", g, 12, 4))
	for range 4 {
		within(t, g.Arrived(), "unit reaching the gate")
	}

	pause := b.start(t, "pause", id, "--reason", "maintenance", "--grace", "10m")
	// The pause waits for the units in flight; it is recorded at once.
	follow := b.start(t, "events", "--follow", id)
	follow.until(t, regexp.MustCompile(`paused`))
	g.Release(4)
	require.Equal(t, 0, pause.wait(t), pause.stderr.String())

	rep := b.status(t, id)
	require.Equal(t, api.Paused, rep.Task.Status)
	require.Equal(t, api.PauseOperator, rep.Task.Pause.Kind)
	require.Equal(t, "maintenance", rep.Task.Pause.Note)
	require.NotEmpty(t, rep.Task.Pause.By)
	done, _ := rep.Task.Progress()
	require.Equal(t, 4, done, "the units in flight committed")
	require.Zero(t, rep.Task.Leases)

	// Another task runs to its end while this one is paused.
	other.Open()
	code, _, errOut := b.lh(t, "events", "--follow", submit(t, b, b.task(t, "other", other, 3, 3)))
	require.Equal(t, 0, code, "the other task succeeds: %s", errOut)
	select {
	case it := <-g.Arrived():
		t.Fatalf("item %s of the paused task ran", it)
	default:
	}
	rep = b.status(t, id)
	done, _ = rep.Task.Progress()
	require.Equal(t, 4, done, "nothing committed while paused")
	require.Equal(t, 4, rep.Task.Attempts)

	g.Open()
	require.Contains(t, lhOK(t, b, "resume", id), "already being worked by")
	lhOK(t, b, "events", "--follow", id)
	rep = b.status(t, id)
	require.Equal(t, api.Succeeded, rep.Task.Status)
	require.Equal(t, 12, rep.Task.Attempts, "every unit committed once")
	srv.stop(t)
}

// TestBudgetPausesRunAndSurvivesAKill: `run` of a task with budget
// units = 5 is killed (SIGKILL) after 3 units committed; `resume` runs
// exactly 2 more (the 3 counted before the kill stay counted), returns on
// the pause with exit status 3, the reason and the command that continues
// it; that command finishes the task, each unit committed once.
func TestBudgetPausesRunAndSurvivesAKill(t *testing.T) {
	t.Parallel()
	b := setupProcs(t)
	g := testgate.New(t)
	path := filepath.Join(b.dir, "budget.hcl")
	require.NoError(t, os.WriteFile(path, []byte(`task "budget" {
  budget {
    units = 5
  }
`+g.Step("each", "gate.wasm", 8, 1)+`}`), 0o644))
	run, id := b.startRun(t, "--concurrency", "1", path)
	follow := b.start(t, "events", "--follow", id)
	seen := 0
	g.Release(3)
	countDone(t, follow, &seen, 3)
	run.kill(t)
	require.NoError(t, follow.c.Process.Kill())
	follow.wait(t)

	g.Open()
	code, out, errOut := b.lh(t, "resume", id)
	require.Equal(t, 3, code, "a pause is exit status 3: %s %s", out, errOut)
	require.Contains(t, out, "budget units reached: 5 of 5")
	require.Contains(t, out, "continue with: lhengine resume "+id+" --budget units=+5")
	rep := b.status(t, id)
	require.Equal(t, api.Paused, rep.Task.Status)
	done, _ := rep.Task.Progress()
	require.Equal(t, 5, done, "3 before the kill, 2 after: the usage survived it")
	require.Equal(t, int64(5), rep.Task.Budget.Units)
	require.Contains(t, lhOK(t, b, "status", id), "budget:      units 5 of 5")

	code, out, errOut = b.lh(t, "resume", id, "--budget", "units=+5")
	require.Equal(t, 0, code, "%s %s", out, errOut)
	rep = b.status(t, id)
	require.Equal(t, api.Succeeded, rep.Task.Status)
	require.LessOrEqual(t, rep.Task.Attempts, 9, "at most the unit in flight at the kill ran twice")
	require.Contains(t, lhOK(t, b, "events", "-o", "json", id), `"budget_raised"`)
}

// TestPauseARun: `pause` from another process reaches the `run` that owns
// the home; the two units in flight finish, run returns on the pause with
// exit status 3 and the command that continues it, and that command
// finishes the task.
func TestPauseARun(t *testing.T) {
	t.Parallel()
	b := setupProcs(t)
	g := testgate.New(t)
	run, id := b.startRun(t, "--concurrency", "2", b.task(t, "gated", g, 6, 2))
	for range 2 {
		within(t, g.Arrived(), "unit reaching the gate")
	}
	pause := b.start(t, "pause", id, "--grace", "10m")
	follow := b.start(t, "events", "--follow", id)
	follow.until(t, regexp.MustCompile(`paused`))
	g.Release(2)
	require.Equal(t, 0, pause.wait(t), pause.stderr.String())
	cont := run.until(t, regexp.MustCompile(`^continue with: `))
	require.Equal(t, "continue with: lhengine resume "+id, cont)
	require.Equal(t, 3, run.wait(t), run.stderr.String())
	require.NoError(t, follow.c.Process.Kill())
	follow.wait(t)

	g.Open()
	code, out, errOut := b.lh(t, "resume", id)
	require.Equal(t, 0, code, out+errOut)
	rep := b.status(t, id)
	require.Equal(t, api.Succeeded, rep.Task.Status)
	require.Equal(t, 6, rep.Task.Attempts)
}
