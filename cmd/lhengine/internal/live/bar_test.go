package live

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lhengine/lhengine/api"
)

// Off a terminal the status line is printed when the step changes and
// every livePlainEvery otherwise, not at each read.
func TestLivePlainLinesAreSpaced(t *testing.T) {
	t.Parallel()
	var buf strings.Builder
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	b := NewBar(&buf, false, nil)
	b.now = func() time.Time { return now }
	total := 10
	report := func(done, cursor int) *api.Report {
		pct := float64(done * 10)
		return &api.Report{
			Task: api.Task{Status: api.Running, Cursor: cursor,
				Steps: []api.StepState{{Name: "a"}, {Name: "b"}}},
			Progress: &api.Progress{Name: "t", Status: "running", Unit: "pages", Step: "b", Done: done, Total: &total, Percent: &pct},
		}
	}
	b.show(report(0, 0), false) // the first
	now = now.Add(time.Second)
	b.show(report(0, 1), false) // the step changed
	for i := 1; i <= 4; i++ {
		now = now.Add(time.Second)
		b.show(report(i, 1), false) // within 5 s of the last line
	}
	now = now.Add(time.Second)
	b.show(report(5, 1), false) // 5 s after it
	b.show(report(6, 1), true)  // the last
	require.Equal(t, []string{
		"t · running 0s · 0 / 10 pages (0%) · time left unknown · step 1/2 a",
		"t · running 0s · 0 / 10 pages (0%) · time left unknown · step 2/2 b",
		"t · running 0s · 5 / 10 pages (50%) · time left unknown · step 2/2 b",
		"t · running 0s · 6 / 10 pages (60%) · time left unknown · step 2/2 b",
	}, strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n"))
}

// The texts beside the bar: the count of the counted step in its unit,
// the rate and time left when they can be told, "time left unknown"
// otherwise, the step the task is at, and its pass after a repair (the
// count is then the new pass's, so it never runs backwards unexplained).
func TestBarTexts(t *testing.T) {
	t.Parallel()
	task := api.Task{Status: api.Running, Cursor: 1, Steps: []api.StepState{{Name: "list"}, {Name: "check"}, {Name: "report"}}}
	total, pct, rate, eta := 3000, 61.3, 24.0, 48*60.0
	r := &api.Report{Task: task, Progress: &api.Progress{Name: "site-audit", Status: "running", Unit: "pages",
		Step: "check", Pass: 1, Done: 1840, Total: &total, Percent: &pct, RatePerS: &rate, EtaS: &eta, ElapsedS: 4320}}
	head, tail := barTexts(r)
	require.Equal(t, "site-audit 1h12m", head)
	require.Equal(t, "1,840 / 3,000 pages (61%) · 24 pages/s · about 48 min left · step 2/3 check", tail)

	// A repair sent the task back to list: check's next pass, its total
	// not known yet, no time left.
	r.Task.Cursor = 0
	r.Progress.Pass, r.Progress.Done, r.Progress.Total, r.Progress.Percent, r.Progress.RatePerS, r.Progress.EtaS = 2, 0, nil, nil, nil, nil
	_, tail = barTexts(r)
	require.Equal(t, "0 pages / total not known yet · time left unknown · step 1/3 list · pass 2", tail)
}
