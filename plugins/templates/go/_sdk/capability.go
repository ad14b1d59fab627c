package sdk

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"sync/atomic"
	"unicode/utf8"
)

// Request size caps of the host (specs/abi.md).
const (
	CallRequestMax  = 1 << 20   // bytes of one Call's JSON request
	ArtifactDataMax = 256 << 20 // bytes of one artifact
	ArtifactMetaMax = 4 << 10   // bytes of an artifact's JSON meta
)

// HostError is a failed host call: its status and the host's message
// (the ABI's last_error). errors.Is(err, ErrNotFound) and the like match
// its Status.
type HostError struct {
	Status  Errno
	Message string
}

func (e *HostError) Error() string {
	if e.Message == "" {
		return e.Status.Error()
	}
	return e.Status.Error() + ": " + e.Message
}

// Unwrap returns the status.
func (e *HostError) Unwrap() error { return e.Status }

// hostError makes the error of a call that returned status rc, with the
// host's message.
func hostError(rc int32) error {
	return &HostError{Status: Errno(rc), Message: lastError()}
}

// lastError is the host's message for the most recent failed call.
func lastError() string {
	buf := make([]byte, 256)
	for range 2 {
		n := hostLastError(buf)
		if n < 0 {
			return ""
		}
		if int(n) <= len(buf) {
			return string(buf[:n])
		}
		buf = make([]byte, n)
	}
	return ""
}

// callBufSize is the buffer a call's response is first read into; a larger
// response is fetched with result.
const callBufSize = 512

// output finishes a call under the ABI's output convention: rc is what the
// function returned with buf as its output buffer.
func output(rc int32, buf []byte) ([]byte, error) {
	if rc < 0 {
		return nil, hostError(rc)
	}
	if int(rc) <= len(buf) {
		return buf[:rc], nil
	}
	big := make([]byte, rc)
	got := hostResult(big)
	if got < 0 {
		return nil, hostError(got)
	}
	if got != rc {
		return nil, fmt.Errorf("sdk: pending result of %d bytes, expected %d", got, rc)
	}
	return big, nil
}

// CallRaw performs the capability name with a JSON request and returns its
// JSON response.
func (c *Context) CallRaw(name string, req []byte) ([]byte, error) {
	if len(req) > CallRequestMax {
		return nil, &HostError{Status: ErrTooLarge, Message: fmt.Sprintf("sdk: request of %d bytes is over the limit of %d", len(req), CallRequestMax)}
	}
	yieldSometimes()
	var small [callBufSize]byte
	buf := small[:]
	rc := hostCall(name, req, buf)
	if rc >= 0 && int(rc) <= len(buf) {
		return append([]byte(nil), buf[:rc]...), nil
	}
	return output(rc, buf)
}

// hostCalls counts the capability calls of this instance.
var hostCalls atomic.Uint32

// yieldSometimes lets other goroutines run every so often. A Wasm guest has
// one thread and no preemption: a loop of host calls that never blocks
// would keep the garbage collector's workers from finishing a cycle, and
// the heap would grow until the memory limit stops the plugin.
func yieldSometimes() {
	if hostCalls.Add(1)%64 == 0 {
		runtime.Gosched()
	}
}

// Call performs the capability name (such as "kv.get"): req is encoded as
// JSON, the JSON response is decoded into resp unless resp is nil. A host
// refusal is a *HostError.
func (c *Context) Call(name string, req, resp any) error {
	raw, err := json.Marshal(req)
	if err != nil {
		return fmt.Errorf("sdk: encoding the %s request: %w", name, err)
	}
	out, err := c.CallRaw(name, raw)
	if err != nil {
		return err
	}
	if resp == nil {
		return nil
	}
	if err := json.Unmarshal(out, resp); err != nil {
		return fmt.Errorf("sdk: decoding the %s response: %w", name, err)
	}
	return nil
}

// Effect kinds.
const (
	EffectHTTP = "http"
	EffectFile = "file"
)

// HTTPEffect is the request of an "http" effect.
type HTTPEffect struct {
	Method  string            `json:"method"`
	URL     string            `json:"url"`
	Headers map[string]string `json:"headers,omitempty"`
	Body    string            `json:"body,omitempty"`
}

// HTTPEffectResult is the result of an "http" effect.
type HTTPEffectResult struct {
	Status  int               `json:"status"`
	Headers map[string]string `json:"headers"`
	Body    string            `json:"body"`
}

