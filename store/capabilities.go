package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/lhengine/lhengine/ledger"
	"github.com/lhengine/lhengine/store/internal/budget"
	"github.com/lhengine/lhengine/store/internal/index"
	"github.com/lhengine/lhengine/store/internal/kv"
	"github.com/lhengine/lhengine/store/internal/lease"
	"github.com/lhengine/lhengine/store/internal/quota"
)

// Host capabilities keep their durable records here: artifacts (content-
// addressed, with provenance), the effect journal, and each unit's own
// key/value cursor (their keys: internal/kv). Progress counts and notes
// ride in the unit's commit (Result.Counts, Result.Notes) so a retried unit
// never counts twice.

// PutArtifact stores data (deduplicated by its sha256) and records its
// provenance; it returns the ref "sha256:<hex>". The same unit putting the
// same content under the same name again (a retry) updates one provenance
// record instead of adding another.
//
// Each distinct content counts once against the task's artifact quota of
// limit bytes (artifact_bytes); content that does not fit is refused with a
// *QuotaError before anything is written.
func (s *Store) PutArtifact(ctx context.Context, p ledger.Provenance, data []byte, limit int64) (string, error) {
	return s.blobs.PutArtifact(ctx, &s.inflight, p, data, limit)
}

// ReadArtifact copies up to len(buf) bytes of the artifact ref, starting at
// offset, into buf; it returns the number copied (0 at the end) and the
// artifact's size. ErrNotFound for an unknown ref.
func (s *Store) ReadArtifact(ref string, offset int64, buf []byte) (int, int64, error) {
	return s.blobs.ReadAt(ref, offset, buf)
}

// OwnsArtifact reports whether task has stored the artifact ref: a unit of
// it put that content (a provenance record of the task names it). Plugins
// read only their own task's artifacts.
func (s *Store) OwnsArtifact(task, ref string) (owned bool, err error) {
	err = s.view(func(t *kv.Tx) error {
		owned, err = quota.Owns(t, task, ref)
		return err
	})
	return owned, err
}

// KVGet reads a unit's own key/value entry.
func (s *Store) KVGet(task string, step, item int, key string) (json.RawMessage, bool, error) {
	var out json.RawMessage
	err := s.view(func(t *kv.Tx) error {
		b, err := t.GetRaw(kv.UnitKVKey(task, step, item, key))
		if err != nil {
			return err
		}
		out = b
		return nil
	})
	if errors.Is(err, ledger.ErrNotFound) {
		return nil, false, nil
	}
	return out, err == nil, err
}

// KVPut writes a unit's own key/value entry, durably, if the lease is
// still the unit's current one: a zombie cannot move the cursor of the worker
// that took over. The entry's key and value count against the task's kv
// quota of limit bytes (kv_bytes; an overwrite counts the difference); an
// entry that does not fit is refused with a *QuotaError and nothing is
// written.
func (s *Store) KVPut(ctx context.Context, l ledger.Lease, key string, value json.RawMessage, limit int64) error {
	return s.update(ctx, func(t *kv.Tx) error {
		if _, _, err := lease.Leased(t, l); err != nil {
			return err
		}
		return quota.PutKV(t, l, key, value, limit)
	})
}

// Effect reads one journal entry.
func (s *Store) Effect(task string, step, item int, key string) (*ledger.Effect, error) {
	e := new(ledger.Effect)
	err := s.view(func(t *kv.Tx) error { return t.GetJSON(kv.EffectKey(task, step, item, key), e) })
	if err != nil {
		return nil, err
	}
	return e, nil
}

// RecordEffect writes a journal entry durably, under the unit's lease (so a
// zombie cannot record an intent or outcome in the journal of a unit someone
// else now owns).
func (s *Store) RecordEffect(ctx context.Context, l ledger.Lease, e *ledger.Effect) error {
	return s.update(ctx, func(t *kv.Tx) error {
		if _, _, err := lease.Leased(t, l); err != nil {
			return err
		}
		t.Durable = true
		return t.PutJSON(kv.EffectKey(e.Task, e.Step, e.Item, e.Key), e)
	})
}

