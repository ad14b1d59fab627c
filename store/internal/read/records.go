package read

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/lhengine/lhengine/ledger"
	"github.com/lhengine/lhengine/store/internal/kv"
)

// notesScan bounds the notes one page looks at, matching or not: a
// filter that matches little returns a shorter page and where to go on.
const notesScan = 10000

// Notes returns a task's progress notes, oldest first.
func (r *Reader) Notes(id string) ([]ledger.Note, error) {
	var out []ledger.Note
	err := r.t.Scan([]byte("n/"+id+"/"), func(_, val []byte) (bool, error) {
		var n ledger.Note
		if err := json.Unmarshal(val, &n); err != nil {
			return false, err
		}
		out = append(out, n)
		return true, nil
	})
	return out, err
}

// NotesPage returns the notes of task id that q selects, oldest first,
// from seq q.From on, and the seq to ask for the next page from (0 when no
// note is left to look at). It looks at no more than 10,000 notes, so a
// page may hold fewer than q.Limit notes and still have a next one.
func (r *Reader) NotesPage(id string, q ledger.NoteQuery) ([]ledger.Note, uint64, error) {
	limit := q.Limit
	if limit <= 0 {
		limit = ledger.DefaultNotesPage
	}
	limit = min(limit, ledger.MaxNotesPage)
	out := []ledger.Note{}
	var next uint64
	seen := 0
	err := r.t.ScanFrom([]byte("n/"+id+"/"), kv.NoteKey(id, q.From), func(_, val []byte) (bool, error) {
		if len(out) == limit || seen == notesScan {
			return false, nil
		}
		var n ledger.Note
		if err := json.Unmarshal(val, &n); err != nil {
			return false, err
		}
		seen++
		next = n.Seq + 1
		if q.Match(&n) {
			out = append(out, n)
		}
		return true, nil
	})
	if err != nil {
		return nil, 0, err
	}
	if next == 0 || next >= r.noteCount(id) {
		next = 0
	}
	return out, next, nil
}

// noteCount is the seq the task's next note will take.
func (r *Reader) noteCount(id string) uint64 {
	var task ledger.Task
	if err := r.t.GetJSON(kv.TaskKey(id), &task); err != nil {
		return 0
	}
	return task.Notes
}

// RecentNotes returns the newest notes of task, up to max, newest first,
// walking the notes back from the newest, never the older ones; enough,
// when not nil, ends the walk early once it says the notes read so far
// are enough.
func (r *Reader) RecentNotes(task *ledger.Task, max int, enough func([]ledger.Note) bool) ([]ledger.Note, error) {
	out := make([]ledger.Note, 0, min(uint64(max), task.Notes))
	if max <= 0 || task.Notes == 0 {
		return out, nil
	}
	prefix := []byte("n/" + task.ID + "/")
	it := r.t.Iterate(kv.IterOptions{Prefix: prefix, Reverse: true, Prefetch: min(max, 64)})
	defer it.Close()
	for it.Seek(kv.NoteKey(task.ID, task.Notes)); it.Valid() && len(out) < max; it.Next() {
		var n ledger.Note
		if err := it.Value(func(v []byte) error { return json.Unmarshal(v, &n) }); err != nil {
			return nil, err
		}
		out = append(out, n)
		if enough != nil && enough(out) {
			break
		}
	}
	return out, nil
}

// OpenNotes returns up to limit of a task's notes that a summary may
// replace (not protected, not replaced yet), oldest first, after seq after
// (-1 for from the start).
func (r *Reader) OpenNotes(id string, after int64, limit int) ([]ledger.Note, error) {
	var out []ledger.Note
	start := []byte("n/" + id + "/")
	if after >= 0 {
		start = kv.NoteKey(id, uint64(after)+1)
	}
	err := r.t.ScanFrom([]byte("n/"+id+"/"), start, func(_, val []byte) (bool, error) {
		var n ledger.Note
		if err := json.Unmarshal(val, &n); err != nil {
			return false, err
		}
		if !ledger.Protected(n.Kind) && n.ReplacedBy == 0 {
			out = append(out, n)
		}
		return len(out) < limit, nil
	})
	return out, err
}

