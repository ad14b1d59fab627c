package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/lhengine/lhengine/engine/internal/taskfile"
	"github.com/lhengine/lhengine/internal/crashpoint"
	"github.com/lhengine/lhengine/ledger"
)

// Delivery of the notifications of the tasks' notify blocks
// (specs/task-language.md, "Notifications").
const (
	// notifyTimeout bounds one POST, the answer's body included.
	notifyTimeout = 10 * time.Second
	// notifyBackoff is the wait after a delivery that left a notification
	// open (a transport error, 5xx, 408, 429), doubled after each one up
	// to notifyMaxBackoff.
	notifyBackoff    = time.Second
	notifyMaxBackoff = 5 * time.Minute
	// notifyDrain bounds the last round of deliveries as Work returns.
	notifyDrain = 10 * time.Second
	// notifyPoll is the wait before the store is read again after it
	// failed to answer.
	notifyPoll = time.Second
	// maxNotifyAnswer bounds the answer's body kept in the journal.
	maxNotifyAnswer = 64 << 10
)

// notifySpec is a task's notify block as the ledger keeps it; nil for none.
func notifySpec(n *taskfile.Notify) *ledger.NotifySpec {
	if n == nil {
		return nil
	}
	spec := &ledger.NotifySpec{URL: n.URL}
	for _, e := range n.Events {
		spec.Events = append(spec.Events, ledger.EventType(e))
	}
	return spec
}

// notifier delivers the store's outbox (store/notify.go): for each entry
// it journals an intent, POSTs the event with its Idempotency-Key, and
// records the outcome and deletes the entry in one transaction. An answer
// that leaves the notification open (a transport error, 5xx, 408, 429)
// keeps it, and the task's notifications wait, in memory, 1s doubling to
// 5 min before the next try; any other answer (3xx, 4xx) is final: it is
// recorded as the outcome, with a warning, and the entry is dropped. A
// notification never fails or holds up its task.
//
// One notifier serves every Work call of an engine; each call runs a
// sender (run) for as long as it runs. The notifications of one task are
// delivered in event order, by one sender at a time.
type notifier struct {
	store  ledger.Store
	log    hclog.Logger
	client *http.Client

	backoff, maxBackoff time.Duration

	mu      sync.Mutex
	busy    map[string]bool      // tasks whose first entry a sender is delivering
	waiting map[string]time.Time // tasks whose first entry waits for its next try, until then
}

func newNotifier(st ledger.Store, log hclog.Logger) *notifier {
	return &notifier{
		store: st,
		log:   log.Named("notify"),
		// Redirects are not followed: the body and its key go to the URL
		// the task file names and nowhere else; a 3xx is the answer.
		client: &http.Client{
			Transport:     http.DefaultTransport.(*http.Transport).Clone(),
			Timeout:       notifyTimeout,
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
		backoff:    notifyBackoff,
		maxBackoff: notifyMaxBackoff,
		busy:       map[string]bool{},
		waiting:    map[string]time.Time{},
	}
}

// start runs a sender until the returned stop is called, which delivers
// what is due (for up to notifyDrain, unless ctx ended) and returns once
// the sender has, its idle connections closed. ctx ending stops the sender at once; a delivery it cuts
// short stays an intent, sent again later under the same key.
func (n *notifier) start(ctx context.Context) (stop func()) {
	stopC, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		n.run(ctx, stopC)
	}()
	return func() {
		close(stopC)
		<-done
		n.client.CloseIdleConnections()
	}
}

// run delivers the outbox as it fills, and the notifications left open as
// their time comes, until stop is closed (then it delivers what is due
// once more) or ctx ends.
func (n *notifier) run(ctx context.Context, stop <-chan struct{}) {
	for {
		changed := n.store.NotificationsChanged()
		next, err := n.sendDue(ctx)
		if err != nil && ctx.Err() == nil {
			n.log.Warn("notifications could not be read or recorded; trying again", "error", err)
			next = time.Now().Add(notifyPoll)
		}
		var timer *time.Timer
		var timerC <-chan time.Time
		if !next.IsZero() {
			timer = time.NewTimer(time.Until(next))
			timerC = timer.C
		}
		select {
		case <-changed:
		case <-timerC:
		case <-ctx.Done():
		case <-stop:
			if ctx.Err() == nil {
				dctx, cancel := context.WithTimeout(ctx, notifyDrain)
				if _, err := n.sendDue(dctx); err != nil && dctx.Err() == nil {
					n.log.Warn("notifications could not be read or recorded", "error", err)
				}
				cancel()
			}
		}
		if timer != nil {
			timer.Stop()
		}
		select {
		case <-ctx.Done():
			return
		case <-stop:
			return
		default:
		}
	}
}

