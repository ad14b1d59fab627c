package metrics

import (
	"io"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lhengine/lhengine/fault"
	"github.com/lhengine/lhengine/ledger"
)

func TestReady(t *testing.T) {
	t.Parallel()
	for name, c := range map[string]struct {
		task ledger.Task
		want int
	}{
		"plain step, leased": {ledger.Task{Status: ledger.Running, Steps: []ledger.StepState{{Planned: true, Units: 1, Leased: 1}, {}}}, 0},
		"plain step, ready":  {ledger.Task{Status: ledger.Queued, Steps: []ledger.StepState{{Planned: true, Units: 1}}}, 1},
		"fan-out being planned": {ledger.Task{Status: ledger.Running, Steps: []ledger.StepState{
			{FanOut: true, Units: 100, Written: 40, Done: 10, Leased: 4, Failed: 1, Waiting: 2}}}, 23},
		"window beside its anchor": {ledger.Task{Status: ledger.Running, Steps: []ledger.StepState{
			{FanOut: true, Planned: true, Units: 10, Written: 10, Done: 6, Windows: 1},
			{Every: 3, Anchor: 0, Written: 2, Done: 1},
			{Planned: false}}}, 5},
		"paused":   {ledger.Task{Status: ledger.Paused, Steps: []ledger.StepState{{Planned: true, Units: 5}}}, 0},
		"finished": {ledger.Task{Status: ledger.Succeeded, Cursor: 1, Steps: []ledger.StepState{{Planned: true, Units: 1, Done: 1}}}, 0},
	} {
		require.Equal(t, c.want, Ready(&c.task), name)
	}
}

func TestCountsAndLabels(t *testing.T) {
	t.Parallel()
	s := New(nil)
	s.Committed(ledger.Result{Output: []byte(`1`)}, time.Millisecond)
	s.Committed(ledger.Result{Failure: &ledger.Failure{Kind: fault.Timeout}, RetryAt: time.Now()}, time.Millisecond)
	s.Committed(ledger.Result{Repair: &ledger.Repair{}}, time.Millisecond)
	s.TookOver(2)
	s.HostCall("http.fetch")
	s.HostCall("a name no capability has")
	s.Effect("performed")
	s.Model(10, 4, 0.5)
	var nilSet *Set
	nilSet.Committed(ledger.Result{}, 0) // counts nothing, and does not fail
	nilSet.HostCall("kv.get")

	rec := httptest.NewRecorder()
	s.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body, err := io.ReadAll(rec.Body)
	require.NoError(t, err)
	text := string(body)
	for _, line := range []string{
		"lhengine_units_committed_total 1",
		`lhengine_units_failed_total{kind="timeout"} 1`,
		`lhengine_units_failed_total{kind="trap"} 0`,
		"lhengine_retries_total 1",
		"lhengine_repairs_total 1",
		"lhengine_attempts_total 3",
		"lhengine_lease_takeovers_total 2",
		"lhengine_commit_seconds_count 3",
		`lhengine_host_calls_total{name="http.fetch"} 1`,
		`lhengine_host_calls_total{name="unknown"} 1`,
		`lhengine_effects_total{outcome="performed"} 1`,
		`lhengine_model_tokens_total{direction="input"} 10`,
		`lhengine_model_tokens_total{direction="output"} 4`,
		"lhengine_model_cost_total 0.5",
	} {
		require.Contains(t, text, line+"\n")
	}
	require.NotContains(t, text, "a name no capability has", "a plugin cannot grow the labels")
	require.False(t, strings.Contains(text, "lhengine_ready_units"), "no reader, no gauge")
}
