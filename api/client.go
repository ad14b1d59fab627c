package api

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Client calls the API of one owner. It is safe for concurrent use.
type Client struct {
	hc    *http.Client
	base  string // scheme://host, no trailing slash
	token string
}

// NewClient returns a client of the API at base ("http://127.0.0.1:7777")
// that sends token, if not empty, as a bearer token. hc nil means a client
// with no overall timeout (event streams last as long as their task).
func NewClient(base string, hc *http.Client, token string) *Client {
	if hc == nil {
		hc = &http.Client{}
	}
	return &Client{hc: hc, base: strings.TrimRight(base, "/"), token: token}
}

// NewSocketClient returns a client of the owner serving on the Unix socket
// at path.
func NewSocketClient(path string) *Client {
	return NewDialClient(func(ctx context.Context) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", path)
	})
}

// NewDialClient returns a client whose connections come from dial: a
// socket, or a listener in the same process.
func NewDialClient(dial func(ctx context.Context) (net.Conn, error)) *Client {
	tr := &http.Transport{
		DialContext:         func(ctx context.Context, _, _ string) (net.Conn, error) { return dial(ctx) },
		MaxIdleConnsPerHost: 4,
		IdleConnTimeout:     30 * time.Second,
	}
	return NewClient("http://lhengine", &http.Client{Transport: tr}, "")
}

// Close drops the client's idle connections.
func (c *Client) Close() { c.hc.CloseIdleConnections() }

// do sends a request with a JSON body (if in is not nil) and decodes a JSON
// answer into out (if not nil).
func (c *Client) do(ctx context.Context, method, path string, in, out any) error {
	return c.call(ctx, method, path, in, out, method == "GET")
}

// call is do; replayable says the request may be sent again whatever
// became of it (a read, or a write the owner dedupes): a connection cut
// under it is ErrOwnerGone.
func (c *Client) call(ctx context.Context, method, path string, in, out any, replayable bool) error {
	resp, err := c.sendReplayable(ctx, method, path, in, "application/json", replayable)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if out == nil {
		_, err = io.Copy(io.Discard, resp.Body)
		return err
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		if ctx.Err() == nil && replayable && cut(err) {
			return &goneError{what: method + " " + path, err: err}
		}
		return fmt.Errorf("%s %s: bad answer: %w", method, path, err)
	}
	return nil
}

// ErrOwnerGone: the owner did not answer. Nothing accepted the connection
// (no process serves the socket: the owner stopped or died, or the next
// one has not bound it yet), or the connection ended before the whole
// answer to a request that changes nothing (GET) or that the owner dedupes
// (a submission with an idempotency key), or an event stream ended before
// its task did. The request may be sent again to the home's next owner. A
// request that changes something and loses its connection after it was
// sent is never ErrOwnerGone: it may have been done.
var ErrOwnerGone = errors.New("the home's owner went away")

// goneError is ErrOwnerGone with what failed and why.
type goneError struct {
	what string
	err  error
}

func (e *goneError) Error() string {
	return fmt.Sprintf("%s: %v: %v", e.what, ErrOwnerGone, e.err)
}

func (e *goneError) Is(target error) bool { return target == ErrOwnerGone }
func (e *goneError) Unwrap() error        { return e.err }

// gone says whether a request that failed with err may be sent again: it
// was never sent (the dial failed), or it is replayable.
func gone(replayable bool, err error) bool {
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return true
	}
	return replayable && cut(err)
}

