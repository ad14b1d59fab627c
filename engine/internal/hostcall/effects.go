package hostcall

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/lhengine/lhengine/engine/internal/guest"
	"github.com/lhengine/lhengine/engine/internal/taskfile"
	"github.com/lhengine/lhengine/internal/crashpoint"
	"github.com/lhengine/lhengine/ledger"
)

// maxEffectResponse bounds the response body of an http effect kept in the journal.
const maxEffectResponse = 1 << 20

type effectRequest struct {
	Key     string          `json:"key"`
	Kind    string          `json:"kind"`
	Request json.RawMessage `json:"request"`
}

type httpRequest struct {
	Method  string            `json:"method"`
	URL     string            `json:"url"`
	Headers map[string]string `json:"headers"`
	Body    string            `json:"body"`
}

type fileRequest struct {
	Path    string `json:"path"`
	Content string `json:"content"`
	Append  bool   `json:"append"`
}

// effect performs a side effect exactly once per (task, step, item, key),
// through the journal: intent, perform with a stable idempotency key,
// outcome. A recorded outcome is returned without performing again; an
// intent with no outcome (a crash in between) is reconciled as the step's
// effect grant says. An http answer that leaves the effect open (5xx, 408,
// 429) or a transport error records no outcome: the call fails with
// StatusInternal and the step's next attempt sends the effect again under
// the same idempotency key (specs/abi.md, "effect.do").
func (a *Attempt) effect(ctx context.Context, raw []byte) ([]byte, error) {
	var r effectRequest
	if err := json.Unmarshal(raw, &r); err != nil || r.Key == "" || r.Kind == "" {
		return nil, herr(guest.StatusInvalid, "effect.do wants {\"key\": string, \"kind\": string, \"request\": object}")
	}
	grant := a.Step.Effects[r.Kind]
	if grant == nil {
		return nil, herr(guest.StatusDenied, "step %q may not perform %q effects (declare an effect %q block)", a.Step.Name, r.Kind, r.Kind)
	}
	if err := a.checkEffect(grant, r); err != nil {
		return nil, err
	}
	l := a.Lease
	reconciled := "" // how an intent found without outcome was settled
	e, err := a.Store.Effect(l.Task, l.Step, l.Item, r.Key)
	switch {
	case errors.Is(err, ledger.ErrNotFound):
		e = &ledger.Effect{
			Task: l.Task, Step: l.Step, StepName: a.Step.Name, Item: l.Item, Key: r.Key, Kind: r.Kind, Mode: grant.Mode,
			IdempotencyKey: ledger.IdempotencyKey(l.Task, a.Step.Name, l.Item, r.Key),
			Request:        r.Request, State: ledger.EffectIntent, Attempt: l.Attempt, IntentAt: time.Now(),
		}
		if err := a.record(ctx, e); err != nil {
			return nil, err
		}
		crashpoint.Reached(crashpoint.EffectAfterIntent)
	case err != nil:
		return nil, err
	case !jsonEqual(e.Request, r.Request):
		return nil, herr(guest.StatusInvalid, "effect key %q was first used with another request; a key names one effect", r.Key)
	case e.State == ledger.EffectDone:
		a.Metrics.Effect("replayed")
		return respond(shapeOutcome(e), true)
	case e.State == ledger.EffectUnknown:
		a.Metrics.Effect("unknown")
		return nil, a.pauseFor(e)
	case e.Resend != "":
		// The receiver answered, and not for good, or a person asked for a
		// retry: send it again as is. The mark is cleared first, so that an
		// interruption of this send is reconciled as the mode says.
		if e.Resend == ledger.ResendRetry {
			reconciled = "retried"
		}
		e.Resend, e.Attempt = "", l.Attempt
		if err := a.record(ctx, e); err != nil {
			return nil, err
		}
	default: // an intent with no outcome: the effect may or may not have happened
		switch grant.Mode {
		case "manual":
			e.State, e.Note = ledger.EffectUnknown, "outcome unknown after an interruption; a human must confirm or retry"
			a.Metrics.Effect("unknown")
			if err := a.record(ctx, e); err != nil {
				return nil, err
			}
			return nil, a.pauseFor(e)
		case "check":
			applied, answer, err := a.checkApplied(ctx, grant, e.IdempotencyKey)
			if err != nil {
				return nil, err
			}
			if applied {
				e.State, e.DoneAt, e.Note = ledger.EffectDone, time.Now(), "receiver reports the key applied"
				e.Outcome = checkedOutcome(e, answer)
				if err := a.record(ctx, e); err != nil {
					return nil, err
				}
				a.Metrics.Effect("replayed")
				return respond(e.Outcome, true)
			}
			reconciled = "check_not_applied"
		default:
			reconciled = "resent"
		}
	}
	e.Attempt = l.Attempt
	outcome, err := a.perform(ctx, r, e.IdempotencyKey)
	var open *openError
	if errors.As(err, &open) {
		// The receiver answered and the effect stays open: the next attempt
		// sends it again without reconciling. The answer is not an outcome.
		e.Performs++
		e.Resend = ledger.ResendRetryable
		e.Note = fmt.Sprintf("attempt %d: the receiver answered %d; the effect stays open and is sent again under the same key", l.Attempt, open.status)
		if rerr := a.record(ctx, e); rerr != nil {
			return nil, rerr
		}
		a.Metrics.Effect("failed")
		return nil, herr(guest.StatusInternal, "http effect %q: the receiver answered %d, which leaves the effect open; fail this attempt and the step's retry sends it again under the same Idempotency-Key", r.Key, open.status)
	}
	if err != nil {
		// The intent stays: the next attempt reconciles it.
		return nil, err
	}
	crashpoint.Reached(crashpoint.EffectAfterPerform)
	if reconciled != "" {
		outcome = withField(outcome, "reconciled", reconciled)
	}
	e.State, e.Outcome, e.DoneAt, e.Resend = ledger.EffectDone, outcome, time.Now(), ""
	e.Performs++
	if err := a.record(ctx, e); err != nil {
		return nil, err
	}
	crashpoint.Reached(crashpoint.EffectAfterOutcome)
	a.Metrics.Effect("performed")
	return respond(outcome, false)
}

