package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lhengine/lhengine/internal/testgate"
	"github.com/lhengine/lhengine/internal/testpg"
)

// TestPostgresMetricsOfTwoWorkersMatchTheLedger: two `lhengine worker
// --metrics` processes, a home each (as on two hosts), work one gated
// ten-item fan-out kept in PostgreSQL. Scraped while each holds two units
// at the gate, neither has committed anything, each made two fetches, and
// each one's ready gauge, once it heard of the other's claims, says six.
// `events --follow` from a third home streams the task until it succeeded
// (the store hears the workers' commits). Then the sums of the workers'
// counters are the ledger's own counts of it.
func TestPostgresMetricsOfTwoWorkersMatchTheLedger(t *testing.T) {
	t.Parallel()
	cluster := pgCluster(t, testpg.Options{})
	b := setupProcs(t)
	g := testgate.New(t)
	env := append(os.Environ(), "LHENGINE_STORE="+cluster.URL("postgres"))
	lh := func(home string, args ...string) string {
		t.Helper()
		c := exec.Command(b.bin, append([]string{"--home", filepath.Join(b.dir, home), "--log-level", "error"}, args...)...)
		c.Env = env
		out, err := c.CombinedOutput()
		require.NoError(t, err, "%s", out)
		return string(out)
	}
	lh("client", "store", "migrate")
	id := strings.TrimSpace(lh("client", "submit", b.task(t, "metered", g, 10, 10)))

	var urls []string
	for i := range 2 {
		c := exec.Command(b.bin, "--home", filepath.Join(b.dir, "w"+strconv.Itoa(i)), "--log-level", "error",
			"worker", "--metrics", "127.0.0.1:0", "--concurrency", "2")
		c.Env = env
		stderr := newWatchWriter("/metrics\n")
		c.Stderr = stderr
		require.NoError(t, c.Start())
		t.Cleanup(func() { _ = c.Process.Kill(); _ = c.Wait() })
		<-stderr.seen
		m := regexp.MustCompile(`metrics: (http://\S+/metrics)`).FindStringSubmatch(stderr.String())
		require.NotNil(t, m, stderr.String())
		urls = append(urls, m[1])
	}
	for range 4 {
		<-g.Arrived()
	}
	ready := `lhengine_ready_units{task="` + id + `"}`
	deadline := time.Now().Add(time.Minute)
	for _, u := range urls {
		for {
			during := scrapeMetrics(t, u)
			require.Equal(t, 0.0, during["lhengine_units_committed_total"])
			require.Equal(t, 2.0, during[`lhengine_host_calls_total{name="http.fetch"}`], "each worker's two units asked the gate")
			if during[ready] == 6 {
				break
			}
			require.True(t, time.Now().Before(deadline), "%s never heard of the other worker's claims: %v ready", u, during[ready])
		}
	}

	g.Open()
	lh("client", "events", id, "--follow") // until the task finishes
	var tasks []struct {
		ID       string `json:"id"`
		Status   string `json:"status"`
		Attempts int    `json:"attempts"`
		Failures int    `json:"failures"`
		Reclaims int    `json:"reclaims"`
		Repairs  int    `json:"repairs"`
		Steps    []struct {
			Done int `json:"done"`
		} `json:"steps"`
	}
	require.NoError(t, json.Unmarshal([]byte(lh("client", "ls", "-o", "json")), &tasks))
	require.Len(t, tasks, 1)
	task := tasks[0]
	require.Equal(t, id, task.ID)
	require.Equal(t, "succeeded", task.Status)
	committed := 0
	for _, st := range task.Steps {
		committed += st.Done
	}
	require.Equal(t, 10, committed)
	// A worker counts a commit once its call returns, just after the
	// database has it: read until both have counted the last one.
	sum := map[string]float64{}
	for sum["lhengine_units_committed_total"] != float64(committed) {
		require.True(t, time.Now().Before(deadline), "the workers counted %v commits of %d", sum["lhengine_units_committed_total"], committed)
		clear(sum)
		for _, u := range urls {
			for k, v := range scrapeMetrics(t, u) {
				sum[k] += v
			}
		}
	}
	require.Equal(t, float64(task.Attempts), sum["lhengine_attempts_total"])
	require.Equal(t, float64(task.Attempts), sum["lhengine_commit_seconds_count"])
	require.Equal(t, float64(task.Failures), sum[`lhengine_units_failed_total{kind="trap"}`])
	require.Equal(t, float64(task.Repairs), sum["lhengine_repairs_total"])
	require.Equal(t, float64(task.Reclaims), sum["lhengine_lease_takeovers_total"])
	require.Equal(t, 10.0, sum[`lhengine_host_calls_total{name="http.fetch"}`])
	require.Zero(t, sum[ready], "a finished task has no ready units")
}

// TestPostgresSubmitFollowEndsWithTheTask: on a PostgreSQL store,
// `submit --follow` in a home no process owns follows the task through
// the store while a worker of another home works it, and exits 0 with
// the task's outcome once it succeeded.
func TestPostgresSubmitFollowEndsWithTheTask(t *testing.T) {
	t.Parallel()
	cluster := pgCluster(t, testpg.Options{})
	b := setupProcs(t)
	env := append(os.Environ(), "LHENGINE_STORE="+cluster.URL("postgres"))
	lhCmd := func(home string, args ...string) *exec.Cmd {
		c := exec.Command(b.bin, append([]string{"--home", filepath.Join(b.dir, home), "--log-level", "error"}, args...)...)
		c.Env = env
		return c
	}
	out, err := lhCmd("client", "store", "migrate").CombinedOutput()
	require.NoError(t, err, "%s", out)
	task := b.pipelineTask(t, "follow.hcl", `task "followed" {
  step "one" {
    plugin = "step.wasm"
    input  = { mode = "echo", n = 1 }
  }
}
`)
	submit := lhCmd("client", "submit", "--follow", task)
	stdout := newWatchWriter("task ")
	var stderr strings.Builder
	submit.Stdout, submit.Stderr = stdout, &stderr
	require.NoError(t, submit.Start())
	t.Cleanup(func() {
		if submit.ProcessState == nil {
			_ = submit.Process.Kill()
			_ = submit.Wait()
		}
	})
	<-stdout.seen // submitted: now a worker elsewhere works it
	out, err = lhCmd("worker", "worker", "--exit-when-idle").CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.NoError(t, submit.Wait(), "%s\n%s", stdout.String(), stderr.String())
	require.Contains(t, stdout.String(), "succeeded: 1/1 units")
}
