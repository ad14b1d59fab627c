package server

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lhengine/lhengine/ledger"
)

var progressNow = time.Date(2026, 3, 4, 12, 0, 0, 0, time.UTC)

// fanOutTask is a running task whose step "check" (index 1) has done of
// units committed, one a second for the last 30s, after 2h of work.
func fanOutTask(done, units int) *ledger.Task {
	m := &ledger.Progress{ProgressSpec: ledger.ProgressSpec{Unit: "pages", Step: "check", StepIndex: 1,
		Labels: map[string]string{"missing_title": "pages without a title"}}, Committed: int64(done)}
	for i := 0; i < ledger.ProgressSamples; i++ {
		m.Samples = append(m.Samples, ledger.ProgressSample{At: progressNow.Add(time.Duration(i*3-30) * time.Second), Committed: int64(done - 30 + 3*i)})
	}
	m.Last = ledger.ProgressSample{At: progressNow, Committed: int64(done)}
	return &ledger.Task{ID: "t1", Name: "site-audit", Status: ledger.Running, Cursor: 1, Meter: m,
		Budget:   &ledger.Budget{Limits: ledger.BudgetLimits{Units: 4000, WallTime: 4 * time.Hour}, Units: int64(done + 1), WallTime: 2 * time.Hour},
		Counters: map[string]int64{"missing_title": 112, "broken_links": 40},
		Steps: []ledger.StepState{{Name: "list", Planned: true, Units: 1, Done: 1, Pass: 1},
			{Name: "check", FanOut: true, Planned: true, Units: units, Done: done, Pass: 1}}}
}

// TestProgressNumbers: done of total, the percent, the rate over the
// ring, the time left, the elapsed working time, labelled counters and
// each budget's use; the JSON has every field of specs/api.md.
func TestProgressNumbers(t *testing.T) {
	t.Parallel()
	p := computeProgress(fanOutTask(1840, 3000), "running", nil, nil, progressNow)
	require.Equal(t, "pages", p.Unit)
	require.Equal(t, "check", p.Step)
	require.Equal(t, 1, p.Pass)
	require.Equal(t, 1840, p.Done)
	require.Equal(t, 3000, *p.Total)
	require.Equal(t, 61.3, *p.Percent)
	require.Equal(t, 1.0, *p.RatePerS, "30 pages over the last 30s")
	require.Equal(t, 1160.0, *p.EtaS)
	require.Equal(t, 7200.0, p.ElapsedS)
	require.Equal(t, "broken_links", p.Counters[0].Name)
	require.Equal(t, "broken_links", p.Counters[0].Label, "no label: the name")
	require.Equal(t, "pages without a title", p.Counters[1].Label)
	require.EqualValues(t, 112, p.Counters[1].Value)
	require.Len(t, p.Budget, 2)
	require.Equal(t, "wall_time", p.Budget[0].Name)
	require.Equal(t, 50.0, p.Budget[0].Percent)
	require.Equal(t, 46.0, p.Budget[1].Percent)
	require.Equal(t, "site-audit · running 2h00m · 1,840 / 3,000 pages (61%) · 1 pages/s · about 19 min left · budget 50% used", p.Line())

	b, err := json.Marshal(p)
	require.NoError(t, err)
	var fields map[string]any
	require.NoError(t, json.Unmarshal(b, &fields))
	for _, f := range []string{"unit", "done", "total", "percent", "rate_per_s", "eta_s", "elapsed_s", "counters", "waiting", "budget"} {
		require.Contains(t, fields, f)
	}
	require.Equal(t, map[string]any{"name": "missing_title", "label": "pages without a title", "value": 112.0}, fields["counters"].([]any)[1])
	require.Equal(t, map[string]any{"name": "units", "used": 1841.0, "limit": 4000.0, "percent": 46.0}, fields["budget"].([]any)[1])
}

