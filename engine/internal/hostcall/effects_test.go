package hostcall

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lhengine/lhengine/engine/internal/guest"
	"github.com/lhengine/lhengine/engine/internal/taskfile"
	"github.com/lhengine/lhengine/ledger"
)

// receiver is a loopback effect receiver answering with the statuses of
// answers in turn (the last one from then on), recording the requests it got.
type receiver struct {
	*httptest.Server
	mu      sync.Mutex
	answers []int
	keys    []string
	bodies  []string
}

func newReceiver(t *testing.T, answers ...int) *receiver {
	t.Helper()
	r := &receiver{answers: answers}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		b := make([]byte, 1024)
		n, _ := req.Body.Read(b)
		r.mu.Lock()
		r.keys = append(r.keys, req.Header.Get("Idempotency-Key"))
		r.bodies = append(r.bodies, string(b[:n]))
		code := r.answers[min(len(r.keys), len(r.answers))-1]
		r.mu.Unlock()
		w.WriteHeader(code)
		w.Write([]byte(`{"ok":true}`))
	}))
	t.Cleanup(r.Close)
	return r
}

func (r *receiver) hits() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.keys)
}

func (r *receiver) host() string { return strings.TrimPrefix(r.URL, "http://") }

func httpStep(mode, checkURL string, hosts ...string) *taskfile.Step {
	return &taskfile.Step{Name: "send", Effects: map[string]*taskfile.EffectGrant{
		"http": {Kind: "http", Hosts: hosts, Mode: mode, CheckURL: checkURL},
		"file": {Kind: "file", Mode: mode, CheckURL: checkURL},
	}}
}

type effectResult struct {
	Result   map[string]any `json:"result"`
	Replayed bool           `json:"replayed"`
}

func doEffect(t *testing.T, a *Attempt, req string) (effectResult, error) {
	t.Helper()
	b, err := a.Call(context.Background(), "effect.do", []byte(req))
	if err != nil {
		return effectResult{}, err
	}
	var out effectResult
	require.NoError(t, json.Unmarshal(b, &out))
	return out, nil
}

func httpEffect(key, url string) string {
	return `{"key":"` + key + `","kind":"http","request":{"method":"POST","url":"` + url + `","body":"secret body"}}`
}

// TestHTTPEffectNeverFollowsRedirects: a 307 from an allowed host must not
// deliver the body and the Idempotency-Key to a host off the allowlist; the
// redirect is the effect's outcome. A check_url's redirect is not followed
// either.
func TestHTTPEffectNeverFollowsRedirects(t *testing.T) {
	t.Parallel()
	other := newReceiver(t, 200)
	allowed := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Location", other.URL+"/steal")
		w.WriteHeader(http.StatusTemporaryRedirect)
	}))
	defer allowed.Close()
	host := strings.TrimPrefix(allowed.URL, "http://")

	a := setup(t, httpStep("check", allowed.URL+"/applied", host))
	out, err := doEffect(t, a, httpEffect("mail-1", allowed.URL+"/mail"))
	require.NoError(t, err)
	require.EqualValues(t, http.StatusTemporaryRedirect, out.Result["status"], "a 3xx is the outcome, not followed")
	require.Equal(t, other.URL+"/steal", out.Result["headers"].(map[string]any)["Location"])
	require.Zero(t, other.hits(), "nothing reached the host off the allowlist")
	e, err := a.Store.Effect(a.Lease.Task, a.Lease.Step, a.Lease.Item, "mail-1")
	require.NoError(t, err)
	require.Equal(t, ledger.EffectDone, e.State, "a 3xx is final")

	// An interrupted effect in check mode asks check_url, which redirects:
	// neither applied nor not, and not followed.
	recordIntent(t, a, "mail-2", "http", `{"method":"POST","url":"`+allowed.URL+`/mail","body":"x"}`)
	_, err = doEffect(t, a, `{"key":"mail-2","kind":"http","request":{"method":"POST","url":"`+allowed.URL+`/mail","body":"x"}}`)
	require.Equal(t, guest.StatusInternal, status(t, err))
	require.Zero(t, other.hits())
}

