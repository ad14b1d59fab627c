package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lhengine/lhengine/engine"
	"github.com/lhengine/lhengine/internal/crashpoint"
	"github.com/lhengine/lhengine/internal/testpg"
	"github.com/lhengine/lhengine/internal/testwasm"
	"github.com/lhengine/lhengine/ledger"
)

// lockedBuffer is a buffer a process writes while the test reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// pgCluster starts a throwaway PostgreSQL cluster of the test's own (one
// it may restart or reach from test hosts), stopped when the test ends.
func pgCluster(t *testing.T, o testpg.Options) *testpg.Cluster {
	t.Helper()
	c, err := testpg.StartWith(o)
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("PostgreSQL: %v", err)
		}
		t.Skipf("PostgreSQL: %v", err)
	}
	t.Cleanup(func() { require.NoError(t, c.Stop()) })
	return c
}

// pgWorker is a worker process; its stderr is read as it runs.
type pgWorker struct {
	cmd    *exec.Cmd
	stderr lockedBuffer
}

// startWorker starts the command name args as a worker process, killed
// when the test ends if it is still running.
func startWorker(t *testing.T, name string, args ...string) *pgWorker {
	t.Helper()
	w := &pgWorker{cmd: exec.Command(name, args...)}
	w.cmd.Stderr = &w.stderr
	require.NoError(t, w.cmd.Start())
	t.Cleanup(func() { _ = w.cmd.Process.Kill() })
	return w
}

// pgFanOut is a fan-out of the pipeline guest big enough to be cut into
// by a kill and a database restart.
func pgFanOut(n int) string {
	return strings.Replace(fanOutTask, "n = 200", fmt.Sprintf("n = %d", n), 1)
}

// TestPostgresWorkersSurviveAKillAndARestartOfTheDatabase: three worker
// processes, each with a home of its own (as on three hosts), work one
// fan-out kept in PostgreSQL. One is killed with SIGKILL mid-task, and
// then PostgreSQL itself is stopped at once (no checkpoint) and started
// again. The two left finish the task; every unit committed exactly once,
// in item order, and the units the killed one held were taken over.
func TestPostgresWorkersSurviveAKillAndARestartOfTheDatabase(t *testing.T) {
	t.Parallel()
	const items = 2000
	cluster := pgCluster(t, testpg.Options{})
	url := cluster.URL("postgres")
	bin := buildBinary(t)
	dir := testwasm.TaskDir(t, testwasm.CGuest(t, "pipeline"), pgFanOut(items))
	lh := func(home string, args ...string) string {
		t.Helper()
		cmd := exec.Command(bin, append([]string{"--store", url, "--home", home}, args...)...)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		require.NoError(t, err, "lhengine %v: %s", args, stderr.String())
		return strings.TrimSpace(string(out))
	}
	homes := t.TempDir()
	require.Contains(t, lh(filepath.Join(homes, "client"), "store", "migrate"), "→ ")
	id := lh(filepath.Join(homes, "client"), "submit", filepath.Join(dir, "task.hcl"))

	workers := make([]*pgWorker, 3)
	for i := range workers {
		workers[i] = startWorker(t, bin, "--store", url, "--home", filepath.Join(homes, fmt.Sprint("host", i)),
			"--log-level", "warn", "worker", "--concurrency", "4", "--name", fmt.Sprint("host", i))
	}

	// The test reads the store as one more process.
	e, err := engine.Open(context.Background(), engine.Config{Home: filepath.Join(homes, "reader"), Store: url})
	require.NoError(t, err)
	defer e.Close(context.Background())
	done := func() (int, ledger.Status) {
		var n int
		var st ledger.Status
		_ = e.Read(func(r ledger.Reader) error {
			task, err := r.Task(id)
			if err != nil {
				return err
			}
			st = task.Status
			for _, s := range task.Steps {
				n += s.Done
			}
			return nil
		})
		return n, st
	}
	// by counts the units of the fan-out each worker committed.
	by := func() map[string]int {
		out := map[string]int{}
		_ = e.Read(func(r ledger.Reader) error {
			units, err := r.Units(id, 1)
			if err != nil {
				return err
			}
			for _, u := range units {
				if u.State == ledger.UnitDone {
					a, err := r.Attempt(id, 1, u.Item, u.Attempt)
					if err != nil {
						return err
					}
					out[strings.SplitN(a.Owner, "/", 2)[1]]++
				}
			}
			return nil
		})
		return out
	}
	waitFor := func(what string, ok func(n int, st ledger.Status) bool) {
		t.Helper()
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		deadline := time.After(4 * time.Minute)
		for {
			if n, st := done(); ok(n, st) {
				return
			}
			select {
			case <-tick.C:
			case <-deadline:
				n, st := done()
				t.Fatalf("waiting for %s: %d units done, task %s\n%s\n%s\n%s", what, n, st,
					workers[0].stderr.String(), workers[1].stderr.String(), workers[2].stderr.String())
			}
		}
	}

	// The worker that committed the most so far is killed.
	waitFor("a tenth of the units", func(n int, _ ledger.Status) bool { return n >= items/10 })
	victim, most := 0, -1
	for i, n := range []int{by()["host0"], by()["host1"], by()["host2"]} {
		if n > most {
			victim, most = i, n
		}
	}
	require.NoError(t, workers[victim].cmd.Process.Signal(syscall.SIGKILL))
	require.Error(t, workers[victim].cmd.Wait())
	killedAt, _ := done()

	waitFor("more units after the kill", func(n int, st ledger.Status) bool { return n >= killedAt+items/10 || st.Terminal() })
	require.Less(t, killedAt+items/10, items, "the task was still running when the database restarted")
	require.NoError(t, cluster.Restart())
	restartedAt, _ := done()

	waitFor("the task to finish", func(_ int, st ledger.Status) bool { return st.Terminal() })
	for i := range workers {
		if i == victim {
			continue
		}
		require.NoError(t, workers[i].cmd.Process.Signal(syscall.SIGTERM))
		require.NoError(t, workers[i].cmd.Wait(), "worker %d: %s", i, workers[i].stderr.String())
	}

	require.NoError(t, e.Read(func(r ledger.Reader) error {
		task := succeededTask(t, r, id)
		require.JSONEq(t, fmt.Sprintf(`{"mode":"echo","units":%d}`, items), string(task.Output))
		require.Len(t, committedOnce(t, r, id, 1), items)
		units, err := r.Units(id, 1)
		require.NoError(t, err)
		require.Len(t, units, items)
		for _, u := range units {
			require.Equal(t, ledger.UnitDone, u.State)
		}
		return nil
	}))
	owners := by()
	require.GreaterOrEqual(t, owners[fmt.Sprint("host", victim)], most, "the killed worker's commits stay: %v", owners)
	require.Equal(t, items, owners["host0"]+owners["host1"]+owners["host2"], "%v", owners)
	t.Logf("units committed by worker: %v; killed at %d units, database restarted at %d", owners, killedAt, restartedAt)
	listing := lh(filepath.Join(homes, "client"), "workers")
	require.Equal(t, 1, strings.Count(listing, "gone (its leases are taken back)"), "the killed worker:\n%s", listing)
	require.GreaterOrEqual(t, strings.Count(listing, "stopped"), 2, "the two stopped workers:\n%s", listing)
}