// FileEffect is the request of a "file" effect: write content as the whole
// file at path in the task's workspace, creating or replacing it.
//
// Append must stay false: the host refuses an appending file effect
// (ErrInvalid), since replaying it after a crash would append twice, while
// writing the whole file again leaves it the same.
type FileEffect struct {
	Path    string `json:"path"`
	Content string `json:"content"`
	Append  bool   `json:"append"`
}

// FileEffectResult is the result of a "file" effect.
type FileEffectResult struct {
	Path   string `json:"path"`
	Bytes  int64  `json:"bytes"`
	SHA256 string `json:"sha256"`
}

// Effect performs a side effect through the effect journal ("effect.do"):
// kind is EffectHTTP or EffectFile, request its request (HTTPEffect,
// FileEffect), key its idempotency key. An effect already done under key is
// not done again: its recorded result is returned. result, unless nil,
// receives the result (HTTPEffectResult, FileEffectResult).
func (c *Context) Effect(key, kind string, request any, result any) error {
	_, err := c.EffectReplayed(key, kind, request, result)
	return err
}

// EffectReplayed is Effect, also reporting whether the result was replayed
// from the journal rather than done now.
func (c *Context) EffectReplayed(key, kind string, request any, result any) (replayed bool, err error) {
	req := struct {
		Key     string `json:"key"`
		Kind    string `json:"kind"`
		Request any    `json:"request"`
	}{key, kind, request}
	var resp struct {
		Result   json.RawMessage `json:"result"`
		Replayed bool            `json:"replayed"`
	}
	if err := c.Call("effect.do", req, &resp); err != nil {
		return false, err
	}
	if result != nil && len(resp.Result) > 0 {
		if err := json.Unmarshal(resp.Result, result); err != nil {
			return resp.Replayed, fmt.Errorf("sdk: decoding the effect result: %w", err)
		}
	}
	return resp.Replayed, nil
}

// FetchRequest is an HTTP request to an allowlisted host ("http.fetch").
type FetchRequest struct {
	Method  string            `json:"method"`
	URL     string            `json:"url"`
	Headers map[string]string `json:"headers"`
}

// FetchResponse is the answer to a FetchRequest. Body holds a UTF-8 body;
// a body that is not UTF-8 is in BodyBase64 instead. BodyBytes returns it
// either way.
type FetchResponse struct {
	Status     int               `json:"status"`
	Headers    map[string]string `json:"headers"`
	Body       string            `json:"body"`
	BodyBase64 string            `json:"body_base64,omitempty"`
	URL        string            `json:"url"` // after redirects
}

// BodyBytes is the body as bytes.
func (r *FetchResponse) BodyBytes() ([]byte, error) {
	if r.BodyBase64 != "" {
		return base64.StdEncoding.DecodeString(r.BodyBase64)
	}
	return []byte(r.Body), nil
}

// Fetch performs an HTTP request ("http.fetch").
func (c *Context) Fetch(req FetchRequest) (*FetchResponse, error) {
	if req.Method == "" {
		req.Method = "GET"
	}
	if req.Headers == nil {
		req.Headers = map[string]string{}
	}
	var resp FetchResponse
	if err := c.Call("http.fetch", req, &resp); err != nil {
		return nil, err
	}
	return &resp, nil
}

// Count adds delta to the task's progress counter name ("progress.count").
func (c *Context) Count(name string, delta int64) error {
	return c.Call("progress.count", struct {
		Name  string `json:"name"`
		Delta int64  `json:"delta"`
	}{name, delta}, nil)
}

// Note kinds.
const (
	NoteFinding  = "finding"
	NoteDecision = "decision"
	NoteBlocker  = "blocker"
)

// Note proposes a progress note ("progress.note") of kind NoteFinding,
// NoteDecision or NoteBlocker.
func (c *Context) Note(kind, text string) error {
	return c.Call("progress.note", struct {
		Kind string `json:"kind"`
		Text string `json:"text"`
	}{kind, text}, nil)
}