// openError is an http effect's answer that leaves the effect open: 5xx,
// 408 Request Timeout or 429 Too Many Requests.
type openError struct{ status int }

func (e *openError) Error() string { return fmt.Sprintf("receiver answered %d", e.status) }

// finalStatus reports whether an http effect's response status settles the
// effect: 2xx, 3xx (redirects are never followed) and 4xx other than 408 and
// 429. The others (5xx, 408, 429) leave it open.
func finalStatus(code int) bool {
	return code < 500 && code != http.StatusRequestTimeout && code != http.StatusTooManyRequests
}

// shapeOutcome is a recorded outcome in its kind's documented shape. An
// outcome a person confirmed, or one a check_url reported applied, written
// by an older engine lacks the shape and is given it.
func shapeOutcome(e *ledger.Effect) json.RawMessage {
	var m map[string]json.RawMessage
	if json.Unmarshal(e.Outcome, &m) != nil {
		return e.Outcome
	}
	field := "status"
	if e.Kind == "file" {
		field = "sha256"
	}
	if _, ok := m[field]; ok {
		return e.Outcome
	}
	how := "confirmed"
	if _, ok := m["applied"]; ok {
		how = "check_applied"
	}
	return ledger.ConfirmedOutcome(e.Kind, e.Request, how)
}

// checkedOutcome is the outcome of an effect its receiver's check_url
// reported applied: the result shape of its kind, "reconciled":
// "check_applied", and for http the check_url's own answer (status 200, its
// headers and body), since the effect's response was lost.
func checkedOutcome(e *ledger.Effect, answer map[string]any) json.RawMessage {
	out := ledger.ConfirmedOutcome(e.Kind, e.Request, "check_applied")
	if e.Kind != "http" {
		return out
	}
	answer["reconciled"] = "check_applied"
	b, err := json.Marshal(answer)
	if err != nil {
		return out
	}
	return b
}