// cut: the connection ended under the request.
func cut(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

// send sends a request and returns a 2xx response; any other answer is an
// *Error.
func (c *Client) send(ctx context.Context, method, path string, in any, accept string) (*http.Response, error) {
	return c.sendReplayable(ctx, method, path, in, accept, method == "GET")
}

func (c *Client) sendReplayable(ctx context.Context, method, path string, in any, accept string, replayable bool) (*http.Response, error) {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return nil, err
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, body)
	if err != nil {
		return nil, err
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", accept)
	return c.roundTrip(ctx, req, replayable)
}

// roundTrip sends req with the client's token and returns a 2xx response;
// any other answer is an *Error.
func (c *Client) roundTrip(ctx context.Context, req *http.Request, replayable bool) (*http.Response, error) {
	method, path := req.Method, req.URL.Path
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		if ctx.Err() == nil && gone(replayable, err) {
			return nil, &goneError{what: method + " " + path, err: err}
		}
		return nil, err
	}
	if resp.StatusCode/100 == 2 {
		return resp, nil
	}
	defer resp.Body.Close()
	e := &Error{HTTPStatus: resp.StatusCode}
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if json.Unmarshal(b, e) != nil || e.Message == "" {
		e.Code, e.Message = CodeInternal, fmt.Sprintf("%s %s: %s: %s", method, path, resp.Status, strings.TrimSpace(string(b)))
	}
	return nil, e
}

func taskPath(ref string, rest ...string) string {
	p := "/v1/tasks/" + url.PathEscape(ref)
	for _, r := range rest {
		p += "/" + r
	}
	return p
}

// Owner describes the process serving the API.
func (c *Client) Owner(ctx context.Context) (*Owner, error) {
	var o Owner
	return &o, c.do(ctx, "GET", "/v1/owner", nil, &o)
}

// Version returns the owner's versions.
func (c *Client) Version(ctx context.Context) (*Versions, error) {
	var v Versions
	return &v, c.do(ctx, "GET", "/v1/version", nil, &v)
}

// Tasks lists every task, oldest first.
func (c *Client) Tasks(ctx context.Context) ([]Task, error) {
	var ts []Task
	return ts, c.do(ctx, "GET", "/v1/tasks", nil, &ts)
}

// TotalHeader is the response header of a filtered or limited list that
// says how many items match in all.
const TotalHeader = "X-Total-Count"

// TaskQuery filters and orders a task list. The zero value is every task,
// oldest first.
type TaskQuery struct {
	Status []string // shown statuses (queued, running, interrupted, ...); none: any
	Name   string   // the task's name; "": any
	Newest bool     // newest first
	Limit  int      // at most this many; 0: all
}

// TaskList returns the tasks q selects and how many match in all (more
// than len(tasks) when q.Limit cut the list).
func (c *Client) TaskList(ctx context.Context, q TaskQuery) (tasks []Task, total int, err error) {
	v := url.Values{}
	if len(q.Status) > 0 {
		v.Set("status", strings.Join(q.Status, ","))
	}
	if q.Name != "" {
		v.Set("name", q.Name)
	}
	if q.Newest {
		v.Set("order", "newest")
	}
	if q.Limit > 0 {
		v.Set("limit", strconv.Itoa(q.Limit))
	}
	total, err = c.getPage(ctx, "/v1/tasks", v, &tasks)
	return tasks, total, err
}

// getPage GETs path with query v into out and returns the answer's
// TotalHeader (-1 when the owner did not send it: an older one that does
// not filter).
func (c *Client) getPage(ctx context.Context, path string, v url.Values, out any) (int, error) {
	if len(v) > 0 {
		path += "?" + v.Encode()
	}
	resp, err := c.send(ctx, "GET", path, nil, "application/json")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		if ctx.Err() == nil && cut(err) {
			return 0, &goneError{what: "GET " + path, err: err}
		}
		return 0, fmt.Errorf("GET %s: bad answer: %w", path, err)
	}
	total, err := strconv.Atoi(resp.Header.Get(TotalHeader))
	if err != nil {
		return -1, nil
	}
	return total, nil
}

// Report returns the progress report of the task ref names (an id or a
// unique id prefix).
func (c *Client) Report(ctx context.Context, ref string) (*Report, error) {
	var r Report
	return &r, c.do(ctx, "GET", taskPath(ref), nil, &r)
}

