package hostcall

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/lhengine/lhengine/engine/internal/guest"
	"github.com/lhengine/lhengine/ledger"
)

// maxListedNotes bounds what one notes.list returns.
const maxListedNotes = 1000

// notesList answers notes.list: the task's notes a summary may replace
// (findings and summaries not replaced yet), oldest first, after seq
// "after", at most "limit" (≤ 1000). Decisions and blockers are never
// listed: a compaction step never sees them (specs/abi.md §4.4).
func (a *Attempt) notesList(raw []byte) ([]byte, error) {
	r := struct {
		After *int64 `json:"after"`
		Limit int    `json:"limit"`
	}{}
	if err := json.Unmarshal(raw, &r); err != nil || r.Limit < 0 || (r.After != nil && *r.After < 0) {
		return nil, herr(guest.StatusInvalid, "notes.list wants {\"after\": seq (optional), \"limit\": 1 to %d (optional)}", maxListedNotes)
	}
	if r.Limit == 0 || r.Limit > maxListedNotes {
		r.Limit = maxListedNotes
	}
	after := int64(-1)
	if r.After != nil {
		after = *r.After
	}
	var notes []ledger.Note
	err := a.Store.Read(func(rd ledger.Reader) error {
		var err error
		notes, err = rd.OpenNotes(a.Lease.Task, after, r.Limit)
		return err
	})
	if err != nil {
		return nil, herr(guest.StatusInternal, "reading the task's notes: %v", err)
	}
	if notes == nil {
		notes = []ledger.Note{}
	}
	return json.Marshal(struct {
		Notes []ledger.Note `json:"notes"`
	}{notes})
}

// notesCompact answers notes.compact: the notes "replaces" (seqs from
// notes.list) are replaced by one summary note with text "summary", at
// once (not with the attempt's commit). A protected note is refused
// (denied), one replaced already or unknown is not found.
func (a *Attempt) notesCompact(ctx context.Context, raw []byte) ([]byte, error) {
	var r struct {
		Replaces []uint64 `json:"replaces"`
		Summary  string   `json:"summary"`
	}
	if err := json.Unmarshal(raw, &r); err != nil || len(r.Replaces) == 0 || r.Summary == "" {
		return nil, herr(guest.StatusInvalid, "notes.compact wants {\"replaces\": [seq, ...] (at least one), \"summary\": string}")
	}
	if uint64(len(r.Summary)) > a.limits().NoteBytes {
		return nil, herr(guest.StatusTooLarge, "notes.compact: a summary of %d bytes is larger than limits.note_bytes (%d)", len(r.Summary), a.limits().NoteBytes)
	}
	seq, err := a.Store.CompactNotes(ctx, a.Lease, r.Replaces, r.Summary)
	switch {
	case errors.Is(err, ledger.ErrProtected):
		return nil, herr(guest.StatusDenied, "%v", err)
	case errors.Is(err, ledger.ErrNotFound):
		return nil, herr(guest.StatusNotFound, "%v", err)
	case err != nil:
		return nil, leaseErr(err)
	}
	return json.Marshal(struct {
		Seq uint64 `json:"seq"`
	}{seq})
}
