// Package outbox writes tasks' events and delivers the notifications they
// queue. Events.Append adds an event to a task's log and, when the task's
// notify block lists its type, its outbox entry, in the event's own
// transaction:
//
//	x/<task>/<event seq>            Notification: waiting to be delivered
//	j/<task>/notify/<event seq>     Effect: its delivery's journal entry
//
// So there is exactly one entry per event: a notification is never lost
// with a crash and never made twice for one event. A sender (the engine's)
// reads the entries (Pending), journals an intent before each POST
// (Intent) and records the outcome and deletes the entry in one
// transaction (Outcome); an answer that leaves it open keeps it (Retry).
// An intent without outcome, left by a crash, is sent again under the same
// Idempotency-Key: a receiver that honours the key sees one delivery per
// event.
package outbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/lhengine/lhengine/ledger"
	"github.com/lhengine/lhengine/store/internal/index"
	"github.com/lhengine/lhengine/store/internal/kv"
)

// Events appends the events of a store's tasks, through its clock (Now),
// and journals the deliveries of their notifications through its group
// commit (Update). Notify wakes those who wait for outbox entries; it is
// called once a transaction that wrote one committed.
type Events struct {
	Update kv.Update
	Now    func() time.Time
	Notify func()
	// Session names this store's opening in the intents it journals
	// (Effect.Sender); Alive, set on a store shared by many processes,
	// tells whether another session's process may still run. Without it
	// another session is an earlier process of the store, gone.
	Session string
	Alive   func(session string) bool
}

// senderHold is how long an intent's sender keeps it before another
// process may send the notification: longer than a delivery's timeout.
const senderHold = time.Minute

// Append appends e to the task's log, with the next seq and, unless set,
// the time now; the caller saves the task. When the task's notify block
// lists e's type, e's outbox entry is written in the same transaction.
func (o *Events) Append(t *kv.Tx, task *ledger.Task, e ledger.Event) error {
	e.Seq = task.NextEvent
	task.NextEvent++
	if e.Time.IsZero() {
		e.Time = o.Now()
	}
	task.UpdatedAt = e.Time
	if task.Notify != nil && slices.Contains(task.Notify.Events, e.Type) {
		n := ledger.Notification{Task: task.ID, Name: task.Name, URL: task.Notify.URL, Event: e, Status: task.Status, Reason: task.Reason}
		if err := t.PutJSON(kv.OutboxKey(task.ID, e.Seq), &n); err != nil {
			return err
		}
		t.After(func(*index.Index) { o.Notify() })
	}
	return t.PutJSON(kv.EventKey(task.ID, e.Seq), e)
}

// Pending returns the first outbox entry of each task that has one, oldest
// task first, skipping the tasks skip reports true for (nil skips none), at
// most max (0: no limit). The first entry of a task is delivered before
// its next, so a task's notifications arrive in the order of its events.
func Pending(t *kv.Tx, max int, skip func(task string) bool) ([]ledger.Notification, error) {
	var out []ledger.Notification
	it := t.Iterate(kv.IterOptions{Prefix: []byte("x/"), KeysOnly: true})
	defer it.Close()
	for it.Rewind(); it.Valid() && (max <= 0 || len(out) < max); {
		key := string(it.Key())
		task, _, _ := strings.Cut(strings.TrimPrefix(key, "x/"), "/")
		if skip == nil || !skip(task) {
			var n ledger.Notification
			if err := it.Value(func(v []byte) error { return json.Unmarshal(v, &n) }); err != nil {
				return nil, fmt.Errorf("outbox entry %s: %w", key, err)
			}
			out = append(out, n)
		}
		it.Seek([]byte("x/" + task + "0")) // '0' follows '/': the next task's first entry
	}
	return out, it.Err()
}

// notifying reads n's outbox entry and its journal entry (nil when none)
// in t. A notification no longer in the outbox (delivered, or its task
// removed or being removed) is ErrNotFound.
func notifying(t *kv.Tx, n *ledger.Notification) (*ledger.Notification, *ledger.Effect, error) {
	cur := new(ledger.Notification)
	if err := t.GetJSON(kv.OutboxKey(n.Task, n.Event.Seq), cur); err != nil {
		return nil, nil, fmt.Errorf("notification %s: %w", n.IdempotencyKey(), err)
	}
	task := new(ledger.Task)
	if err := t.GetJSON(kv.TaskKey(n.Task), task); err != nil {
		return nil, nil, fmt.Errorf("notification %s: %w", n.IdempotencyKey(), err)
	}
	if task.Removing {
		return nil, nil, fmt.Errorf("notification %s: task being removed: %w", n.IdempotencyKey(), ledger.ErrNotFound)
	}
	e := new(ledger.Effect)
	switch err := t.GetJSON(kv.NotifyEffectKey(n.Task, n.Event.Seq), e); {
	case errors.Is(err, ledger.ErrNotFound):
		e = nil
	case err != nil:
		return nil, nil, err
	}
	return cur, e, nil
}