// Task returns the task ref names.
func (c *Client) Task(ctx context.Context, ref string) (*Task, error) {
	r, err := c.Report(ctx, ref)
	if err != nil {
		return nil, err
	}
	return &r.Task, nil
}

// Manifest returns the run manifest of the task ref names, policy texts
// included.
func (c *Client) Manifest(ctx context.Context, ref string) (*Manifest, error) {
	var m Manifest
	return &m, c.do(ctx, "GET", taskPath(ref)+"/manifest", nil, &m)
}

// Submit validates, pins and queues a task: a file on the owner's file
// system (req.Path, over the home's socket), or a bundle of files uploaded
// first (req.Bundle).
// A submission with an idempotency key may be sent again whatever became of
// it (the owner returns the task the key first created), so a connection
// cut under it is ErrOwnerGone.
func (c *Client) Submit(ctx context.Context, req SubmitRequest) (*SubmitResponse, error) {
	var r SubmitResponse
	return &r, c.call(ctx, "POST", "/v1/tasks", req, &r, req.IdempotencyKey != "")
}

// Missing returns those of the contents, by sha256, that the owner does
// not hold: the ones to Upload before a submission names them in a
// Bundle.
func (c *Client) Missing(ctx context.Context, sums []string) ([]string, error) {
	var r MissingResponse
	return r.Missing, c.call(ctx, "POST", "/v1/uploads/missing", MissingRequest{SHA256: sums}, &r, true)
}

// Upload sends content, whose sha256 is sum (lower-case hex), to be kept
// by the owner for the bundles that name it. The owner refuses content
// whose sha256 is not sum. Sending the same content again changes
// nothing, so a connection cut under it is ErrOwnerGone.
func (c *Client) Upload(ctx context.Context, sum string, content []byte) error {
	path := "/v1/uploads/" + url.PathEscape(sum)
	req, err := http.NewRequestWithContext(ctx, "PUT", c.base+path, bytes.NewReader(content))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/octet-stream")
	resp, err := c.roundTrip(ctx, req, true)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, err = io.Copy(io.Discard, resp.Body)
	return err
}

// Cancel cancels a task.
func (c *Client) Cancel(ctx context.Context, ref, reason string) (*Task, error) {
	var t Task
	return &t, c.do(ctx, "POST", taskPath(ref, "cancel"), CancelRequest{Reason: reason}, &t)
}

// Resume makes a paused or interrupted task runnable again (after checking
// its plugins). The owner's workers run it if Task.Worked.
func (c *Client) Resume(ctx context.Context, ref string) (*Task, error) {
	var t Task
	return &t, c.do(ctx, "POST", taskPath(ref, "resume"), struct{}{}, &t)
}

// ResumeWith is Resume that first raises the budgets req names.
func (c *Client) ResumeWith(ctx context.Context, ref string, req ResumeRequest) (*Task, error) {
	var t Task
	return &t, c.do(ctx, "POST", taskPath(ref, "resume"), req, &t)
}

// Pause pauses a task: nothing more of it is claimed, and it returns once
// its units in flight have committed or been given back.
func (c *Client) Pause(ctx context.Context, ref string, req PauseRequest) (*Task, error) {
	var t Task
	return &t, c.do(ctx, "POST", taskPath(ref, "pause"), req, &t)
}

// Retry re-opens a failed or cancelled task.
func (c *Client) Retry(ctx context.Context, ref string, req RetryRequest) (*Task, error) {
	var t Task
	return &t, c.do(ctx, "POST", taskPath(ref, "retry"), req, &t)
}

// Remove removes a finished task.
func (c *Client) Remove(ctx context.Context, ref string) (*RemoveResult, error) {
	var r RemoveResult
	return &r, c.do(ctx, "DELETE", taskPath(ref), nil, &r)
}

