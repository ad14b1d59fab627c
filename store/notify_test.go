package store

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lhengine/lhengine/ledger"
)

// outboxInvariant checks, in one snapshot, that every event of a type spec
// lists has exactly its own outbox entry or a delivered journal entry, and
// that no other event has either: what one transaction for the event and
// its entry guarantees.
func outboxInvariant(r ledger.Reader, id string, spec *ledger.NotifySpec) error {
	evs, err := r.Events(id, 0, 0)
	if err != nil {
		return err
	}
	ns, err := r.Notifications(id)
	if err != nil {
		return err
	}
	effs, err := r.Effects(id)
	if err != nil {
		return err
	}
	pending := map[uint64]int{}
	for _, n := range ns {
		pending[n.Event.Seq]++
	}
	done := map[uint64]bool{}
	for _, e := range effs {
		if e.StepName == ledger.NotifyStep && e.State == ledger.EffectDone {
			done[uint64(e.Item)] = true
		}
	}
	for _, e := range evs {
		listed := slices.Contains(spec.Events, e.Type)
		switch {
		case listed && pending[e.Seq]+btoi(done[e.Seq]) != 1:
			return fmt.Errorf("event %d (%s): %d outbox entries, delivered %v", e.Seq, e.Type, pending[e.Seq], done[e.Seq])
		case !listed && (pending[e.Seq] > 0 || done[e.Seq]):
			return fmt.Errorf("event %d (%s) is not listed but has an outbox entry", e.Seq, e.Type)
		}
		delete(pending, e.Seq)
	}
	if len(pending) > 0 {
		return fmt.Errorf("outbox entries without their event: %v", pending)
	}
	return nil
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// TestNotifyOutboxIsWrittenWithTheEvent: each event of a type the task's
// notify spec lists gets exactly one outbox entry, in the event's own
// transaction (no snapshot shows one without the other, while commits
// land); events of other types and tasks without a spec get none; the
// delivery's journal entry, its retry and its outcome; Remove deletes them.
func TestNotifyOutboxIsWrittenWithTheEvent(t *testing.T) {
	t.Parallel()
	b := setupDisk(t)
	spec := &ledger.NotifySpec{URL: "http://127.0.0.1:8025/hook", Events: []ledger.EventType{ledger.EvStepDone, ledger.EvSucceeded}}
	task, created, err := b.s.Submit(b.ctx, ledger.NewTask{Name: "notified", Steps: plainSteps("a", "b", "c"), Notify: spec})
	require.NoError(t, err)
	require.True(t, created)
	require.Equal(t, spec, task.Notify)
	quiet, _, err := b.s.Submit(b.ctx, ledger.NewTask{Name: "quiet", Steps: plainSteps("a")})
	require.NoError(t, err)

	// A reader checks every snapshot while the units commit.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var snapshots int
	var bad error
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			snapshots++
			if err := b.s.Read(func(r ledger.Reader) error { return outboxInvariant(r, task.ID, spec) }); err != nil {
				bad = err
				return
			}
		}
	}()
	for range 4 {
		c, err := b.s.Claim(b.ctx, ledger.ClaimRequest{Owner: b.s.Owner("w"), Max: 1, LeaseFor: time.Minute})
		require.NoError(t, err)
		require.Len(t, c.Leases, 1)
		_, err = b.s.Commit(b.ctx, ledger.Result{Lease: c.Leases[0], Output: json.RawMessage(`{}`)})
		require.NoError(t, err)
	}
	close(stop)
	wg.Wait()
	require.NoError(t, bad, "after %d snapshots", snapshots)

	var ns []ledger.Notification
	var evs []ledger.Event
	require.NoError(t, b.s.Read(func(r ledger.Reader) error {
		if err := outboxInvariant(r, task.ID, spec); err != nil {
			return err
		}
		if ns, err = r.Notifications(task.ID); err != nil {
			return err
		}
		if evs, err = r.Events(task.ID, 0, 0); err != nil {
			return err
		}
		qs, err := r.Notifications(quiet.ID)
		require.Empty(t, qs, "a task without a notify spec has no outbox")
		return err
	}))
	var types []ledger.EventType
	for _, n := range ns {
		types = append(types, n.Event.Type)
		require.Equal(t, evs[n.Event.Seq], n.Event, "the entry carries its event")
		require.Equal(t, "notified", n.Name)
		require.Equal(t, spec.URL, n.URL)
	}
	require.Equal(t, []ledger.EventType{ledger.EvStepDone, ledger.EvStepDone, ledger.EvStepDone, ledger.EvSucceeded}, types)
	last := ns[3]
	require.Equal(t, ledger.Succeeded, last.Status, "the status the event left the task in")
	require.Equal(t, task.ID+"/notify/"+fmt.Sprint(last.Event.Seq), last.IdempotencyKey())
	var body map[string]any
	require.NoError(t, json.Unmarshal(last.Body(), &body))
	require.Equal(t, task.ID, body["task"])
	require.Equal(t, "notified", body["name"])
	require.Equal(t, "succeeded", body["status"])
	require.Equal(t, "succeeded", body["event"].(map[string]any)["type"])

	// The sender sees the first entry of each task only: a task's
	// notifications go out in event order.
	pending, err := b.s.PendingNotifications(0, nil)
	require.NoError(t, err)
	require.Len(t, pending, 1)
	require.Equal(t, ns[0].Event.Seq, pending[0].Event.Seq)
	none, err := b.s.PendingNotifications(0, func(id string) bool { return id == task.ID })
	require.NoError(t, err)
	require.Empty(t, none)

	// Intent, a delivery that left it open, the outcome.
	first := pending[0]
	intent, err := b.s.NotifyIntent(b.ctx, &first)
	require.NoError(t, err)
	require.Equal(t, ledger.EffectIntent, intent.State)
	require.Equal(t, first.IdempotencyKey(), intent.IdempotencyKey)
	again, err := b.s.NotifyIntent(b.ctx, &first)
	require.NoError(t, err)
	require.True(t, intent.IntentAt.Equal(again.IntentAt), "an intent left open is the one sent again")
	retried, err := b.s.NotifyRetry(b.ctx, &first, true, "the receiver answered 503")
	require.NoError(t, err)
	require.Equal(t, 1, retried.Attempts)
	require.NoError(t, b.s.NotifyOutcome(b.ctx, &first, json.RawMessage(`{"status":200}`), "delivered"))
	_, err = b.s.NotifyIntent(b.ctx, &first)
	require.ErrorIs(t, err, ledger.ErrNotFound, "a delivered notification is not sent again")
	require.ErrorIs(t, b.s.NotifyOutcome(b.ctx, &first, json.RawMessage(`{}`), ""), ledger.ErrNotFound)

	var effs []ledger.Effect
	require.NoError(t, b.s.Read(func(r ledger.Reader) (err error) {
		effs, err = r.Effects(task.ID)
		return err
	}))
	require.Len(t, effs, 1)
	e := effs[0]
	require.Equal(t, ledger.NotifyStep, e.StepName)
	require.Equal(t, ledger.EffectDone, e.State)
	require.Equal(t, 2, e.Performs, "the 503 and the delivery")
	require.Equal(t, int(first.Event.Seq), e.Item)
	require.JSONEq(t, `{"status":200}`, string(e.Outcome))

	pending, err = b.s.PendingNotifications(0, nil)
	require.NoError(t, err)
	require.Len(t, pending, 1)
	require.Equal(t, ns[1].Event.Seq, pending[0].Event.Seq, "the next entry comes up")

	require.NoError(t, b.s.Remove(b.ctx, task.ID))
	for _, k := range allKeys(t, b.s) {
		require.False(t, strings.Contains(k, task.ID), "Remove left %s", k)
	}
	pending, err = b.s.PendingNotifications(0, nil)
	require.NoError(t, err)
	require.Empty(t, pending)
	_, err = b.s.NotifyIntent(b.ctx, &ns[1])
	require.True(t, errors.Is(err, ledger.ErrNotFound), "%v", err)
}