// ResolveEffect settles an effect whose outcome is unknown, as a human
// decided: confirmed (it was applied: the outcome ConfirmedOutcome(kind,
// request, "confirmed") is recorded and it is never performed again) or retry
// (the intent stays, marked ResendRetry: the next attempt performs it again
// under the same idempotency key). A task paused for it becomes runnable
// again.
func (s *Store) ResolveEffect(ctx context.Context, task string, step, item int, key string, confirmed bool, note string) (*ledger.Effect, error) {
	var out *ledger.Effect
	err := s.update(ctx, func(t *kv.Tx) error {
		e := new(ledger.Effect)
		if err := t.GetJSON(kv.EffectKey(task, step, item, key), e); err != nil {
			return err
		}
		if e.State == ledger.EffectDone {
			return fmt.Errorf("effect %q already has an outcome", key)
		}
		t.Durable = true
		if confirmed {
			e.State, e.DoneAt, e.Note = ledger.EffectDone, s.now(), note
			e.Outcome = ledger.ConfirmedOutcome(e.Kind, e.Request, "confirmed")
		} else {
			e.State, e.Resend, e.Note = ledger.EffectIntent, ledger.ResendRetry, note
		}
		if err := t.PutJSON(kv.EffectKey(task, step, item, key), e); err != nil {
			return err
		}
		out = e
		tk := new(ledger.Task)
		if err := t.GetJSON(kv.TaskKey(task), tk); err != nil {
			return err
		}
		verb := "retry"
		if confirmed {
			verb = "confirmed"
		}
		if err := s.event(t, tk, ledger.Event{Type: ledger.EvEffectResolved, Step: e.StepName, Item: &e.Item,
			Message: fmt.Sprintf("effect %q %s: %s", key, verb, note)}); err != nil {
			return err
		}
		// The unit that waits for it runs again.
		if err := s.approvals.WakeUnit(t, tk, step, item, func(u *ledger.Unit) bool { return u.Effect == key }); err != nil {
			return err
		}
		if tk.Status == ledger.Paused && (tk.Pause == nil || tk.Pause.Kind == ledger.PauseEffect) {
			// Only a pause the effect caused ends with it; a person's, a
			// budget's or a drift's stands until resumed.
			if err := s.unpause(t, tk, ledger.Event{Type: ledger.EvResumed, Message: "the effect it waited for was settled"}); err != nil {
				return err
			}
		}
		return t.SaveTask(tk)
	})
	return out, err
}

// Pause gives up the lease l without consuming its attempt and pauses the
// task with reason: nothing of it runs until it is resumed (or an effect it
// waits on is resolved).
func (s *Store) Pause(ctx context.Context, l ledger.Lease, reason string) (*ledger.Task, error) {
	return s.PauseUnit(ctx, l, ledger.PauseReason{Kind: ledger.PauseEffect, Note: reason})
}

// PauseUnit is Pause with the structured reason why (a PauseEffect's Name
// is set to the unit's step; At defaults to now).
func (s *Store) PauseUnit(ctx context.Context, l ledger.Lease, why ledger.PauseReason) (*ledger.Task, error) {
	var out *ledger.Task
	err := s.update(ctx, func(t *kv.Tx) error {
		u, task, err := lease.Leased(t, l)
		if err != nil {
			return err
		}
		t.Durable = true
		u.State, u.Owner, u.LeaseUntil = ledger.UnitReady, "", time.Time{}
		u.Base++ // the pause is not a try: it spends no retry budget
		if err := t.PutJSON(kv.UnitKey(l.Task, l.Step, l.Item), u); err != nil {
			return err
		}
		ref := index.Ref{Task: l.Task, Step: l.Step, Item: l.Item}
		t.After(func(x *index.Index) { delete(x.Leases, ref) })
		task.Leases--
		t.Step(task, l.Step).Leased--
		if why.Kind == ledger.PauseEffect {
			why.Name = t.Step(task, l.Step).Name
		}
		if why.At.IsZero() {
			why.At = s.now()
		}
		reason := why.String()
		if why.Kind == ledger.PauseEffect {
			reason = why.Note
		}
		task.Status, task.Reason, task.Pause = ledger.Paused, reason, &why
		budget.TickWall(task, why.At)
		item := l.Item
		if err := s.event(t, task, ledger.Event{Type: ledger.EvPaused, Step: t.Step(task, l.Step).Name, Item: &item, Attempt: l.Attempt, Message: reason, Pause: &why}); err != nil {
			return err
		}
		if err := t.Del(kv.ActiveKey(task.ID)); err != nil {
			return err
		}
		id := task.ID
		t.After(func(x *index.Index) { x.RemoveTask(id) })
		if err := t.SaveTask(task); err != nil {
			return err
		}
		out = task
		return t.Fill(out)
	})
	return out, err
}

// PauseTask pauses the task id for why, without a lease: it stops claiming
// new units of the task at once. Units in flight keep their leases and may
// still commit or be given back (Release); a paused task whose last unit
// commits still advances (and may succeed). A task already paused keeps its
// first reason and is returned unchanged. why.At defaults to now. A
// finished task gets an error matching ErrTerminal; an unknown id
// ErrNotFound.
func (s *Store) PauseTask(ctx context.Context, id string, why ledger.PauseReason) (*ledger.Task, error) {
	var out *ledger.Task
	err := s.update(ctx, func(t *kv.Tx) error {
		task := new(ledger.Task)
		if err := t.GetJSON(kv.TaskKey(id), task); err != nil {
			return err
		}
		if task.Status.Terminal() {
			return &kv.FinishedError{ID: id, Status: task.Status, Verb: "pause"}
		}
		if task.Status == ledger.Paused {
			out = task
			return t.Fill(out)
		}
		t.Durable = true
		if why.At.IsZero() {
			why.At = s.now()
		}
		task.Status, task.Reason, task.Pause = ledger.Paused, why.String(), &why
		budget.TickWall(task, why.At) // the wall-time budget stops counting
		if err := s.event(t, task, ledger.Event{Type: ledger.EvPaused, Message: task.Reason, Pause: &why}); err != nil {
			return err
		}
		if err := t.Del(kv.ActiveKey(task.ID)); err != nil {
			return err
		}
		t.After(func(x *index.Index) { x.RemoveTask(id) })
		if err := t.SaveTask(task); err != nil {
			return err
		}
		out = task
		return t.Fill(out)
	})
	return out, err
}

