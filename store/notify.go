package store

import (
	"context"
	"encoding/json"

	"github.com/lhengine/lhengine/ledger"
	"github.com/lhengine/lhengine/store/internal/kv"
	"github.com/lhengine/lhengine/store/internal/outbox"
)

// Notifications (a task's notify block, specs/task-language.md): every
// event of a type the task's notify block lists gets an outbox entry in
// the event's own transaction, and its delivery is journaled as an http
// effect (internal/outbox).

// event appends an event to the task's log, with its outbox entry. The
// caller saves the task.
func (s *Store) event(t *kv.Tx, task *ledger.Task, e ledger.Event) error {
	return s.events.Append(t, task, e)
}

// NotificationsChanged returns a channel closed when an outbox entry is
// next written: take it before PendingNotifications, then wait on it, to
// miss none.
func (s *Store) NotificationsChanged() <-chan struct{} { return s.notified.current() }

// PendingNotifications returns the first outbox entry of each task that
// has one, oldest task first, skipping the tasks skip reports true for (nil
// skips none), at most max (0: no limit). The first entry of a task is
// delivered before its next, so a task's notifications arrive in the order
// of its events. It returns only entries already on disk (as ReadSynced
// does): a crash cannot take back an event that was notified.
func (s *Store) PendingNotifications(max int, skip func(task string) bool) ([]ledger.Notification, error) {
	var out []ledger.Notification
	var want uint64
	err := s.view(func(t *kv.Tx) error {
		want = s.commits.started.Load() // as ReadSynced: every commit the snapshot shows had begun
		var err error
		out, err = outbox.Pending(t, max, skip)
		return err
	})
	if err != nil || len(out) == 0 {
		return out, err // nothing to send: no sync to wait for
	}
	return out, s.awaitSynced(want)
}

// NotifyIntent journals, durably, that n is about to be sent, and returns
// the journal entry: a new intent, or the one a delivery before left (a
// crash between the intent and the outcome, or an answer that left it
// open), which is sent again under the same Idempotency-Key. The entry is
// an http effect of step NotifyStep (Step -1, Item the event's seq, Key the
// event type), so that the task's journal lists it. A notification no
// longer in the outbox is ErrNotFound: it must not be sent.
func (s *Store) NotifyIntent(ctx context.Context, n *ledger.Notification) (*ledger.Effect, error) {
	return s.events.Intent(ctx, n)
}

// NotifyOutcome records the receiver's final answer to n (outcome, in the
// http effect result shape, and a note) in its journal entry and deletes n
// from the outbox, in one transaction: it is never sent again. A
// notification no longer in the outbox is ErrNotFound.
func (s *Store) NotifyOutcome(ctx context.Context, n *ledger.Notification, outcome json.RawMessage, note string) error {
	return s.events.Outcome(ctx, n, outcome, note)
}

// NotifyRetry records a delivery of n that left it open (why: a transport
// error, or an answer 5xx, 408 or 429; answered: whether the receiver
// answered at all): the outbox entry counts the attempt, the journal entry
// stays an intent, marked to be sent again (ResendRetryable) when the
// receiver answered. It returns the entry as updated.
func (s *Store) NotifyRetry(ctx context.Context, n *ledger.Notification, answered bool, why string) (*ledger.Notification, error) {
	return s.events.Retry(ctx, n, answered, why)
}
