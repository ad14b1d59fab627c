package server

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lhengine/lhengine/ledger"
)

// TestPrettyJSONShowsHTMLCharacters: the escapes Go's encoder writes for
// <, > and & are shown as the characters (the page's template escapes
// them); every other escape, and an escaped backslash before "u003c",
// stays as it is; what is not JSON is shown as it is.
func TestPrettyJSONShowsHTMLCharacters(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		`{"a":"\u003cb\u003e \u0026 \u003C"}`: "{\n  \"a\": \"<b> & <\"\n}",
		`["\\u003c", "\u00e9", "\"\u003e"]`:   "[\n  \"\\\\u003c\",\n  \"\\u00e9\",\n  \"\\\"\u003e\"\n]",
		`{"n": 1e400}`:                        "{\n  \"n\": 1e400\n}",
		`not json \u003c`:                     `not json \u003c`,
		``:                                    ``,
	} {
		if got := prettyJSON(json.RawMessage(in)); got != want {
			t.Errorf("prettyJSON(%s) = %q, want %q", in, got, want)
		}
	}
}

// TestSpan: durations as the pages write them, to the unit that matters.
func TestSpan(t *testing.T) {
	t.Parallel()
	for d, want := range map[time.Duration]string{
		-time.Second:                         "0ms",
		850 * time.Millisecond:               "850ms",
		59999 * time.Millisecond:             "59s",
		3*time.Minute + 5*time.Second:        "3m05s",
		2*time.Hour + 4*time.Minute + 20e9:   "2h04m",
		76*time.Hour + 40*time.Minute:        "3d05h",
		47*time.Hour + 59*time.Minute + 59e9: "48h00m",
	} {
		require.Equal(t, want, span(d), d.String())
	}
}

// TestTimeline: the bars of a task's passes and repairs, from its events:
// a pass ends with its step_done, a repair ends every open pass (sent
// back) unless it was refused, a retry and the task's end close what is
// open; a pass still open runs to now; bars are placed in order in the
// drawing.
func TestTimeline(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 3, 4, 12, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	task := &ledger.Task{Steps: []ledger.StepState{{Name: "draft"}, {Name: "verify"}, {Name: "ship"}}}
	tl := newTimeline(task)
	for _, e := range []ledger.Event{
		{Type: ledger.EvSubmitted, Time: at(0)},
		{Type: ledger.EvStepStarted, Step: "draft", Message: "pass 1, 1 units", Time: at(0)},
		{Type: ledger.EvUnitDone, Step: "draft", Time: at(10)},
		{Type: ledger.EvStepDone, Step: "draft", Time: at(10)},
		{Type: ledger.EvStepStarted, Step: "verify", Message: "pass 1, 1 units", Time: at(10)},
		{Type: ledger.EvRepair, Step: "verify", Message: `repair 1 of 2: back to "draft": no risks`, Time: at(20)},
		{Type: ledger.EvStepStarted, Step: "draft", Message: "pass 2, 1 units", Time: at(20)},
		{Type: ledger.EvStepDone, Step: "draft", Time: at(30)},
		{Type: ledger.EvStepStarted, Step: "verify", Message: "pass 2, 1 units", Time: at(30)},
		{Type: ledger.EvRepair, Step: "verify", Message: "repair 3 refused (max 2): still no risks", Time: at(40)},
		{Type: ledger.EvRetried, Time: at(50)},
		{Type: ledger.EvStepStarted, Step: "verify", Message: "pass 3, 1 units", Time: at(50)},
		{Type: ledger.EvStepDone, Step: "verify", Time: at(60)},
		{Type: ledger.EvStepStarted, Step: "ship", Message: "pass 1, 1 units", Time: at(60)},
		{Type: ledger.EvStepStarted, Step: "no such step", Time: at(61)},
	} {
		tl.add(&e)
	}
	bars, more, from, to := tl.place(at(100))
	require.Zero(t, more)
	require.Equal(t, at(0), from)
	require.Equal(t, at(100), to)
	type row struct {
		Step, Pass int
		Repair     bool
		Outcome    string
		X, W       int
		Took       string
	}
	var got []row
	for _, b := range bars {
		got = append(got, row{b.Number, b.Pass, b.Repair, b.Outcome, b.X, b.W, b.Took})
	}
	require.Equal(t, []row{
		{1, 1, false, "done", 0, 100, "10s"},
		{2, 1, false, "sent back", 100, 100, "10s"},
		{2, 1, true, "repair", 200, 3, ""},
		{1, 2, false, "done", 200, 100, "10s"},
		{2, 2, false, "retried", 300, 200, "20s"},
		{2, 2, true, "refused", 400, 3, ""},
		{2, 3, false, "done", 500, 100, "10s"},
		{3, 1, false, "running", 600, 400, "40s so far"},
	}, got)
	require.Equal(t, "o-sent-back", bars[1].Class())
	require.Equal(t, "repair o-refused", bars[5].Class())
	require.Equal(t, 3, tl.lastPass(1).Pass, "verify's latest pass")
	require.Nil(t, tl.lastPass(7))
}
