package server_test

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lhengine/lhengine/api"
	"github.com/lhengine/lhengine/engine"
	"github.com/lhengine/lhengine/ledger"
)

// scrape reads GET /metrics with token and returns each sample's value by
// its name and labels as the text format writes them (`name{a="b"}`).
func scrape(t *testing.T, url, token string) (map[string]float64, int) {
	t.Helper()
	req, err := http.NewRequest("GET", url+"/metrics", nil)
	require.NoError(t, err)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, resp.Body)
		return nil, resp.StatusCode
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		require.NoError(t, err, line)
		out[line[:i]] = v
	}
	require.NoError(t, sc.Err())
	return out, resp.StatusCode
}

// TestMetricsDuringARunMatchTheLedgerAtItsEnd scrapes /metrics while two
// units of a six-item fan-out hold their leases (the other four ready),
// and again at the end, where every counter agrees with the ledger's own
// count of the task.
func TestMetricsDuringARunMatchTheLedgerAtItsEnd(t *testing.T) {
	t.Parallel()
	b := setupAPI(t)
	ctx := context.Background()
	c := api.NewClient(b.url, nil, b.token)
	task := b.submit(t, c, 6)

	_, status := scrape(t, b.url, "")
	require.Equal(t, http.StatusUnauthorized, status, "metrics are behind the API's tokens")

	wctx, stop := context.WithCancel(ctx)
	worked := make(chan error, 1)
	go func() { worked <- b.e.Work(wctx, engine.WorkOptions{Concurrency: 2}) }()
	defer stop()
	<-b.gate.Arrived()
	<-b.gate.Arrived()

	during, status := scrape(t, b.url, b.token)
	require.Equal(t, http.StatusOK, status)
	require.Equal(t, 4.0, during[`lhengine_ready_units{task="`+task.ID+`"}`], "six planned, two leased")
	require.Equal(t, 0.0, during["lhengine_units_committed_total"])
	require.Equal(t, 2.0, during[`lhengine_host_calls_total{name="http.fetch"}`], "both leased units asked the gate")
	require.Contains(t, during, `lhengine_units_failed_total{kind="trap"}`)

	items := make(chan api.StreamItem, 1000)
	followed := make(chan error, 1)
	go func() {
		followed <- c.Follow(ctx, task.ID, 0, func(it api.StreamItem) error { items <- it; return nil })
	}()
	b.gate.Open()
	for it := range items {
		if it.Type == api.StreamEnd {
			require.Equal(t, api.Succeeded, it.Task.Status)
			break
		}
	}
	require.NoError(t, <-followed)
	// The worker counts a commit once it returns; stop it so that every
	// count is in.
	stop()
	require.ErrorIs(t, <-worked, context.Canceled)

	var done *ledger.Task
	require.NoError(t, b.e.Read(func(r ledger.Reader) (err error) { done, err = r.Task(task.ID); return err }))
	after, _ := scrape(t, b.url, b.token)
	committed := 0
	for _, st := range done.Steps {
		committed += st.Done
	}
	require.Equal(t, 6, committed)
	require.Equal(t, float64(committed), after["lhengine_units_committed_total"])
	require.Equal(t, float64(done.Attempts), after["lhengine_attempts_total"])
	require.Equal(t, float64(done.Failures), after[`lhengine_units_failed_total{kind="trap"}`])
	require.Equal(t, float64(done.Repairs), after["lhengine_repairs_total"])
	require.Equal(t, float64(done.Reclaims), after["lhengine_lease_takeovers_total"])
	require.Equal(t, float64(done.Attempts), after["lhengine_commit_seconds_count"])
	require.Equal(t, 6.0, after[`lhengine_host_calls_total{name="http.fetch"}`])
	require.NotContains(t, after, `lhengine_ready_units{task="`+task.ID+`"}`, "a finished task has no ready units")
}