// TestHTTPEffectOpenAnswersStayIntents: 5xx, 408 and 429 leave the effect
// an intent, the call fails retryably, and the next attempt sends it again
// under the same Idempotency-Key (even under mode manual: the receiver did
// answer); 4xx and 2xx are final and replayed.
func TestHTTPEffectOpenAnswersStayIntents(t *testing.T) {
	t.Parallel()
	for _, open := range []int{503, 500, 408, 429} {
		rcv := newReceiver(t, open, 200)
		a := setup(t, httpStep("manual", "", rcv.host()))
		req := httpEffect("mail", rcv.URL+"/mail")
		_, err := doEffect(t, a, req)
		require.Equal(t, guest.StatusInternal, status(t, err), "%d fails the call retryably", open)
		e, err := a.Store.Effect(a.Lease.Task, a.Lease.Step, a.Lease.Item, "mail")
		require.NoError(t, err)
		require.Equal(t, ledger.EffectIntent, e.State, "%d is not an outcome", open)
		require.Empty(t, e.Outcome)
		require.Equal(t, ledger.ResendRetryable, e.Resend)

		out, err := doEffect(t, a, req) // the step's next attempt
		require.NoError(t, err, "%d: sent again, not paused", open)
		require.EqualValues(t, 200, out.Result["status"], "the plugin sees the 200 of the retry")
		require.False(t, out.Replayed)
		require.NotContains(t, out.Result, "reconciled")
		require.Equal(t, 2, rcv.hits())
		require.Equal(t, rcv.keys[0], rcv.keys[1], "one Idempotency-Key for both sends")

		out, err = doEffect(t, a, req)
		require.NoError(t, err)
		require.True(t, out.Replayed)
		require.Equal(t, 2, rcv.hits(), "the outcome is recorded once and replayed")
		e, err = a.Store.Effect(a.Lease.Task, a.Lease.Step, a.Lease.Item, "mail")
		require.NoError(t, err)
		require.Equal(t, ledger.EffectDone, e.State)
		require.Equal(t, 2, e.Performs)
	}

	rcv := newReceiver(t, 400, 200)
	a := setup(t, httpStep("resend", "", rcv.host()))
	req := httpEffect("bad", rcv.URL+"/mail")
	out, err := doEffect(t, a, req)
	require.NoError(t, err)
	require.EqualValues(t, 400, out.Result["status"], "a 4xx is the effect's final outcome")
	out, err = doEffect(t, a, req)
	require.NoError(t, err)
	require.True(t, out.Replayed)
	require.EqualValues(t, 400, out.Result["status"])
	require.Equal(t, 1, rcv.hits())
}

// recordIntent leaves an effect journalled without an outcome, as a crash
// between the intent and the outcome does.
func recordIntent(t *testing.T, a *Attempt, key, kind, request string) {
	t.Helper()
	l := a.Lease
	e := &ledger.Effect{Task: l.Task, Step: l.Step, StepName: a.Step.Name, Item: l.Item, Key: key, Kind: kind,
		Mode: a.Step.Effects[kind].Mode, IdempotencyKey: ledger.IdempotencyKey(l.Task, a.Step.Name, l.Item, key),
		Request: json.RawMessage(request), State: ledger.EffectIntent, Attempt: l.Attempt}
	require.NoError(t, a.Store.RecordEffect(context.Background(), l, e))
}