// TestProgressTimeLeftUnknown: the rate and the time left are null, and
// the line says "time left unknown", whenever they cannot be told.
func TestProgressTimeLeftUnknown(t *testing.T) {
	t.Parallel()
	cases := map[string]struct {
		change func(*ledger.Task)
		shown  string
		now    time.Time
		rate   bool // the rate is known though the time left is not
	}{
		"one sample":                     {change: func(t *ledger.Task) { t.Meter.Samples = t.Meter.Samples[9:] }},
		"nothing committed for a minute": {now: progressNow.Add(61 * time.Second)},
		"paused": {change: func(t *ledger.Task) {
			t.Status = ledger.Paused
			t.Pause = &ledger.PauseReason{Kind: ledger.PauseOperator, By: "alice"}
		}, shown: "paused"},
		"interrupted":         {shown: "interrupted"},
		"waiting for people":  {change: func(t *ledger.Task) { t.Status = ledger.WaitingApproval }, shown: "waiting_approval"},
		"total not known yet": {change: func(t *ledger.Task) { t.Steps[1].Planned, t.Steps[1].Units = false, 0 }, rate: true},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			task := fanOutTask(1840, 3000)
			if c.change != nil {
				c.change(task)
			}
			shown, now := c.shown, c.now
			if shown == "" {
				shown = "running"
			}
			if now.IsZero() {
				now = progressNow
			}
			p := computeProgress(task, shown, nil, nil, now)
			require.Nil(t, p.EtaS)
			require.Equal(t, c.rate, p.RatePerS != nil)
			require.Contains(t, p.Line(), "time left unknown")
			b, err := json.Marshal(p)
			require.NoError(t, err)
			require.Contains(t, string(b), `"eta_s":null`)
		})
	}
}

// TestProgressNeverBackwardsOverARepair: a repair that restarts an
// earlier step withdraws the progress step's pass (its units read 0 in
// the record); the progress then shows the next pass, not a count that
// fell, and counts that pass up from 0.
func TestProgressNeverBackwardsOverARepair(t *testing.T) {
	t.Parallel()
	task := fanOutTask(3000, 3000)
	p := computeProgress(task, "running", nil, nil, progressNow)
	require.Equal(t, 1, p.Pass)
	require.Equal(t, 3000, p.Done)
	require.NotContains(t, p.Line(), "pass")

	// The repair: back to step 0, step 1 withdrawn (resetStep).
	task.Cursor = 0
	task.Steps[0].Pass, task.Steps[0].Done = 2, 0
	task.Steps[1].Planned, task.Steps[1].Units, task.Steps[1].Done = false, 0, 0
	p = computeProgress(task, "running", nil, nil, progressNow)
	require.Equal(t, 2, p.Pass, "the next pass, not pass 1 at 0")
	require.Nil(t, p.Total)
	require.Contains(t, p.Line(), "0 pages / total not known yet · pass 2")

	// Step 1 entered again: pass 2 counts up.
	task.Cursor = 1
	task.Steps[1].Pass, task.Steps[1].Planned, task.Steps[1].Units, task.Steps[1].Done = 2, true, 3000, 10
	p = computeProgress(task, "running", nil, nil, progressNow)
	require.Equal(t, 2, p.Pass)
	require.Equal(t, 10, p.Done)
	require.Contains(t, p.Line(), "10 / 3,000 pages (0%) · pass 2")
}

// TestProgressNotesAndWaiting: notes are grouped by kind (blockers,
// decisions, findings first), the newest 3 of each with how many more;
// counts come from the record, or from the newest notes when the record
// has none; pending approvals and effect waits are told apart.
func TestProgressNotesAndWaiting(t *testing.T) {
	t.Parallel()
	task := fanOutTask(10, 100)
	var notes []ledger.Note // newest first
	for i := 9; i >= 0; i-- {
		notes = append(notes, ledger.Note{Seq: uint64(i), Kind: []string{"finding", "decision", "blocker", "idea"}[i%4], Text: fmt.Sprint("note ", i)})
	}
	task.Notes = 10
	task.Meter.Kinds = map[string]int64{"finding": 381, "decision": 12, "blocker": 2, "idea": 2}
	approvals := []ledger.Approval{{ID: "3", State: ledger.ApprovalPending, Step: "deploy", Prompt: "Deploy?"}, {ID: "2", State: ledger.ApprovalApproved}}
	task.Waiting = 3
	p := computeProgress(task, "running", notes, approvals, progressNow)
	var kinds []string
	for _, g := range p.Notes {
		kinds = append(kinds, g.Kind)
	}
	require.Equal(t, []string{"blocker", "decision", "finding", "idea"}, kinds)
	f := p.Notes[2]
	require.EqualValues(t, 381, f.Count)
	require.Len(t, f.Newest, 3)
	require.EqualValues(t, 8, f.Newest[0].Seq, "newest first")
	require.EqualValues(t, 378, f.More)
	require.False(t, f.Estimated)
	require.Equal(t, 1, p.Waiting.Approvals)
	require.Equal(t, "3", p.Waiting.Pending[0].ID)
	require.Equal(t, 2, p.Waiting.Effects)

	task.Meter.Kinds = nil
	task.Notes = 500
	p = computeProgress(task, "running", notes, nil, progressNow)
	require.True(t, p.Notes[2].Estimated)
	require.Equal(t, 10, p.Notes[2].Of)
	require.EqualValues(t, 3, p.Notes[2].Count, "of the newest 10: 0, 4, 8")
}