// Outputs returns the committed outputs of the task's steps in their
// current pass, by step name; step "" means every step.
func (c *Client) Outputs(ctx context.Context, ref, step string) (map[string]json.RawMessage, error) {
	p := taskPath(ref, "outputs")
	if step != "" {
		p += "?step=" + url.QueryEscape(step)
	}
	out := map[string]json.RawMessage{}
	return out, c.do(ctx, "GET", p, nil, &out)
}

// Attempts returns every recorded attempt of the task's steps (step "" =
// all of them).
func (c *Client) Attempts(ctx context.Context, ref, step string) ([]*Attempt, error) {
	p := taskPath(ref, "attempts")
	if step != "" {
		p += "?step=" + url.QueryEscape(step)
	}
	var as []*Attempt
	return as, c.do(ctx, "GET", p, nil, &as)
}

// AttemptQuery selects attempts: of one step (Step), one item of it
// (Item, with Step; -1: every item), the first Limit (0: all).
type AttemptQuery struct {
	Step  string
	Item  int
	Limit int
}

// AttemptPage returns the attempts q selects and how many match in all.
func (c *Client) AttemptPage(ctx context.Context, ref string, q AttemptQuery) ([]*Attempt, int, error) {
	v := url.Values{}
	if q.Step != "" {
		v.Set("step", q.Step)
	}
	if q.Item >= 0 {
		v.Set("item", strconv.Itoa(q.Item))
	}
	if q.Limit > 0 {
		v.Set("limit", strconv.Itoa(q.Limit))
	}
	var as []*Attempt
	total, err := c.getPage(ctx, taskPath(ref, "attempts"), v, &as)
	return as, total, err
}

// EventQuery selects events: from sequence number From on, of the Types
// (none: all), at or after Since (zero: any time), the first Limit (0:
// all).
type EventQuery struct {
	From  uint64
	Types []string
	Since time.Time
	Limit int
}

// EventPage returns the events q selects and how many match in all.
func (c *Client) EventPage(ctx context.Context, ref string, q EventQuery) ([]Event, int, error) {
	v := url.Values{}
	v.Set("from", strconv.FormatUint(q.From, 10))
	if len(q.Types) > 0 {
		v.Set("type", strings.Join(q.Types, ","))
	}
	if !q.Since.IsZero() {
		v.Set("since", q.Since.UTC().Format(time.RFC3339Nano))
	}
	if q.Limit > 0 {
		v.Set("limit", strconv.Itoa(q.Limit))
	}
	var evs []Event
	total, err := c.getPage(ctx, taskPath(ref, "events"), v, &evs)
	return evs, total, err
}

// CommittedItem returns the output item of step committed in its
// current pass (by the unit's committed attempt).
func (c *Client) CommittedItem(ctx context.Context, ref, step string, item int) (*ItemOutput, error) {
	var out Committed
	path := taskPath(ref, "steps", url.PathEscape(step), "committed") + "?item=" + strconv.Itoa(item)
	if err := c.do(ctx, "GET", path, nil, &out); err != nil {
		return nil, err
	}
	if len(out.Items) != 1 {
		return nil, fmt.Errorf("item %d of step %q: the owner answered %d items", item, step, len(out.Items))
	}
	return &out.Items[0], nil
}

// Events returns the task's events from sequence number from on (the
// first event is number 0).
func (c *Client) Events(ctx context.Context, ref string, from uint64) ([]Event, error) {
	var evs []Event
	return evs, c.do(ctx, "GET", taskPath(ref, "events")+"?from="+strconv.FormatUint(from, 10), nil, &evs)
}

// StreamItem is one message of an event stream: an Event, or the Task for
// StreamTask and StreamEnd.
type StreamItem struct {
	Type  string // StreamEvent, StreamTask or StreamEnd
	Event *Event
	Task  *Task
}