// TestReconciledEffectsKeepTheResultShape: every way an interrupted effect
// is settled gives the plugin its kind's documented result, with
// "reconciled" saying how.
func TestReconciledEffectsKeepTheResultShape(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rcv := newReceiver(t, 201)
	var applied atomic.Bool
	check := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if applied.Load() {
			w.Write([]byte(`{"receipt":"r-1"}`))
			return
		}
		http.NotFound(w, r)
	}))
	defer check.Close()
	reqOf := func(key string) (string, string) {
		inner := `{"method":"POST","url":"` + rcv.URL + `/mail","body":"hi"}`
		return inner, `{"key":"` + key + `","kind":"http","request":` + inner + `}`
	}
	shaped := func(out effectResult, status int, how string) {
		t.Helper()
		require.EqualValues(t, status, out.Result["status"], "%v", out.Result)
		require.Contains(t, out.Result, "headers")
		require.Contains(t, out.Result, "body")
		require.Equal(t, how, out.Result["reconciled"])
	}

	// resend
	a := setup(t, httpStep("resend", "", rcv.host()))
	inner, req := reqOf("r")
	recordIntent(t, a, "r", "http", inner)
	out, err := doEffect(t, a, req)
	require.NoError(t, err)
	shaped(out, 201, "resent")

	// check, applied: the check_url's answer stands in for the lost response
	a = setup(t, httpStep("check", check.URL+"/applied", rcv.host()))
	inner, req = reqOf("c1")
	recordIntent(t, a, "c1", "http", inner)
	applied.Store(true)
	out, err = doEffect(t, a, req)
	require.NoError(t, err)
	shaped(out, 200, "check_applied")
	require.Equal(t, `{"receipt":"r-1"}`, out.Result["body"])
	again, err := doEffect(t, a, req)
	require.NoError(t, err)
	require.Equal(t, out.Result, again.Result, "replayed as recorded")

	// check, not applied: sent again
	applied.Store(false)
	inner, req = reqOf("c2")
	recordIntent(t, a, "c2", "http", inner)
	out, err = doEffect(t, a, req)
	require.NoError(t, err)
	shaped(out, 201, "check_not_applied")

	// manual, confirmed by a person
	a = setup(t, httpStep("manual", "", rcv.host()))
	inner, req = reqOf("m1")
	recordIntent(t, a, "m1", "http", inner)
	_, err = doEffect(t, a, req)
	require.Equal(t, guest.StatusPaused, status(t, err))
	_, err = a.Store.ResolveEffect(ctx, a.Lease.Task, a.Lease.Step, a.Lease.Item, "m1", true, "saw it")
	require.NoError(t, err)
	out, err = doEffect(t, a, req)
	require.NoError(t, err)
	shaped(out, 200, "confirmed")
	require.True(t, out.Replayed)

	// manual, retried by a person: sent again under the same key
	hits := rcv.hits()
	inner, req = reqOf("m2")
	recordIntent(t, a, "m2", "http", inner)
	_, err = doEffect(t, a, req)
	require.Equal(t, guest.StatusPaused, status(t, err))
	_, err = a.Store.ResolveEffect(ctx, a.Lease.Task, a.Lease.Step, a.Lease.Item, "m2", false, "not in the outbox")
	require.NoError(t, err)
	out, err = doEffect(t, a, req)
	require.NoError(t, err)
	shaped(out, 201, "retried")
	require.Equal(t, hits+1, rcv.hits())
	require.Equal(t, ledger.IdempotencyKey(a.Lease.Task, "send", 0, "m2"), rcv.keys[len(rcv.keys)-1])

	// manual file effect, confirmed: path, size and hash of its content
	file := `{"path":"out/a.txt","content":"hello"}`
	recordIntent(t, a, "f1", "file", file)
	_, err = doEffect(t, a, `{"key":"f1","kind":"file","request":`+file+`}`)
	require.Equal(t, guest.StatusPaused, status(t, err))
	_, err = a.Store.ResolveEffect(ctx, a.Lease.Task, a.Lease.Step, a.Lease.Item, "f1", true, "")
	require.NoError(t, err)
	out, err = doEffect(t, a, `{"key":"f1","kind":"file","request":`+file+`}`)
	require.NoError(t, err)
	require.Equal(t, map[string]any{"path": "out/a.txt", "bytes": float64(5),
		"sha256": "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824", "reconciled": "confirmed"}, out.Result)

	// an outcome recorded by an older engine is given the shape on replay
	inner, req = reqOf("old")
	recordIntent(t, a, "old", "http", inner)
	e, err := a.Store.Effect(a.Lease.Task, a.Lease.Step, a.Lease.Item, "old")
	require.NoError(t, err)
	e.State, e.Outcome = ledger.EffectDone, json.RawMessage(`{"applied":true,"reconciled":"check"}`)
	require.NoError(t, a.Store.RecordEffect(ctx, a.Lease, e))
	out, err = doEffect(t, a, req)
	require.NoError(t, err)
	shaped(out, 200, "check_applied")
}