// sendDue delivers every outbox entry whose task is not waiting, until
// none is left, and returns when the earliest waiting task's next try is
// (zero: none waits).
func (n *notifier) sendDue(ctx context.Context) (time.Time, error) {
	n.mu.Lock()
	for task, at := range n.waiting {
		if !at.After(time.Now()) {
			delete(n.waiting, task) // due: tried in this round
		}
	}
	n.mu.Unlock()
	for ctx.Err() == nil {
		now := time.Now()
		due, err := n.store.PendingNotifications(64, func(task string) bool {
			n.mu.Lock()
			defer n.mu.Unlock()
			return n.busy[task] || n.waiting[task].After(now)
		})
		if err != nil {
			return time.Time{}, err
		}
		sent := 0
		for i := range due {
			nt := &due[i]
			if !n.claim(nt.Task) {
				continue // another sender took it
			}
			tried, err := n.deliver(ctx, nt)
			n.release(nt.Task)
			if err != nil {
				return time.Time{}, err
			}
			if tried {
				sent++
			}
		}
		if sent == 0 {
			break
		}
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	var next time.Time
	for _, at := range n.waiting {
		if next.IsZero() || at.Before(next) {
			next = at
		}
	}
	return next, nil
}

func (n *notifier) claim(task string) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.busy[task] {
		return false
	}
	n.busy[task] = true
	return true
}

func (n *notifier) release(task string) {
	n.mu.Lock()
	delete(n.busy, task)
	n.mu.Unlock()
}

// deliver sends one notification through the journal, and reports
// whether it tried (false: the notification was delivered meanwhile, or
// its task is being removed). Only a failure of the store is an error: the
// receiver's answers, whatever they are, are recorded.
func (n *notifier) deliver(ctx context.Context, nt *ledger.Notification) (tried bool, err error) {
	log := n.log.With("task", nt.Task, "event", nt.Event.Type, "seq", nt.Event.Seq)
	if _, err := n.store.NotifyIntent(ctx, nt); errors.Is(err, ledger.ErrNotFound) {
		return false, nil
	} else if errors.Is(err, ledger.ErrDelivering) {
		// Another process sends it (a shared store): its later ones wait
		// too, so that the task's notifications keep their order.
		n.mu.Lock()
		n.waiting[nt.Task] = time.Now().Add(notifyPoll)
		n.mu.Unlock()
		return false, nil
	} else if err != nil {
		return false, err
	}
	crashpoint.Reached(crashpoint.NotifyAfterIntent)
	status, outcome, err := n.post(ctx, nt)
	if ctx.Err() != nil {
		return true, nil // stopping: the intent stays, and is sent again
	}
	if err == nil {
		crashpoint.Reached(crashpoint.NotifyAfterSend)
	}
	var why string
	switch {
	case err != nil:
		why = err.Error()
	case status >= 200 && status < 300:
		err = n.store.NotifyOutcome(ctx, nt, outcome, "delivered")
		n.settled(nt.Task)
		return true, ignoreGone(err)
	case status >= 500 || status == http.StatusRequestTimeout || status == http.StatusTooManyRequests:
		why = fmt.Sprintf("the receiver answered %d", status)
	default:
		log.Warn("the notification's receiver refused it; it is not sent again", "url", nt.URL, "status", status)
		err = n.store.NotifyOutcome(ctx, nt, outcome, fmt.Sprintf("the receiver refused it (answered %d); not sent again", status))
		n.settled(nt.Task)
		return true, ignoreGone(err)
	}
	cur, err := n.store.NotifyRetry(ctx, nt, err == nil, why)
	if err != nil {
		return true, ignoreGone(err)
	}
	delay := n.delay(cur.Attempts)
	log.Warn("notification not delivered; it is sent again under the same Idempotency-Key", "url", nt.URL, "why", why, "attempts", cur.Attempts, "retry_in", delay)
	n.mu.Lock()
	n.waiting[nt.Task] = time.Now().Add(delay)
	n.mu.Unlock()
	return true, nil
}

// settled forgets the wait of a task whose first notification was settled.
func (n *notifier) settled(task string) {
	n.mu.Lock()
	delete(n.waiting, task)
	n.mu.Unlock()
}

// delay is the wait after the attempts-th delivery that left a
// notification open: backoff doubled attempts-1 times, at most maxBackoff.
func (n *notifier) delay(attempts int) time.Duration {
	d := n.backoff
	for i := 1; i < attempts && d < n.maxBackoff; i++ {
		d *= 2
	}
	return min(d, n.maxBackoff)
}

// ignoreGone is err, except that a notification gone from the outbox
// (delivered, or its task removed) is no error.
func ignoreGone(err error) error {
	if errors.Is(err, ledger.ErrNotFound) {
		return nil
	}
	return err
}

// post sends nt and returns the answer's status and, as an http effect
// outcome, its status, headers and body (at most maxNotifyAnswer bytes).
// err is a failure to send or to read the answer.
func (n *notifier) post(ctx context.Context, nt *ledger.Notification) (int, json.RawMessage, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, nt.URL, bytes.NewReader(nt.Body()))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", nt.IdempotencyKey())
	resp, err := n.client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxNotifyAnswer))
	if err != nil {
		return 0, nil, fmt.Errorf("reading the answer: %w", err)
	}
	headers := make(map[string]string, len(resp.Header))
	for k, v := range resp.Header {
		if len(v) > 0 {
			headers[k] = v[0]
		}
	}
	outcome, err := json.Marshal(map[string]any{"status": resp.StatusCode, "headers": headers, "body": string(body)})
	return resp.StatusCode, outcome, err
}
