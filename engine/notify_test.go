package engine_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lhengine/lhengine/engine"
	"github.com/lhengine/lhengine/ledger"
)

// delivery is one request a notify receiver got.
type delivery struct {
	Key, ContentType string
	Body             struct {
		Task   string       `json:"task"`
		Name   string       `json:"name"`
		Event  ledger.Event `json:"event"`
		Status string       `json:"status"`
		Reason string       `json:"reason"`
	}
}

// receiver is a notify receiver on 127.0.0.1 that answers the statuses of
// answers in turn (200 once they run out) and records every request.
type receiver struct {
	srv *httptest.Server
	mu  sync.Mutex
	got []delivery
	// nth, when set, is signalled as the nth request is answered.
	nth     int
	reached chan struct{}
}

func newReceiver(t *testing.T, answers ...int) *receiver {
	t.Helper()
	r := &receiver{reached: make(chan struct{})}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		var d delivery
		d.Key, d.ContentType = req.Header.Get("Idempotency-Key"), req.Header.Get("Content-Type")
		b, _ := io.ReadAll(req.Body)
		if err := json.Unmarshal(b, &d.Body); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		r.mu.Lock()
		r.got = append(r.got, d)
		n := len(r.got)
		r.mu.Unlock()
		status := http.StatusOK
		if n <= len(answers) {
			status = answers[n-1]
		}
		w.WriteHeader(status)
		fmt.Fprintf(w, "answer %d", n)
		if n == r.nth {
			close(r.reached)
		}
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *receiver) deliveries() []delivery {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]delivery(nil), r.got...)
}

// notifyTask is a one-step task whose notify block sends events to url.
func notifyTask(url, events string) string {
	return fmt.Sprintf(`
task "notified" {
  notify {
    url    = %q
    events = %s
  }
  step "a" {
    plugin = "step.wasm"
    input  = { mode = "echo" }
  }
}`, url, events)
}

// journal returns the task's outbox and its notifications' journal entries.
func (b *testBundle) journal(t *testing.T, id string) (outbox []ledger.Notification, effects []ledger.Effect) {
	t.Helper()
	require.NoError(t, b.e.Read(func(r ledger.Reader) error {
		var err error
		if outbox, err = r.Notifications(id); err != nil {
			return err
		}
		all, err := r.Effects(id)
		for _, e := range all {
			if e.StepName == ledger.NotifyStep {
				effects = append(effects, e)
			}
		}
		return err
	}))
	return outbox, effects
}

// TestNotifySucceededOnce: a task whose notify block lists succeeded and
// failed, run to its end by Work, has its receiver on 127.0.0.1 get one
// POST, for succeeded, with the event, the task's status and a stable
// Idempotency-Key; the delivery is in the task's effect journal and the
// outbox is empty.
func TestNotifySucceededOnce(t *testing.T) {
	t.Parallel()
	rcv := newReceiver(t)
	b := setup(t, notifyTask(rcv.srv.URL+"/hook", `["succeeded", "failed"]`))
	task := b.submit(t, nil)
	require.Equal(t, &ledger.NotifySpec{URL: rcv.srv.URL + "/hook", Events: []ledger.EventType{ledger.EvSucceeded, ledger.EvFailed}}, task.Notify)
	got := b.work(t, task.ID)
	require.Equal(t, ledger.Succeeded, got.Status, got.Reason)

	ds := rcv.deliveries()
	require.Len(t, ds, 1, "one event listed happened, one notification")
	d := ds[0]
	require.Equal(t, ledger.EvSucceeded, d.Body.Event.Type)
	require.Equal(t, task.ID, d.Body.Task)
	require.Equal(t, "notified", d.Body.Name)
	require.Equal(t, "succeeded", d.Body.Status)
	require.Equal(t, "application/json", d.ContentType)
	require.Equal(t, fmt.Sprintf("%s/notify/%d", task.ID, d.Body.Event.Seq), d.Key)

	outbox, effects := b.journal(t, task.ID)
	require.Empty(t, outbox)
	require.Len(t, effects, 1)
	require.Equal(t, ledger.EffectDone, effects[0].State)
	require.Equal(t, d.Key, effects[0].IdempotencyKey)
	require.Equal(t, 1, effects[0].Performs)
	require.Contains(t, string(effects[0].Outcome), `"status":200`)

	// Work again: nothing is sent twice.
	require.NoError(t, b.e.Work(b.ctx, engine.WorkOptions{ExitWhenIdle: true}))
	require.Len(t, rcv.deliveries(), 1)
}

// TestNotifyRetriesUnderTheSameKey: a receiver that answers 503 twice and
// then 200 gets the same notification three times under the same
// Idempotency-Key, after which it is out of the outbox and its journal
// entry records the three; one that answers 404 gets it once and the
// refusal is recorded: it is never sent again. Neither holds up the task.
func TestNotifyRetriesUnderTheSameKey(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		answers  []int
		requests int
		note     string
	}{
		{"503 twice then 200", []int{503, 503}, 3, "delivered"},
		{"404", []int{404}, 1, "the receiver refused it (answered 404); not sent again"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			rcv := newReceiver(t, tc.answers...)
			rcv.nth = tc.requests
			b := setup(t, notifyTask(rcv.srv.URL+"/hook", `["succeeded"]`))
			engine.SetNotifyBackoff(b.e, time.Millisecond, 4*time.Millisecond)
			task := b.submit(t, nil)

			stop := make(chan struct{})
			done := make(chan error, 1)
			go func() { done <- b.e.Work(b.ctx, engine.WorkOptions{Task: task.ID, Stop: stop}) }()
			select {
			case <-rcv.reached:
			case err := <-done:
				t.Fatalf("Work returned before the receiver got %d requests: %v", tc.requests, err)
			case <-time.After(time.Minute): // a bound on a failure, far above the few ms a pass takes
				close(stop)
				<-done
				t.Fatalf("the receiver got %d of %d requests in a minute", len(rcv.deliveries()), tc.requests)
			}
			close(stop) // the delivery under way is recorded before Work returns
			require.NoError(t, <-done)

			got, err := b.e.Task(b.ctx, task.ID)
			require.NoError(t, err)
			require.Equal(t, ledger.Succeeded, got.Status, got.Reason)
			ds := rcv.deliveries()
			require.Len(t, ds, tc.requests)
			for _, d := range ds {
				require.Equal(t, ds[0].Key, d.Key, "every delivery of one event carries one key")
				require.Equal(t, ds[0].Body, d.Body, "and the same body")
			}
			outbox, effects := b.journal(t, task.ID)
			require.Empty(t, outbox, "the entry is gone once answered for good")
			require.Len(t, effects, 1)
			require.Equal(t, ledger.EffectDone, effects[0].State)
			require.Equal(t, tc.requests, effects[0].Performs)
			require.Equal(t, tc.note, effects[0].Note)
		})
	}
}