// Intent journals, durably, that n is about to be sent, and returns
// the journal entry: a new intent, or the one a delivery before left (a
// crash between the intent and the outcome, or an answer that left it
// open), which is sent again under the same Idempotency-Key. The intent
// names this session as its sender for senderHold: while another
// session's process holds it, Intent returns ErrDelivering. The entry is
// an http effect of step NotifyStep (Step -1, Item the event's seq, Key the
// event type), so that the task's journal lists it. A notification no
// longer in the outbox is ErrNotFound: it must not be sent.
func (o *Events) Intent(ctx context.Context, n *ledger.Notification) (*ledger.Effect, error) {
	var out *ledger.Effect
	err := o.Update(ctx, func(t *kv.Tx) error {
		cur, e, err := notifying(t, n)
		if err != nil {
			return err
		}
		now := o.Now()
		if e != nil {
			switch {
			case e.Sender != o.Session && e.Sender != "" && now.Before(e.SenderUntil) && o.Alive != nil && o.Alive(e.Sender):
				return fmt.Errorf("notification %s: %w (%s)", n.IdempotencyKey(), ledger.ErrDelivering, e.Sender)
			case e.Sender == o.Session && now.Before(e.SenderUntil.Add(-senderHold/2)):
				out = e // held, and for a while yet
				return nil
			}
			e.Sender, e.SenderUntil = o.Session, now.Add(senderHold)
			t.Durable = true
			out = e
			return t.PutJSON(kv.NotifyEffectKey(cur.Task, cur.Event.Seq), e)
		}
		req, _ := json.Marshal(map[string]any{ // strings only: cannot fail
			"method":  "POST",
			"url":     cur.URL,
			"headers": map[string]string{"Content-Type": "application/json"},
			"body":    string(cur.Body()),
		})
		e = &ledger.Effect{
			Task: cur.Task, Step: -1, StepName: ledger.NotifyStep, Item: int(cur.Event.Seq), Key: string(cur.Event.Type),
			Kind: "http", Mode: "resend", IdempotencyKey: cur.IdempotencyKey(), Request: req,
			State: ledger.EffectIntent, IntentAt: now, Sender: o.Session, SenderUntil: now.Add(senderHold),
		}
		t.Durable = true
		out = e
		return t.PutJSON(kv.NotifyEffectKey(cur.Task, cur.Event.Seq), e)
	})
	return out, err
}

// Outcome records the receiver's final answer to n (outcome, in the
// http effect result shape, and a note) in its journal entry and deletes n
// from the outbox, in one transaction: it is never sent again. A
// notification no longer in the outbox is ErrNotFound.
func (o *Events) Outcome(ctx context.Context, n *ledger.Notification, outcome json.RawMessage, note string) error {
	return o.Update(ctx, func(t *kv.Tx) error {
		_, e, err := notifying(t, n)
		if err != nil {
			return err
		}
		if e == nil {
			return fmt.Errorf("notification %s: no intent journaled", n.IdempotencyKey())
		}
		t.Durable = true
		e.State, e.Outcome, e.DoneAt, e.Resend, e.Note = ledger.EffectDone, outcome, o.Now(), "", note
		e.Performs++
		if err := t.PutJSON(kv.NotifyEffectKey(n.Task, n.Event.Seq), e); err != nil {
			return err
		}
		return t.Del(kv.OutboxKey(n.Task, n.Event.Seq))
	})
}

// Retry records a delivery of n that left it open (why: a transport
// error, or an answer 5xx, 408 or 429; answered: whether the receiver
// answered at all): the outbox entry counts the attempt, the journal entry
// stays an intent, marked to be sent again (ResendRetryable) when the
// receiver answered. It returns the entry as updated.
func (o *Events) Retry(ctx context.Context, n *ledger.Notification, answered bool, why string) (*ledger.Notification, error) {
	var out *ledger.Notification
	err := o.Update(ctx, func(t *kv.Tx) error {
		cur, e, err := notifying(t, n)
		if err != nil {
			return err
		}
		cur.Attempts++
		cur.LastError = why
		if err := t.PutJSON(kv.OutboxKey(n.Task, n.Event.Seq), cur); err != nil {
			return err
		}
		if e != nil {
			if answered {
				e.Performs++
				e.Resend = ledger.ResendRetryable
			}
			e.Note = fmt.Sprintf("delivery %d: %s; sent again under the same Idempotency-Key", cur.Attempts, why)
			if err := t.PutJSON(kv.NotifyEffectKey(n.Task, n.Event.Seq), e); err != nil {
				return err
			}
		}
		out = cur
		return nil
	})
	return out, err
}
