package render

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lhengine/lhengine/api"
)

var updateGolden = flag.Bool("update", false, "rewrite testdata/status/*.golden")

// statusReport is the report of a 3,000-page audit at a fixed time: 1,840
// pages done, counters with and without labels, 381 findings, 12
// decisions and 4 blockers, a pending approval, a unit waiting on an
// effect and a budget. Times are local, so the rendering is the same in
// every time zone.
func statusReport() *api.Report {
	at := time.Date(2026, 3, 4, 12, 0, 0, 0, time.Local)
	task := api.Task{ID: "t-0001", Name: "site-audit", Status: api.Running, Cursor: 1, ModelUsage: api.ModelUsage{Cost: 29},
		Attempts: 1900, Failures: 3, Epoch: 1912, Waiting: 2, NextApproval: 3,
		Counters:  map[string]int64{"missing_title": 112, "broken_links": 40},
		CreatedAt: at.Add(-2 * time.Hour), UpdatedAt: at, StartedAt: at.Add(-2 * time.Hour),
		Budget: &api.Budget{Limits: api.BudgetLimits{Units: 4000, Cost: 50}, Units: 1841},
		Steps: []api.StepState{{Name: "list", Planned: true, Units: 1, Done: 1, Pass: 1, Limit: 1},
			{Name: "check", FanOut: true, Planned: true, Units: 3000, Done: 1840, Pass: 1, Limit: 16},
			{Name: "deploy", Limit: 1}}}
	var notes []api.Note
	newest := func(kind string, n int, text string) []api.Note {
		var out []api.Note
		for i := 0; i < min(n, 3); i++ {
			out = append(out, api.Note{Seq: uint64(400 - i), Kind: kind, Text: fmt.Sprintf(text, 2999-i), Step: "check", Item: 2999 - i, Time: at.Add(-time.Duration(i) * time.Second)})
		}
		return out
	}
	total := 3000
	pct, rate, eta := 61.3, 24.0, 48*60.0
	p := &api.Progress{Name: task.Name, Status: string(task.Status), Unit: "pages", Step: "check", Pass: 1,
		Done: 1840, Total: &total, Percent: &pct, RatePerS: &rate, EtaS: &eta, ElapsedS: (72 * time.Minute).Seconds(),
		Counters: []api.Counter{{Name: "broken_links", Label: "broken_links", Value: 40}, {Name: "missing_title", Label: "pages without a title", Value: 112}},
		Notes: []api.NoteGroup{
			{Kind: "blocker", Count: 4, Newest: newest("blocker", 4, "page %d answers 503"), More: 1},
			{Kind: "decision", Count: 12, Newest: newest("decision", 12, "page %d: redirects are out of scope"), More: 9},
			{Kind: "finding", Count: 381, Newest: newest("finding", 381, "page %d has no title"), More: 378},
		},
		Waiting: api.Waiting{Approvals: 1, Effects: 1, Pending: []api.PendingApproval{{ID: "3", Step: "deploy", Prompt: "Publish the audit report?", Expires: at.Add(24 * time.Hour)}}},
		Budget:  []api.BudgetUse{{Name: "cost", Used: 29, Limit: 50, Percent: 58}, {Name: "units", Used: 1841, Limit: 4000, Percent: 46}},
	}
	task.ShownStatus, task.Worked = string(task.Status), true
	return &api.Report{Task: task, Notes: notes, ShownStatus: string(task.Status), Progress: p,
		Manifest: api.ManifestSummary{Objective: "Audit every page of the site", Constraints: []string{"never write to the site"}}}
}

// TestStatusRendering: the status starts with the line a person reads at a
// glance, then the labelled counters, the newest 3 notes of each kind and
// how to see the rest, what waits for a person and how to continue, then
// the details; the whole stays under 40 lines for a 3,000-unit task with
// 381 findings (testdata/status/report.golden; go test -update rewrites it).
func TestStatusRendering(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	Report(&out, statusReport())
	got := out.String()
	lines := strings.Split(strings.TrimSuffix(got, "\n"), "\n")
	require.Equal(t, "site-audit · running 1h12m · 1,840 / 3,000 pages (61%) · 24 pages/s · about 48 min left · budget 58% used", lines[0])
	require.Less(t, len(lines), 40, got)

	golden := filepath.Join("..", "..", "..", "..", "testdata", "status", "report.golden")
	if *updateGolden {
		require.NoError(t, os.MkdirAll(filepath.Dir(golden), 0o755))
		require.NoError(t, os.WriteFile(golden, out.Bytes(), 0o644))
	}
	want, err := os.ReadFile(golden)
	require.NoError(t, err)
	require.Equal(t, string(want), got)
}

// TestStatusPausedSaysHowToContinue: a task a budget paused says why, and
// the command that raises the budget and resumes it; its time left is
// unknown.
func TestStatusPausedSaysHowToContinue(t *testing.T) {
	t.Parallel()
	rep := statusReport()
	rep.Task.Status, rep.Task.ShownStatus = api.Paused, string(api.Paused)
	rep.Task.Pause = &api.PauseReason{Kind: api.PauseBudget, Name: "units", Used: 4000, Limit: 4000}
	rep.Progress.Status, rep.Progress.RatePerS, rep.Progress.EtaS = "paused", nil, nil
	rep.Progress.Waiting.Paused = rep.Task.Pause.String()
	var out bytes.Buffer
	Report(&out, rep)
	require.Contains(t, out.String(), "site-audit · paused 1h12m · 1,840 / 3,000 pages (61%) · time left unknown · budget 58% used\n")
	require.Contains(t, out.String(), "  paused: budget units reached: 4000 of 4000\n  continue: lhengine resume t-0001 --budget units=+4000\n")
}

// TestEventsPrintTheDate: an event line has the date and the time, local.
func TestEventsPrintTheDate(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	Event(&out, &api.Event{Seq: 7, Type: api.EvSubmitted, Time: time.Date(2026, 3, 4, 12, 0, 5, 0, time.Local), Message: "3 steps"})
	require.Equal(t, "    7 2026-03-04 12:00:05 submitted      · 3 steps\n", out.String())
}