// TestNotifyEveryListedType: pauses, resumes and cancels are notified like
// the ledger's other events, each with the status it left the task in.
func TestNotifyEveryListedType(t *testing.T) {
	t.Parallel()
	b := setupDisk(t)
	spec := &ledger.NotifySpec{URL: "http://127.0.0.1:8025/hook", Events: []ledger.EventType{ledger.EvPaused, ledger.EvResumed, ledger.EvCancelled}}
	task, _, err := b.s.Submit(b.ctx, ledger.NewTask{Name: "t", Steps: plainSteps("a"), Notify: spec})
	require.NoError(t, err)
	_, err = b.s.PauseTask(b.ctx, task.ID, ledger.PauseReason{Kind: ledger.PauseOperator, By: "alice"})
	require.NoError(t, err)
	_, err = b.s.Resume(b.ctx, task.ID)
	require.NoError(t, err)
	_, err = b.s.Cancel(b.ctx, task.ID, "not needed")
	require.NoError(t, err)
	var ns []ledger.Notification
	require.NoError(t, b.s.Read(func(r ledger.Reader) (err error) {
		ns, err = r.Notifications(task.ID)
		return err
	}))
	require.Len(t, ns, 3)
	require.Equal(t, []ledger.Status{ledger.Paused, ledger.Running, ledger.Cancelled}, []ledger.Status{ns[0].Status, ns[1].Status, ns[2].Status})
	require.Equal(t, "paused by alice", ns[0].Reason)
	require.Equal(t, "not needed", ns[2].Reason)
}