// Follow streams the task's events from sequence number from on, and its
// record whenever it changes, to fn until the task finishes (the last item
// is StreamEnd with the finished task), ctx ends, or fn returns an error.
// A stream that ends before its task (the owner stopped or died) is an
// error matching ErrOwnerGone.
func (c *Client) Follow(ctx context.Context, ref string, from uint64, fn func(StreamItem) error) error {
	resp, err := c.send(ctx, "GET", taskPath(ref, "events")+"?follow=1&from="+strconv.FormatUint(from, 10), nil, "text/event-stream")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var fnErr error
	err = readStream(resp.Body, func(typ string, data []byte) (bool, error) {
		it := StreamItem{Type: typ}
		switch typ {
		case StreamEvent:
			it.Event = new(Event)
			if err := json.Unmarshal(data, it.Event); err != nil {
				return false, fmt.Errorf("event stream: bad %s: %w", typ, err)
			}
		case StreamTask, StreamEnd:
			it.Task = new(Task)
			if err := json.Unmarshal(data, it.Task); err != nil {
				return false, fmt.Errorf("event stream: bad %s: %w", typ, err)
			}
		default:
			return true, nil // a kind this client does not know
		}
		if err := fn(it); err != nil {
			fnErr = err
			return false, err
		}
		return typ != StreamEnd, nil
	})
	if err != nil && ctx.Err() != nil {
		return ctx.Err()
	}
	if err != nil && err != fnErr && (errors.Is(err, errStreamEnded) || cut(err)) {
		err = &goneError{what: "event stream", err: errors.New("the owner closed it before the task finished")}
	}
	return err
}

// FollowTasks streams the task list: fn gets every task, oldest first, at
// once and again after changes, until ctx ends or fn returns an error.
func (c *Client) FollowTasks(ctx context.Context, fn func([]Task) error) error {
	resp, err := c.send(ctx, "GET", "/v1/tasks?follow=1", nil, "text/event-stream")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	err = readStream(resp.Body, func(typ string, data []byte) (bool, error) {
		if typ != StreamTasks {
			return true, nil
		}
		var ts []Task
		if err := json.Unmarshal(data, &ts); err != nil {
			return false, fmt.Errorf("task list stream: %w", err)
		}
		return true, fn(ts)
	})
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if errors.Is(err, errStreamEnded) {
		err = errors.New("task list stream: the owner closed it")
	}
	return err
}

var errStreamEnded = errors.New("stream ended")

// readStream reads server-sent events from r and calls fn with each
// message's event name and data until fn says stop or fails, the stream
// reports an error (an "error" message, returned as *Error), or it ends
// (errStreamEnded).
func readStream(r io.Reader, fn func(typ string, data []byte) (more bool, err error)) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), maxMessage)
	var typ string
	var data []byte
	for sc.Scan() {
		line := sc.Bytes()
		switch {
		case len(line) == 0:
			if typ == "" && data == nil {
				continue // a comment or keep-alive ended
			}
			if typ == "error" {
				e := &Error{}
				if err := json.Unmarshal(data, e); err != nil || e.Message == "" {
					return fmt.Errorf("stream: the owner failed: %s", data)
				}
				return e
			}
			more, err := fn(typ, data)
			if err != nil || !more {
				return err
			}
			typ, data = "", nil
		case line[0] == ':':
			// a comment
		case bytes.HasPrefix(line, []byte("event:")):
			typ = strings.TrimSpace(string(line[len("event:"):]))
		case bytes.HasPrefix(line, []byte("data:")):
			d := bytes.TrimPrefix(line[len("data:"):], []byte(" "))
			if data != nil {
				data = append(data, '\n')
			}
			data = append(data, d...)
			if len(data) > maxMessage {
				return fmt.Errorf("stream: a message over %d bytes", maxMessage)
			}
		}
	}
	if err := sc.Err(); err != nil {
		return err
	}
	return errStreamEnded
}

// maxMessage bounds one stream message (a task list of many tasks is the
// largest).
const maxMessage = 64 << 20