// TestHTTPEffectRedirectToAnAllowedHostIsNotFollowed: a 307 or 308 to
// another path of the same, allowed host would deliver the effect's body
// and Idempotency-Key a second time; it is the outcome instead. A check_url
// redirecting to a path that answers 200 does not make the effect applied.
func TestHTTPEffectRedirectToAnAllowedHostIsNotFollowed(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var paths []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		paths = append(paths, r.URL.Path)
		mu.Unlock()
		switch r.URL.Path {
		case "/again", "/yes":
			w.WriteHeader(http.StatusOK)
		case "/applied":
			http.Redirect(w, r, "/yes?"+r.URL.RawQuery, http.StatusFound)
		default:
			w.Header().Set("Location", "/again")
			w.WriteHeader(http.StatusPermanentRedirect)
			w.Write([]byte("moved"))
		}
	}))
	defer srv.Close()
	a := setup(t, httpStep("check", srv.URL+"/applied", strings.TrimPrefix(srv.URL, "http://")))
	out, err := doEffect(t, a, httpEffect("pay", srv.URL+"/pay"))
	require.NoError(t, err)
	require.EqualValues(t, http.StatusPermanentRedirect, out.Result["status"])
	require.Equal(t, "moved", out.Result["body"])
	mu.Lock()
	require.Equal(t, []string{"/pay"}, paths, "sent once, to the URL the allowlist checked")
	paths = nil
	mu.Unlock()

	req := `{"method":"POST","url":"` + srv.URL + `/pay","body":"y"}`
	recordIntent(t, a, "pay-2", "http", req)
	_, err = doEffect(t, a, `{"key":"pay-2","kind":"http","request":`+req+`}`)
	require.Equal(t, guest.StatusInternal, status(t, err), "a redirected check is neither answer")
	e, err := a.Store.Effect(a.Lease.Task, a.Lease.Step, a.Lease.Item, "pay-2")
	require.NoError(t, err)
	require.Equal(t, ledger.EffectIntent, e.State)
	mu.Lock()
	require.Equal(t, []string{"/applied"}, paths, "the check's redirect is not followed and nothing is sent")
	mu.Unlock()
}

// TestHTTPEffectResendInterruptedIsReconciled: an effect left open by a 503
// is sent again without reconciling; if that send is cut off (the receiver
// may have applied it), the mark is gone and the next attempt asks
// check_url before sending anything, all under the one Idempotency-Key.
func TestHTTPEffectResendInterruptedIsReconciled(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var sends, checks []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		if r.URL.Path == "/applied" {
			checks = append(checks, r.URL.Query().Get("key"))
			w.Write([]byte(`{"seen":true}`))
			return
		}
		sends = append(sends, r.Header.Get("Idempotency-Key"))
		if len(sends) == 1 {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		conn, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			conn.Close()
		}
	}))
	defer srv.Close()
	a := setup(t, httpStep("check", srv.URL+"/applied", strings.TrimPrefix(srv.URL, "http://")))
	req := httpEffect("pay", srv.URL+"/pay")
	_, err := doEffect(t, a, req)
	require.Equal(t, guest.StatusInternal, status(t, err), "503 leaves it open")
	_, err = doEffect(t, a, req)
	require.Equal(t, guest.StatusInternal, status(t, err), "the resend is cut off")
	e, err := a.Store.Effect(a.Lease.Task, a.Lease.Step, a.Lease.Item, "pay")
	require.NoError(t, err)
	require.Equal(t, ledger.EffectIntent, e.State)
	require.Empty(t, e.Resend, "a send cut off is not marked for resend")
	mu.Lock()
	sent := len(sends) // net/http may itself send a request with an Idempotency-Key again on a fresh connection
	mu.Unlock()

	out, err := doEffect(t, a, req)
	require.NoError(t, err)
	require.Equal(t, "check_applied", out.Result["reconciled"])
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, sends, sent, "applied per check_url: not sent again")
	require.Equal(t, []string{e.IdempotencyKey}, checks, "asked once, for the effect's key")
	for _, k := range sends {
		require.Equal(t, e.IdempotencyKey, k, "one Idempotency-Key throughout")
	}
}