// KVGet reads key of the work unit's key-value state into v ("kv.get"). It
// reports false, leaving v alone, when the key is not set.
//
// The state belongs to this step and fan-out item of this task: other steps
// and items have their own. It outlives the attempt, so a retry or a later
// repair pass of the same step and item reads what an earlier attempt put.
func (c *Context) KVGet(key string, v any) (bool, error) {
	var resp struct {
		Found bool            `json:"found"`
		Value json.RawMessage `json:"value"`
	}
	if err := c.Call("kv.get", struct {
		Key string `json:"key"`
	}{key}, &resp); err != nil {
		return false, err
	}
	if !resp.Found {
		return false, nil
	}
	if v != nil {
		if err := json.Unmarshal(resp.Value, v); err != nil {
			return true, fmt.Errorf("sdk: decoding kv %q: %w", key, err)
		}
	}
	return true, nil
}

// KVPut sets key of the work unit's key-value state (see KVGet) to v,
// encoded as JSON ("kv.put"). The entry is durable when KVPut returns, even
// if the attempt later fails. It returns ErrLeaseLost when this attempt no
// longer holds the unit's lease, and ErrBudget or ErrTooLarge when the
// entry does not fit the task's kv quota.
func (c *Context) KVPut(key string, v any) error {
	raw, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("sdk: encoding kv %q: %w", key, err)
	}
	return c.Call("kv.put", struct {
		Key   string          `json:"key"`
		Value json.RawMessage `json:"value"`
	}{key, raw}, nil)
}

// Ref names a stored artifact.
type Ref struct {
	Ref  string `json:"ref"` // "sha256:<hex>"
	Size int64  `json:"size"`
}

// PutArtifact stores data as an artifact called name (a file name such as
// "report.md") of the given media type, and returns its ref.
func (c *Context) PutArtifact(name, mediaType string, data []byte) (Ref, error) {
	if name == "" || !utf8.ValidString(name) {
		return Ref{}, &HostError{Status: ErrInvalid, Message: "sdk: artifact name must be non-empty UTF-8"}
	}
	if len(data) > ArtifactDataMax {
		return Ref{}, &HostError{Status: ErrTooLarge, Message: fmt.Sprintf("sdk: artifact of %d bytes is over the limit of %d", len(data), ArtifactDataMax)}
	}
	meta, err := json.Marshal(struct {
		Name      string `json:"name"`
		MediaType string `json:"media_type,omitempty"`
	}{name, mediaType})
	if err != nil {
		return Ref{}, err
	}
	yieldSometimes()
	buf := make([]byte, 256)
	out, err := output(hostArtifactPut(meta, data, buf), buf)
	if err != nil {
		return Ref{}, err
	}
	var ref Ref
	if err := json.Unmarshal(out, &ref); err != nil {
		return Ref{}, fmt.Errorf("sdk: decoding the artifact ref: %w", err)
	}
	return ref, nil
}

// readChunk is how much one artifact_read asks for.
const readChunk = 1 << 20

// ReadArtifact reads the whole artifact ref.
func (c *Context) ReadArtifact(ref string) ([]byte, error) {
	var out []byte
	for {
		if cap(out)-len(out) < readChunk {
			grown := make([]byte, len(out), 2*cap(out)+readChunk)
			copy(grown, out)
			out = grown
		}
		yieldSometimes()
		n := hostArtifactRead(ref, int64(len(out)), out[len(out):cap(out)])
		if n < 0 {
			return nil, hostError(n)
		}
		if n == 0 {
			return out, nil
		}
		out = out[:len(out)+int(n)]
	}
}

// IsPaused reports whether err says the task is pausing for a human
// decision (the attempt is being stopped).
func IsPaused(err error) bool { return errors.Is(err, ErrPaused) }

// LastError is the host's message about the most recent host call of this
// attempt that failed ("" when none has). Errors of the Context's methods
// already carry it in their *HostError.
func (c *Context) LastError() string { return lastError() }

// Decision is a person's answer to RequestApproval.
type Decision struct {
	// Approval is the approval's id (lhengine approvals lists it).
	Approval string `json:"approval"`
	// Decision is "approved", "rejected" or "expired" (no decision came
	// before expires_in ran out).
	Decision string `json:"decision"`
	By       string `json:"by,omitempty"`
	Note     string `json:"note,omitempty"`
}

// Approved reports whether the decision was yes.
func (d *Decision) Approved() bool { return d.Decision == "approved" }

