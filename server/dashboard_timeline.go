package server

import (
	"fmt"
	"strings"
	"time"

	"github.com/lhengine/lhengine/ledger"
)

// The task page's timeline: one bar per pass of a step, from its
// step_started event to its step_done (or to what ended it: a repair that
// sent the task back, a retry, the task's failure or cancellation), and
// one mark per repair, all read from the event log.

// timelineWidth is the width of the timeline's drawing, in the units of
// its SVG viewBox: bars are placed in 0..timelineWidth.
const timelineWidth = 1000

// timelineMax is how many bars the page draws: the newest.
const timelineMax = 120

// passBar is one pass of a step, or one repair, on the timeline.
type passBar struct {
	Step   int // index of the step
	Number int // the step's number as lhengine status shows it (from 1)
	Name   string
	Pass   int
	// Repair: a repair the step asked for (Message says which), drawn as
	// a mark at Start.
	Repair  bool
	Message string
	Start   time.Time
	End     time.Time // zero while Open
	Open    bool      // the pass has not ended
	// Outcome is how the pass ended: done, sent back (by a repair),
	// retried, failed, cancelled; "running" while it goes on; for a
	// repair, "repair" or "refused" (the repair budget was spent).
	Outcome string
	// X and W place the bar in 0..timelineWidth.
	X, W int
	// Took is how long it took ("12s so far" while open).
	Took string
}

// Class is the bar's class in the page: its kind and outcome.
func (b *passBar) Class() string {
	if b.Repair {
		return "repair o-" + b.Outcome
	}
	return "o-" + strings.ReplaceAll(b.Outcome, " ", "-")
}

// Duration is how long the pass took, or has taken until now.
func (b *passBar) duration(now time.Time) time.Duration {
	if b.Open {
		return now.Sub(b.Start)
	}
	return b.End.Sub(b.Start)
}

// timeline builds the bars of a task from its events, read in order with
// add, then placed with place.
type timeline struct {
	steps map[string]int // step name → index
	bars  []*passBar
	open  map[int]*passBar // the open pass of each step
	count map[int]int      // passes seen of each step
}

func newTimeline(t *ledger.Task) *timeline {
	tl := &timeline{steps: make(map[string]int, len(t.Steps)), open: map[int]*passBar{}, count: map[int]int{}}
	for i, s := range t.Steps {
		tl.steps[s.Name] = i
	}
	return tl
}

// closeAll ends every open pass at at, with outcome.
func (tl *timeline) closeAll(at time.Time, outcome string) {
	for i, b := range tl.open {
		b.End, b.Open, b.Outcome = at, false, outcome
		delete(tl.open, i)
	}
}

// add reads one event.
func (tl *timeline) add(e *ledger.Event) {
	idx, known := tl.steps[e.Step]
	switch e.Type {
	case ledger.EvStepStarted:
		if !known {
			return
		}
		if b := tl.open[idx]; b != nil {
			b.End, b.Open, b.Outcome = e.Time, false, "sent back"
		}
		tl.count[idx]++
		pass := tl.count[idx]
		var p int
		if _, err := fmt.Sscanf(e.Message, "pass %d", &p); err == nil && p > 0 {
			pass = p
		}
		b := &passBar{Step: idx, Number: idx + 1, Name: e.Step, Pass: pass, Start: e.Time, Open: true, Outcome: "running"}
		tl.open[idx] = b
		tl.bars = append(tl.bars, b)
	case ledger.EvStepDone:
		if b := tl.open[idx]; known && b != nil {
			b.End, b.Open, b.Outcome = e.Time, false, "done"
			delete(tl.open, idx)
		}
	case ledger.EvRepair:
		if !known {
			return
		}
		r := &passBar{Step: idx, Number: idx + 1, Name: e.Step, Repair: true, Message: e.Message, Start: e.Time, End: e.Time, Outcome: "repair"}
		if b := tl.open[idx]; b != nil {
			r.Pass = b.Pass
		}
		if strings.Contains(e.Message, " refused ") {
			// The repair budget was spent: the task pauses, the pass goes on
			// once it is resumed.
			r.Outcome = "refused"
		} else {
			tl.closeAll(e.Time, "sent back")
		}
		tl.bars = append(tl.bars, r)
	case ledger.EvRetried:
		tl.closeAll(e.Time, "retried")
	case ledger.EvFailed:
		tl.closeAll(e.Time, "failed")
	case ledger.EvCancelled:
		tl.closeAll(e.Time, "cancelled")
	case ledger.EvSucceeded:
		tl.closeAll(e.Time, "done")
	}
}

// place keeps the newest timelineMax bars and positions them between the
// first one's start and the last end (now for a pass still open); it
// returns the bars, how many older ones were left out, and the span.
func (tl *timeline) place(now time.Time) (bars []*passBar, more int, from, to time.Time) {
	bars = tl.bars
	if len(bars) > timelineMax {
		more = len(bars) - timelineMax
		bars = bars[more:]
	}
	if len(bars) == 0 {
		return nil, 0, time.Time{}, time.Time{}
	}
	from, to = bars[0].Start, bars[0].Start
	for _, b := range bars {
		end := b.End
		if b.Open {
			end = now
		}
		if end.After(to) {
			to = end
		}
	}
	total := to.Sub(from)
	if total <= 0 {
		total = time.Millisecond
	}
	for _, b := range bars {
		b.X = int(int64(timelineWidth) * int64(b.Start.Sub(from)) / int64(total))
		b.W = int(int64(timelineWidth) * int64(b.duration(now)) / int64(total))
		// A bar too short to see, or a repair's mark, is drawn 3 units wide.
		b.W = max(b.W, 3)
		b.X = min(b.X, timelineWidth-b.W)
		switch {
		case b.Repair:
		case b.Open:
			b.Took = span(b.duration(now)) + " so far"
		default:
			b.Took = span(b.duration(now))
		}
	}
	return bars, more, from, to
}

// lastPass is the newest pass of step idx on the timeline, nil if none.
func (tl *timeline) lastPass(idx int) *passBar {
	for i := len(tl.bars) - 1; i >= 0; i-- {
		if b := tl.bars[i]; b.Step == idx && !b.Repair {
			return b
		}
	}
	return nil
}
