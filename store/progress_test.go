package store

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lhengine/lhengine/ledger"
)

// TestProgressRate: the rate is unknown with one sample, read off the
// ring once commits span ProgressSampleEvery, unknown again once the
// newest commit is older than ProgressStale; the ring never holds more
// than ProgressSamples samples and starts again after a stall.
func TestProgressRate(t *testing.T) {
	t.Parallel()
	b := setupOnDisk(t, fanOutPlanner(40))
	task, _, err := b.s.Submit(b.ctx, ledger.NewTask{Name: "t", Steps: []ledger.StepState{{Name: "each", FanOut: true, Limit: 1}},
		Progress: &ledger.ProgressSpec{Unit: "pages", Step: "each", StepIndex: 0}})
	require.NoError(t, err)
	require.Equal(t, "pages", task.Meter.Unit)

	l := b.claimN(t, 1)[0]
	task = b.done(t, l, `1`)
	_, ok := task.Meter.Rate(b.clock.Now())
	require.False(t, ok, "one sample: no rate")
	for i := 0; i < 29; i++ { // one unit a second for 29 more seconds
		b.clock.Add(time.Second)
		task = b.done(t, b.claimN(t, 1)[0], `1`)
	}
	require.EqualValues(t, 30, task.Meter.Committed)
	require.Len(t, task.Meter.Samples, ledger.ProgressSamples, "samples every 3s over 29s, the ring keeps 10")
	rate, ok := task.Meter.Rate(b.clock.Now())
	require.True(t, ok)
	require.InDelta(t, 1.0, rate, 1e-9)

	// The task record read back holds the same ring.
	var back *ledger.Task
	require.NoError(t, b.s.Read(func(r ledger.Reader) error { back, err = r.Task(task.ID); return err }))
	require.Equal(t, task.Meter, back.Meter)

	b.clock.Add(ledger.ProgressStale + time.Second)
	_, ok = task.Meter.Rate(b.clock.Now())
	require.False(t, ok, "nothing committed for over a minute: no current rate")
	task = b.done(t, b.claimN(t, 1)[0], `1`)
	require.Len(t, task.Meter.Samples, 1, "a stall starts the ring again")
	_, ok = task.Meter.Rate(b.clock.Now())
	require.False(t, ok)
}

// TestProgressCountsItsStepOnly: commits of other steps do not move the
// progress of the progress step; without a spec every step counts.
func TestProgressCountsItsStepOnly(t *testing.T) {
	t.Parallel()
	b := setupOnDisk(t, fanOutPlanner(3))
	steps := []ledger.StepState{{Name: "plan", Limit: 1}, {Name: "each", FanOut: true, Limit: 3}}
	_, _, err := b.s.Submit(b.ctx, ledger.NewTask{Name: "t", Steps: steps, Progress: &ledger.ProgressSpec{Unit: "files", Step: "each", StepIndex: 1}})
	require.NoError(t, err)
	task := b.done(t, b.claimN(t, 1)[0], `[1,2,3]`)
	require.EqualValues(t, 0, task.Meter.Committed, "the plan step is not the progress step")
	for _, l := range b.claimN(t, 3) {
		task = b.done(t, l, `1`)
	}
	require.EqualValues(t, 3, task.Meter.Committed)

	// A spec whose index does not name its step, or none: every step.
	task, _, err = b.s.Submit(b.ctx, ledger.NewTask{Name: "t", Steps: steps, Progress: &ledger.ProgressSpec{Step: "each", StepIndex: 0}})
	require.NoError(t, err)
	require.Equal(t, -1, task.Meter.StepIndex)
	task, _, err = b.s.Submit(b.ctx, ledger.NewTask{Name: "t", Steps: steps})
	require.NoError(t, err)
	require.Equal(t, -1, task.Meter.StepIndex)
}

// TestNotesPageAndRecent: pages filter by kind, step and text, go on from
// where the last stopped, and the newest notes are read newest first.
func TestNotesPageAndRecent(t *testing.T) {
	t.Parallel()
	b := setupOnDisk(t, fanOutPlanner(30))
	task, _, err := b.s.Submit(b.ctx, ledger.NewTask{Name: "t", Steps: []ledger.StepState{{Name: "each", FanOut: true, Limit: 30}}})
	require.NoError(t, err)
	kinds := []string{ledger.NoteFinding, ledger.NoteDecision, ledger.NoteBlocker}
	for i, l := range b.claimN(t, 30) {
		n := ledger.Note{Kind: kinds[i%3], Text: fmt.Sprintf("page %d: Missing title", i)}
		if i%2 == 1 {
			n.Text = fmt.Sprintf("page %d: ok", i)
		}
		task, err = b.s.Commit(b.ctx, ledger.Result{Lease: l, Output: json.RawMessage(`1`), Notes: []ledger.Note{n}})
		require.NoError(t, err)
	}
	require.EqualValues(t, 30, task.Notes)
	require.NoError(t, b.s.Read(func(r ledger.Reader) error {
		page, next, err := r.NotesPage(task.ID, ledger.NoteQuery{Kind: ledger.NoteFinding, Grep: "missing TITLE", Limit: 3})
		require.NoError(t, err)
		require.Len(t, page, 3)
		for _, n := range page {
			require.Equal(t, ledger.NoteFinding, n.Kind)
			require.Contains(t, n.Text, "Missing title")
		}
		require.Equal(t, page[2].Seq+1, next)
		rest, next, err := r.NotesPage(task.ID, ledger.NoteQuery{Kind: ledger.NoteFinding, Grep: "missing title", From: next})
		require.NoError(t, err)
		require.Len(t, rest, 2, "findings 0, 6, 12, 18, 24 have a missing title")
		require.Zero(t, next, "nothing left")

		none, _, err := r.NotesPage(task.ID, ledger.NoteQuery{Step: "other"})
		require.NoError(t, err)
		require.Empty(t, none)

		recent, err := r.RecentNotes(task, 4, nil)
		require.NoError(t, err)
		require.Len(t, recent, 4)
		for i, n := range recent {
			require.EqualValues(t, 29-i, n.Seq, "newest first")
		}
		two, err := r.RecentNotes(task, 10, func(read []ledger.Note) bool { return len(read) == 2 })
		require.NoError(t, err)
		require.Len(t, two, 2, "enough ends the walk")
		return nil
	}))
}

// TestNotesCountedByKind: the record counts the notes of each kind as
// units commit them, so a status needs no walk of the notes.
func TestNotesCountedByKind(t *testing.T) {
	t.Parallel()
	b := setupOnDisk(t, fanOutPlanner(5))
	task, _, err := b.s.Submit(b.ctx, ledger.NewTask{Name: "t", Steps: []ledger.StepState{{Name: "each", FanOut: true, Limit: 5}}})
	require.NoError(t, err)
	for _, l := range b.claimN(t, 5) {
		task, err = b.s.Commit(b.ctx, ledger.Result{Lease: l, Output: json.RawMessage(`1`),
			Notes: []ledger.Note{{Kind: ledger.NoteFinding, Text: "f"}, {Kind: ledger.NoteFinding, Text: "g"}, {Kind: ledger.NoteDecision, Text: "d"}}})
		require.NoError(t, err)
	}
	require.Equal(t, map[string]int64{ledger.NoteFinding: 10, ledger.NoteDecision: 5}, task.Meter.Kinds)
}
