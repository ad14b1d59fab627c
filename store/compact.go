package store

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/lhengine/lhengine/ledger"
	"github.com/lhengine/lhengine/store/internal/kv"
	"github.com/lhengine/lhengine/store/internal/lease"
)

// Compaction: a plugin that condenses a task's free-form notes (a
// compaction step) replaces some of them with a summary. Decisions and
// blockers are protected: no summary may replace them, so they stay in
// every reading (the handoff, status) verbatim. The task's objective and
// constraints (the manifest), its steps' state and its attempts are not
// notes and are out of a summary's reach by construction.

// CompactNotes replaces the notes replaces of the task of lease l with one
// summary note (kind summary, text summary, Replaces the list), in one
// transaction: each replaced note records the summary's seq and stays on
// record. A protected note gets ErrProtected, a note already replaced or
// unknown ErrNotFound; either changes nothing. It returns the summary's
// seq.
func (s *Store) CompactNotes(ctx context.Context, l ledger.Lease, replaces []uint64, summary string) (uint64, error) {
	var seq uint64
	err := s.update(ctx, func(t *kv.Tx) error {
		_, task, err := lease.Leased(t, l)
		if err != nil {
			return err
		}
		replaces = slices.Compact(slices.Sorted(slices.Values(replaces)))
		if len(replaces) == 0 {
			return fmt.Errorf("%w: a summary must replace at least one note", ledger.ErrNotFound)
		}
		seq = task.Notes
		notes := make([]ledger.Note, len(replaces))
		for i, n := range replaces {
			if err := t.GetJSON(kv.NoteKey(task.ID, n), &notes[i]); err != nil {
				if errors.Is(err, ledger.ErrNotFound) {
					return fmt.Errorf("%w: task %s has no note %d", ledger.ErrNotFound, task.ID, n)
				}
				return err
			}
			switch {
			case ledger.Protected(notes[i].Kind):
				return fmt.Errorf("%w: note %d is a %s, which no summary may replace", ledger.ErrProtected, n, notes[i].Kind)
			case notes[i].ReplacedBy != 0:
				return fmt.Errorf("%w: note %d was replaced already, by summary %d", ledger.ErrNotFound, n, notes[i].ReplacedBy)
			}
		}
		t.Durable = true
		st := t.Step(task, l.Step)
		for i := range notes {
			notes[i].ReplacedBy = seq
			if err := t.PutJSON(kv.NoteKey(task.ID, notes[i].Seq), &notes[i]); err != nil {
				return err
			}
		}
		sum := ledger.Note{Seq: seq, Kind: ledger.NoteSummary, Text: summary, Step: st.Name, Item: l.Item, Attempt: l.Attempt,
			Time: s.now(), Replaces: replaces}
		if err := t.PutJSON(kv.NoteKey(task.ID, seq), &sum); err != nil {
			return err
		}
		task.Notes++
		item := l.Item
		if err := s.event(t, task, ledger.Event{Type: ledger.EvNotesCompacted, Step: st.Name, Item: &item, Attempt: l.Attempt,
			Message: fmt.Sprintf("summary note %d replaces %d notes", seq, len(replaces))}); err != nil {
			return err
		}
		return t.SaveTask(task)
	})
	return seq, err
}
