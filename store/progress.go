package store

import (
	"maps"
	"slices"
	"time"

	"github.com/lhengine/lhengine/ledger"
)

// Progress as a person reads it (specs/ledger.md, "Progress"): the task
// record carries what a status needs, so reading a status costs the same
// for 10 committed units as for 100,000. The record holds the pinned
// progress block (ProgressSpec), the number of units of the progress step
// committed so far and a small ring of (time, committed) samples written by
// the commits themselves, at most one every ProgressSampleEvery; the rate is
// read off the ring and the newest commit.

// newProgress is the record Submit writes for spec over steps; nil, or a
// spec naming no step of steps, counts the units of every step.
func newProgress(spec *ledger.ProgressSpec, steps []ledger.StepState) *ledger.Progress {
	p := &ledger.Progress{ProgressSpec: ledger.ProgressSpec{StepIndex: -1}}
	if spec != nil {
		p.ProgressSpec = *spec
	}
	if p.StepIndex < 0 || p.StepIndex >= len(steps) || steps[p.StepIndex].Name != p.Step {
		p.Step, p.StepIndex = "", -1
	}
	return p
}

// sampleProgress counts a unit of step committed at now: the progress
// step's count and, at most every ProgressSampleEvery, a sample. A pause
// or a stall longer than ProgressStale starts the ring again, so the rate
// is that of the current run only.
func sampleProgress(task *ledger.Task, step int, now time.Time) {
	p := task.Meter
	if p == nil || (p.StepIndex >= 0 && p.StepIndex != step) {
		return
	}
	q := *p
	q.Committed++
	q.Last = ledger.ProgressSample{At: now, Committed: q.Committed}
	n := len(q.Samples)
	switch {
	case n == 0 || now.Sub(q.Samples[n-1].At) > ledger.ProgressStale:
		q.Samples = []ledger.ProgressSample{q.Last}
	case now.Sub(q.Samples[n-1].At) >= ledger.ProgressSampleEvery:
		q.Samples = append(slices.Clone(q.Samples[max(n+1-ledger.ProgressSamples, 0):]), q.Last)
	}
	task.Meter = &q
}

// countNote counts a note of kind a committed unit recorded.
func countNote(task *ledger.Task, kind string) {
	if task.Meter == nil {
		return
	}
	q := *task.Meter
	q.Kinds = maps.Clone(q.Kinds)
	if q.Kinds == nil {
		q.Kinds = map[string]int64{}
	}
	q.Kinds[kind]++
	task.Meter = &q
}