// Approvals lists a task's approvals in the order they were asked for.
func (r *Reader) Approvals(id string) ([]ledger.Approval, error) {
	var out []ledger.Approval
	err := r.t.Scan([]byte("r/"+id+"/"), func(_, val []byte) (bool, error) {
		var a ledger.Approval
		if err := json.Unmarshal(val, &a); err != nil {
			return false, err
		}
		out = append(out, a)
		return true, nil
	})
	return out, err
}

// Approval returns approval id of task; ErrNotFound when there is none.
func (r *Reader) Approval(task, id string) (*ledger.Approval, error) {
	n, err := kv.ApprovalSeq(id)
	if err != nil {
		return nil, err
	}
	a := new(ledger.Approval)
	if err := r.t.GetJSON(kv.ApprovalKey(task, n), a); err != nil {
		if errors.Is(err, ledger.ErrNotFound) {
			return nil, fmt.Errorf("%w: task %s has no approval %s", ledger.ErrNotFound, task, id)
		}
		return nil, err
	}
	return a, nil
}

// RecentApprovals returns the newest approvals of task, up to max, newest
// first, by point reads as RecentNotes.
func (r *Reader) RecentApprovals(task *ledger.Task, max int) ([]ledger.Approval, error) {
	var out []ledger.Approval
	for seq, looked := task.NextApproval, 0; seq > 0 && len(out) < max && looked < 4*max; seq, looked = seq-1, looked+1 {
		var a ledger.Approval
		if err := r.t.GetJSON(kv.ApprovalKey(task.ID, seq), &a); err != nil {
			if errors.Is(err, ledger.ErrNotFound) {
				continue
			}
			return nil, err
		}
		out = append(out, a)
	}
	return out, nil
}

// Artifacts lists the provenance records of a task's artifacts.
func (r *Reader) Artifacts(id string) ([]ledger.Provenance, error) {
	var out []ledger.Provenance
	err := r.t.Scan([]byte("p/"+id+"/"), func(_, val []byte) (bool, error) {
		var p ledger.Provenance
		if err := json.Unmarshal(val, &p); err != nil {
			return false, err
		}
		out = append(out, p)
		return true, nil
	})
	return out, err
}

// Effects lists a task's journal entries.
func (r *Reader) Effects(id string) ([]ledger.Effect, error) {
	var out []ledger.Effect
	err := r.t.Scan([]byte("j/"+id+"/"), func(_, val []byte) (bool, error) {
		var e ledger.Effect
		if err := json.Unmarshal(val, &e); err != nil {
			return false, err
		}
		out = append(out, e)
		return true, nil
	})
	return out, err
}

// ModelCalls lists a task's model journal entries, by step, item and
// request hash: the recorded responses and the intents of calls being sent
// (State ModelSending).
func (r *Reader) ModelCalls(id string) ([]ledger.ModelCall, error) {
	var out []ledger.ModelCall
	err := r.t.Scan([]byte("g/"+id+"/"), func(_, val []byte) (bool, error) {
		var c ledger.ModelCall
		if err := json.Unmarshal(val, &c); err != nil {
			return false, err
		}
		out = append(out, c)
		return true, nil
	})
	return out, err
}

// Notifications lists a task's outbox entries, in event order.
func (r *Reader) Notifications(id string) ([]ledger.Notification, error) {
	var out []ledger.Notification
	err := r.t.Scan([]byte("x/"+id+"/"), func(_, val []byte) (bool, error) {
		var n ledger.Notification
		if err := json.Unmarshal(val, &n); err != nil {
			return false, err
		}
		out = append(out, n)
		return true, nil
	})
	return out, err
}

// Facts returns the facts recorded for task id; nil when it has none (a
// task without an environment block).
func (r *Reader) Facts(id string) (*ledger.Facts, error) {
	f := new(ledger.Facts)
	if err := r.t.GetJSON(kv.FactsKey(id), f); err != nil {
		if errors.Is(err, ledger.ErrNotFound) {
			return nil, nil
		}
		return nil, err
	}
	return f, nil
}