// withField sets a top-level field of a JSON object.
func withField(obj json.RawMessage, name string, v any) json.RawMessage {
	var m map[string]any
	if json.Unmarshal(obj, &m) != nil || m == nil {
		return obj
	}
	m[name] = v
	b, err := json.Marshal(m)
	if err != nil {
		return obj
	}
	return b
}

func (a *Attempt) record(ctx context.Context, e *ledger.Effect) error {
	err := a.Store.RecordEffect(ctx, a.Lease, e)
	if errors.Is(err, ledger.ErrLeaseLost) {
		return herr(guest.StatusLeaseLost, "%v", err)
	}
	return err
}

func (a *Attempt) pauseFor(e *ledger.Effect) error {
	args := fmt.Sprintf("%s %s %s", shellWord(e.Task), shellWord(e.StepName), shellWord(e.Key))
	if e.Item != 0 {
		args += fmt.Sprintf(" --item %d", e.Item)
	}
	reason := fmt.Sprintf("effect %q (%s) of step %q item %d: outcome unknown; confirm with `lhengine effect confirm %s` or retry with `lhengine effect retry %s`",
		e.Key, e.Kind, e.StepName, e.Item, args, args)
	a.mu.Lock()
	a.pause, a.pauseKey = reason, e.Key
	a.mu.Unlock()
	return herr(guest.StatusPaused, "%s", reason)
}

// shellWord quotes w for a POSIX shell when it holds anything but letters,
// digits and -_.@:/=+, so a printed command runs as printed.
func shellWord(w string) string {
	if w != "" && strings.IndexFunc(w, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_.@:/=+", r))
	}) < 0 {
		return w
	}
	return "'" + strings.ReplaceAll(w, "'", `'\''`) + "'"
}

func respond(outcome json.RawMessage, replayed bool) ([]byte, error) {
	return json.Marshal(struct {
		Result   json.RawMessage `json:"result"`
		Replayed bool            `json:"replayed"`
	}{orNull(outcome), replayed})
}

func jsonEqual(a, b json.RawMessage) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return bytes.Equal(a, b)
	}
	xa, _ := json.Marshal(x)
	ya, _ := json.Marshal(y)
	return bytes.Equal(xa, ya)
}

// checkEffect refuses an effect request the grant does not allow.
func (a *Attempt) checkEffect(g *taskfile.EffectGrant, r effectRequest) error {
	switch r.Kind {
	case "http":
		var hr httpRequest
		if err := json.Unmarshal(r.Request, &hr); err != nil {
			return herr(guest.StatusInvalid, "http effect request: %v", err)
		}
		u, err := url.Parse(hr.URL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return herr(guest.StatusInvalid, "http effect url %q: want an absolute http(s) URL", hr.URL)
		}
		if !taskfile.HostAllowed(g.Hosts, hostPort(u)) {
			return herr(guest.StatusDenied, "http effect to %s is not allowed for step %q (hosts: %s)", hostPort(u), a.Step.Name, strings.Join(g.Hosts, ", "))
		}
	case "file":
		var fr fileRequest
		if err := json.Unmarshal(r.Request, &fr); err != nil {
			return herr(guest.StatusInvalid, "file effect request: %v", err)
		}
		if fr.Append {
			// A replay after a crash would append twice: a file effect
			// writes the whole file, which a replay leaves the same.
			return herr(guest.StatusInvalid, "file effects write whole files; append is not supported (a replay would append twice)")
		}
		if _, err := a.workspacePath(fr.Path); err != nil {
			return err
		}
		if a.WorkspaceChanged != nil {
			a.WorkspaceChanged.Store(true)
		}
	default:
		return herr(guest.StatusDenied, "unknown effect kind %q", r.Kind)
	}
	return nil
}