// TestSIGKILLAtChosenPointsOnPostgres is TestSIGKILLAtChosenPointsLosesAndRepeatsNothing
// with the ledger in PostgreSQL: a run killed at its 5th commit, resumes
// killed before the 20th and after the 30th, and a last resume that
// finishes; every unit committed exactly once, in item order.
func TestSIGKILLAtChosenPointsOnPostgres(t *testing.T) {
	t.Parallel()
	url := testpg.DB(t)
	bin := buildBinary(t)
	dir := testwasm.TaskDir(t, testwasm.CGuest(t, "pipeline"), fanOutTask)
	home := filepath.Join(t.TempDir(), "home")
	env := []string{"LHENGINE_STORE=" + url}
	lh := func(crashAt string, args ...string) (string, bool) {
		return runCrashing(t, bin, home, crashAt, env, args...)
	}
	e, err := engine.Open(context.Background(), engine.Config{Home: filepath.Join(t.TempDir(), "reader"), Store: url, MigrateStore: true})
	require.NoError(t, err)
	defer e.Close(context.Background())
	read := func(fn func(r ledger.Reader)) {
		require.NoError(t, e.Read(func(r ledger.Reader) error { fn(r); return nil }))
	}
	done := func(id string) (n int) {
		read(func(r ledger.Reader) {
			task, err := r.Task(id)
			require.NoError(t, err)
			n, _ = task.Progress()
		})
		return n
	}

	out, killed := lh(crashpoint.UnitAfterCommit+"@5", "run", filepath.Join(dir, "task.hcl"))
	require.True(t, killed, "the run must die at its 5th commit:\n%s", out)
	id := taskID(out)
	require.Len(t, id, 26, out)
	require.GreaterOrEqual(t, done(id), 5)
	for _, at := range []string{crashpoint.UnitBeforeCommit + "@20", crashpoint.UnitAfterCommit + "@30"} {
		before := done(id)
		out, killed = lh(at, "resume", id)
		require.True(t, killed, "resume must die at %s:\n%s", at, out)
		require.Greater(t, done(id), before, "the resume committed work before dying at %s", at)
		require.Less(t, done(id), 202)
	}
	out, killed = lh("", "resume", id)
	require.False(t, killed)
	require.Contains(t, out, "succeeded: 202/202 units")
	read(func(r ledger.Reader) {
		task := succeededTask(t, r, id)
		require.JSONEq(t, `{"mode":"echo","units":200}`, string(task.Output))
		require.Len(t, committedOnce(t, r, id, 1), 200)
		require.Greater(t, task.Attempts, 202, "the kill before a commit abandoned an attempt")
	})
}