// Resume makes a paused task runnable again.
func (s *Store) Resume(ctx context.Context, id string) (*ledger.Task, error) {
	return s.ResumeAs(ctx, id, "", "")
}

// ResumeAs is Resume by a person (by: who, where: from which host and
// process), recorded in a "resumed" event; a task that is not paused (one
// whose process died, continued by `lhengine resume`) gets the event too,
// when by is set, and is otherwise unchanged.
func (s *Store) ResumeAs(ctx context.Context, id, by, where string) (*ledger.Task, error) {
	var out *ledger.Task
	err := s.update(ctx, func(t *kv.Tx) error {
		task := new(ledger.Task)
		if err := t.GetJSON(kv.TaskKey(id), task); err != nil {
			return err
		}
		msg := resumedBy(by, where)
		if task.Status != ledger.Paused {
			if by != "" && !task.Status.Terminal() {
				t.Durable = true
				if err := s.event(t, task, ledger.Event{Type: ledger.EvResumed, Owner: by, Message: msg}); err != nil {
					return err
				}
				if err := t.SaveTask(task); err != nil {
					return err
				}
			}
			out = task
			return t.Fill(out)
		}
		if p := task.Pause; p != nil && p.Kind == ledger.PauseBudget {
			if name, used, limit := task.Reached(); name != "" {
				return fmt.Errorf("%w: task %s: budget %s is still reached (%s of %s); raise it, e.g. lhengine resume %s --budget %s=+N",
					ledger.ErrBudgetReached, id, name, ledger.FormatUsage(name, used), ledger.FormatUsage(name, limit), id, name)
			}
		}
		t.Durable = true
		if err := s.unpause(t, task, ledger.Event{Type: ledger.EvResumed, Owner: by, Message: msg}); err != nil {
			return err
		}
		if err := t.SaveTask(task); err != nil {
			return err
		}
		out = task
		return t.Fill(out)
	})
	return out, err
}

// resumedBy says who resumed a task, and from where.
func resumedBy(by, where string) string {
	switch {
	case by == "":
		return ""
	case where == "":
		return "resumed by " + by
	}
	return "resumed by " + by + " from " + where
}

// unpause puts a paused task back to running and its ready units back in
// the claim index. The caller saves the task.
func (s *Store) unpause(t *kv.Tx, task *ledger.Task, ev ledger.Event) error {
	task.Status, task.Reason, task.Pause = ledger.Running, "", nil
	budget.TickWall(task, s.now()) // units still in flight count again
	if err := t.Put(kv.ActiveKey(task.ID), nil); err != nil {
		return err
	}
	var refs []index.Ref
	first := map[index.Ref]bool{}
	leases := map[index.Ref]index.Lease{}
	waits := map[index.Ref]time.Time{}
	for _, step := range liveSteps(t, task) {
		window := t.Step(task, step).Every > 0
		err := t.Scan(kv.UnitStepPrefix(task.ID, step), func(_, val []byte) (bool, error) {
			u := new(ledger.Unit)
			if err := json.Unmarshal(val, u); err != nil {
				return false, err
			}
			r := index.Ref{Task: task.ID, Step: u.Step, Item: u.Item}
			switch u.State {
			case ledger.UnitReady:
				refs = append(refs, r)
				first[r] = window
			case ledger.UnitWaiting:
				if !u.NotBefore.IsZero() {
					waits[r] = u.NotBefore // claimed at its approval's expiry
				}
			case ledger.UnitLeased:
				// Still in flight, or left by a process that died while the
				// task was paused: either way the lease must be reclaimable.
				leases[r] = index.Lease{Owner: u.Owner, Until: u.LeaseUntil}
			}
			return true, nil
		})
		if err != nil {
			return err
		}
	}
	if t.Err() != nil {
		return t.Err()
	}
	id := task.ID
	t.After(func(x *index.Index) {
		x.AddActive(id)
		for _, r := range refs {
			x.AddReady(r, time.Time{}, first[r])
		}
		for r, l := range leases {
			x.Leases[r] = l
		}
		for r, at := range waits {
			x.AddReady(r, at, false)
		}
	})
	if err := s.event(t, task, ev); err != nil {
		return err
	}
	return s.approvals.SettleWaiting(t, task)
}