func (a *Attempt) perform(ctx context.Context, r effectRequest, idem string) (json.RawMessage, error) {
	switch r.Kind {
	case "http":
		var hr httpRequest
		_ = json.Unmarshal(r.Request, &hr)
		if hr.Method == "" {
			hr.Method = http.MethodPost
		}
		req, err := http.NewRequestWithContext(ctx, hr.Method, hr.URL, strings.NewReader(hr.Body))
		if err != nil {
			return nil, herr(guest.StatusInvalid, "http effect: %v", err)
		}
		for k, v := range hr.Headers {
			req.Header.Set(k, v)
		}
		req.Header.Set("Idempotency-Key", idem)
		resp, err := a.effectClient().Do(req)
		if err != nil {
			a.transportFailed(fmt.Sprintf("http effect %q: %v", r.Key, err))
			return nil, herr(guest.StatusInternal, "http effect: %v", err)
		}
		defer resp.Body.Close()
		if !finalStatus(resp.StatusCode) {
			return nil, &openError{status: resp.StatusCode}
		}
		body, err := io.ReadAll(io.LimitReader(resp.Body, maxEffectResponse))
		if err != nil {
			a.transportFailed(fmt.Sprintf("http effect %q: reading the response: %v", r.Key, err))
			return nil, herr(guest.StatusInternal, "http effect: reading the response: %v", err)
		}
		return json.Marshal(map[string]any{"status": resp.StatusCode, "headers": firstValues(resp.Header), "body": string(body)})
	case "file":
		var fr fileRequest
		_ = json.Unmarshal(r.Request, &fr)
		p, err := a.workspacePath(fr.Path)
		if err != nil {
			return nil, err
		}
		if err := a.writeAtomic(p, []byte(fr.Content)); err != nil {
			return nil, err
		}
		sum := sha256.Sum256([]byte(fr.Content))
		return json.Marshal(map[string]any{"path": fr.Path, "bytes": len(fr.Content), "sha256": hex.EncodeToString(sum[:])})
	}
	return nil, herr(guest.StatusDenied, "unknown effect kind %q", r.Kind)
}

// checkApplied asks the receiver whether an idempotency key was applied:
// GET check_url?key=K, 200 applied, 404 not applied. A redirect is not
// followed (it is neither answer). With 200 it returns the answer as an
// http effect result: status, headers and body (at most maxEffectResponse).
func (a *Attempt) checkApplied(ctx context.Context, g *taskfile.EffectGrant, idem string) (bool, map[string]any, error) {
	u, err := url.Parse(g.CheckURL)
	if err != nil {
		return false, nil, herr(guest.StatusInternal, "check_url: %v", err)
	}
	q := u.Query()
	q.Set("key", idem)
	u.RawQuery = q.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return false, nil, herr(guest.StatusInternal, "check_url: %v", err)
	}
	resp, err := a.effectClient().Do(req)
	if err != nil {
		a.transportFailed(fmt.Sprintf("asking %s whether the effect was applied: %v", g.CheckURL, err))
		return false, nil, herr(guest.StatusInternal, "asking %s whether the effect was applied: %v", g.CheckURL, err)
	}
	defer resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusOK:
		body, err := io.ReadAll(io.LimitReader(resp.Body, maxEffectResponse))
		if err != nil {
			return false, nil, herr(guest.StatusInternal, "check_url: reading the answer: %v", err)
		}
		return true, map[string]any{"status": resp.StatusCode, "headers": firstValues(resp.Header), "body": string(body)}, nil
	case http.StatusNotFound:
		return false, nil, nil
	}
	return false, nil, herr(guest.StatusInternal, "check_url answered %s; want 200 (applied) or 404 (not applied)", resp.Status)
}

func (a *Attempt) client() *http.Client {
	if a.Client != nil {
		return a.Client
	}
	return http.DefaultClient
}

// effectClient is client() that never follows a redirect: an effect's
// request (its body, its Idempotency-Key) goes to the URL the allowlist
// checked and nowhere else. A 3xx answer is the effect's outcome.
func (a *Attempt) effectClient() *http.Client {
	base := a.client()
	return &http.Client{Transport: base.Transport, Jar: base.Jar, Timeout: base.Timeout,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

func hostPort(u *url.URL) string {
	if u.Port() != "" {
		return u.Host
	}
	port := "80"
	if u.Scheme == "https" {
		port = "443"
	}
	return net.JoinHostPort(u.Hostname(), port)
}

func firstValues(h http.Header) map[string]string {
	out := make(map[string]string, len(h))
	for k, v := range h {
		if len(v) > 0 {
			out[k] = v[0]
		}
	}
	return out
}