// ApprovalRequest asks a person to decide on Subject ("approval.request").
type ApprovalRequest struct {
	Prompt string `json:"prompt"`
	// Subject is what the decision is about: any value that encodes as
	// JSON. A decision holds for the same prompt and subject only.
	Subject any `json:"subject"`
	// ExpiresIn is how long the request waits, such as "24h"; "" for no
	// expiry. An expired request answers Decision "expired".
	ExpiresIn string `json:"expires_in,omitempty"`
}

// RequestApproval asks a person to decide ("approval.request"). The first
// call returns ErrPaused (IsPaused): return it from the step at once; the
// unit waits, uncharged, until the decision, and then the step runs again
// from the start and the same call returns the Decision. A decided request
// whose subject changed since is asked again.
func (c *Context) RequestApproval(req ApprovalRequest) (*Decision, error) {
	var d Decision
	if err := c.Call("approval.request", req, &d); err != nil {
		return nil, err
	}
	return &d, nil
}

// Handoff is the task's handoff ("handoff.get"): what a fresh context
// resumes the task from (specs/abi.md §4.3). The fields below are the
// ones most steps read; Raw is the whole bundle as JSON.
type Handoff struct {
	Objective   string   `json:"objective"`
	Constraints []string `json:"constraints"`
	Checkpoint  struct {
		Step  string `json:"step"`
		Pass  int    `json:"pass"`
		Done  int    `json:"done"`
		Total int    `json:"total"`
	} `json:"checkpoint"`
	Completed []struct {
		Name  string `json:"name"`
		Units int    `json:"units"`
	} `json:"completed_steps"`
	Pending []struct {
		Name string `json:"name"`
	} `json:"pending_steps"`
	// Decisions are every decision note, verbatim.
	Decisions []HandoffNote `json:"decisions"`
	Blockers  []HandoffNote `json:"blockers"`
	Findings  struct {
		Total  int           `json:"total"`
		Recent []HandoffNote `json:"recent"`
	} `json:"findings"`
	Environment *struct {
		Facts map[string]string `json:"facts"`
	} `json:"environment"`
	NextActions []string        `json:"next_actions"`
	Raw         json.RawMessage `json:"-"`
}

// HandoffNote is a progress note as the handoff carries it.
type HandoffNote struct {
	Kind string `json:"kind"`
	Text string `json:"text"`
	Step string `json:"step"`
	Item int    `json:"item"`
}

// Handoff reads the task's handoff ("handoff.get").
func (c *Context) Handoff() (*Handoff, error) {
	var raw json.RawMessage
	if err := c.Call("handoff.get", struct{}{}, &raw); err != nil {
		return nil, err
	}
	h := &Handoff{Raw: raw}
	if err := json.Unmarshal(raw, h); err != nil {
		return nil, fmt.Errorf("sdk: decoding the handoff: %w", err)
	}
	return h, nil
}

// Note is a progress note as notes.list gives it.
type Note struct {
	Seq  uint64 `json:"seq"`
	Kind string `json:"kind"`
	Text string `json:"text"`
	Step string `json:"step"`
	Item int    `json:"item"`
	// Replaces, on a summary, lists the notes it stands for.
	Replaces []uint64 `json:"replaces,omitempty"`
}

// OpenNotes lists up to limit (1 to 1000; 0 for 1000) of the task's notes
// a summary may replace, oldest first, after seq after (-1 for from the
// start) ("notes.list"): findings and summaries not replaced yet.
// Decisions and blockers are protected and never listed.
func (c *Context) OpenNotes(after int64, limit int) ([]Note, error) {
	req := map[string]any{"limit": limit}
	if after >= 0 {
		req["after"] = after
	}
	var resp struct {
		Notes []Note `json:"notes"`
	}
	if err := c.Call("notes.list", req, &resp); err != nil {
		return nil, err
	}
	return resp.Notes, nil
}

// CompactNotes replaces the notes replaces (seqs from OpenNotes) with one
// summary note ("notes.compact") and returns its seq. It applies at once,
// not with the step's output. A protected note is ErrDenied.
func (c *Context) CompactNotes(replaces []uint64, summary string) (uint64, error) {
	var resp struct {
		Seq uint64 `json:"seq"`
	}
	err := c.Call("notes.compact", struct {
		Replaces []uint64 `json:"replaces"`
		Summary  string   `json:"summary"`
	}{replaces, summary}, &resp)
	return resp.Seq, err
}