// Artifacts lists the task's artifacts with their provenance.
func (c *Client) Artifacts(ctx context.Context, ref string) ([]Provenance, error) {
	var ps []Provenance
	return ps, c.do(ctx, "GET", taskPath(ref, "artifacts"), nil, &ps)
}

// Artifact streams an artifact's bytes; size is its length.
func (c *Client) Artifact(ctx context.Context, ref string) (body io.ReadCloser, size int64, err error) {
	resp, err := c.send(ctx, "GET", "/v1/artifacts/"+url.PathEscape(ref), nil, "application/octet-stream")
	if err != nil {
		return nil, 0, err
	}
	return resp.Body, resp.ContentLength, nil
}

// Effects returns the task's effect journal.
func (c *Client) Effects(ctx context.Context, ref string) ([]Effect, error) {
	var es []Effect
	return es, c.do(ctx, "GET", taskPath(ref, "effects"), nil, &es)
}

// Failures returns the failed items of the task's fan-out steps that their
// allow_failures tolerated.
func (c *Client) Failures(ctx context.Context, ref string) ([]FailedItem, error) {
	var fs []FailedItem
	return fs, c.do(ctx, "GET", taskPath(ref, "failures"), nil, &fs)
}

// Settle settles an effect whose outcome is unknown: confirmed (it
// happened) or not (perform it again).
func (c *Client) Settle(ctx context.Context, ref string, confirmed bool, req SettleRequest) (*Effect, error) {
	verb := "retry"
	if confirmed {
		verb = "confirm"
	}
	var e Effect
	return &e, c.do(ctx, "POST", taskPath(ref, "effects", verb), req, &e)
}

// Approvals returns the approvals of task ref, oldest first; with ref ""
// the pending approvals of every task that has not finished.
func (c *Client) Approvals(ctx context.Context, ref string) ([]Approval, error) {
	var as []Approval
	if ref == "" {
		return as, c.do(ctx, "GET", "/v1/approvals", nil, &as)
	}
	return as, c.do(ctx, "GET", taskPath(ref, "approvals"), nil, &as)
}

// Decide approves (approve) or rejects approval id of task ref.
func (c *Client) Decide(ctx context.Context, ref, id string, approve bool, req DecideRequest) (*Decided, error) {
	verb := "reject"
	if approve {
		verb = "approve"
	}
	var d Decided
	return &d, c.do(ctx, "POST", taskPath(ref, "approvals", url.PathEscape(id), verb), req, &d)
}

// Committed returns the outputs of the units of step committed so far in
// its current pass (the first limit of them; 0 for the server's default,
// 100; -1 for all).
func (c *Client) Committed(ctx context.Context, ref, step string, limit int) (*Committed, error) {
	var out Committed
	path := taskPath(ref, "steps", url.PathEscape(step), "committed")
	switch {
	case limit > 0:
		path += "?limit=" + strconv.Itoa(limit)
	case limit < 0:
		path += "?limit=0"
	}
	return &out, c.do(ctx, "GET", path, nil, &out)
}

// Handoff returns task ref's handoff: the bundle a fresh context resumes
// it from.
func (c *Client) Handoff(ctx context.Context, ref string) (*Handoff, error) {
	var b Handoff
	return &b, c.do(ctx, "GET", taskPath(ref, "handoff"), nil, &b)
}

// GC frees what no task needs any more.
func (c *Client) GC(ctx context.Context, req GCRequest) (*GCReport, error) {
	var r GCReport
	return &r, c.do(ctx, "POST", "/v1/gc", req, &r)
}

// ReclaimSpace gives back value-log space of records deleted before the
// owner opened the store.
func (c *Client) ReclaimSpace(ctx context.Context) (files int, err error) {
	var r struct {
		Files int `json:"files"`
	}
	return r.Files, c.do(ctx, "POST", "/v1/reclaim", struct{}{}, &r)
}
