// Package hostcall implements the host capabilities a step attempt reaches
// through the ABI: artifacts, the effect journal (exactly-once side effects),
// http.fetch, progress counts and notes, and the unit's own key/value cursor.
// Every capability is deny-by-default: a step reaches only what its task
// file grants it.
package hostcall

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/lhengine/lhengine/engine/internal/confine"
	"github.com/lhengine/lhengine/engine/internal/guest"
	"github.com/lhengine/lhengine/engine/internal/metrics"
	"github.com/lhengine/lhengine/engine/internal/taskfile"
	"github.com/lhengine/lhengine/internal/crashpoint"
	"github.com/lhengine/lhengine/ledger"
)

// Attempt is the host side of one attempt's capability calls. Create one per
// attempt; its methods are called from the guest's goroutine.
type Attempt struct {
	Store    ledger.Store
	Lease    ledger.Lease
	TaskName string
	Step     *taskfile.Step
	// Workspace is the task's workspace folder on the host ("" if none).
	Workspace string
	// WorkspaceGuard, when set, bounds what file effects write to the
	// workspace, as it does the plugin's own writes there.
	WorkspaceGuard *confine.Guard
	// WorkspaceChanged, when set, is set by every file effect the
	// attempt asks for, whether it is then written or answered from the
	// journal: the workspace may hold what it wrote.
	WorkspaceChanged *atomic.Bool
	PluginSHA256     string
	InputSHA256      string
	// Environment is the task's environment facts the attempt runs
	// under, by name, recorded in the provenance of its artifacts; nil
	// for a task without an environment block.
	Environment map[string]string
	// Client performs http effects, fetches and model calls; nil means a
	// default client.
	Client *http.Client
	// Getenv reads the environment variable holding a model's API key;
	// nil means os.Getenv.
	Getenv func(string) string
	// ModelBackoff is the first wait before a model call is sent again
	// after a rate limit or a server error, doubled each time; 0 means
	// 500ms.
	ModelBackoff time.Duration
	// Replay, when set, is the task's replay set (--model-replay at
	// submit): model calls are answered from it and nothing is sent.
	Replay *Replay
	// ModelRecord, when set, is a folder where every live model response
	// is recorded (--model-record), to be replayed later.
	ModelRecord string
	// After is the commit of the unit the worker ran before this one in
	// the same slot, which may still be syncing (a ledger.Durability, from
	// store.CommitAndClaim): a model call, sent before anything of its
	// own is journaled, waits for it, so that no provider is asked, and no
	// call billed, on the strength of a commit a crash could still undo.
	// nil: nothing to wait for.
	After interface{ Wait(context.Context) error }
	// Metrics counts the attempt's host calls, effects and model tokens;
	// nil counts nothing.
	Metrics *metrics.Set

	mu        sync.Mutex
	counts    map[string]int64
	notes     []ledger.Note
	noteBytes uint64
	pause     string
	pauseKey  string
	ask       *ApprovalAsk    // set by approval.request when the unit must wait
	transport string          // the last effect request that got no whole answer, and why
	owned     map[string]bool // artifact refs this task is known to own
	committed map[string]bool // the task's counter names when this attempt first added one; nil before
}

// limits are the task's limits the attempt runs under.
func (a *Attempt) limits() taskfile.Limits { return a.Step.LimitsOf() }

// LogPassthrough is the most bytes of plugin log messages the attempt
// passes on to the engine's logger (the task's limits.log_passthrough); the
// guest package asks for it (guest.LogPassthroughLimiter).
func (a *Attempt) LogPassthrough() int64 { return int64(a.limits().LogPassthrough) }

// Progress returns the counts and notes the attempt reported, to be
// committed with its outcome.
func (a *Attempt) Progress() (map[string]int64, []ledger.Note) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.counts, a.notes
}

// PauseReason is set when the attempt must stop for a human (an effect whose
// outcome is unknown under mode manual).
func (a *Attempt) PauseReason() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.pause
}

// TransportFailure is why the attempt's last http effect request that got
// no whole answer (refused, reset, closed mid-response, timed out) failed,
// or "": a plugin failure after one is the effect's, not the plugin's.
func (a *Attempt) TransportFailure() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.transport
}

// transportFailed records that an effect request got no whole answer.
func (a *Attempt) transportFailed(why string) {
	a.mu.Lock()
	a.transport = why
	a.mu.Unlock()
}

// PauseKey is the key of the effect PauseReason is about.
func (a *Attempt) PauseKey() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.pauseKey
}

func herr(status int32, format string, args ...any) error {
	return &guest.HostError{Status: status, Message: fmt.Sprintf(format, args...)}
}

// Call dispatches a JSON capability call.
func (a *Attempt) Call(ctx context.Context, name string, req []byte) (out []byte, err error) {
	a.Metrics.HostCall(name)
	// A span under the attempt's run span, when the unit is traced.
	if run := trace.SpanFromContext(ctx); run.SpanContext().IsValid() {
		var span trace.Span
		ctx, span = run.TracerProvider().Tracer("lhengine").Start(ctx, "lhengine.host_call",
			trace.WithAttributes(attribute.String("lhengine.call", metrics.HostCallLabel(name))))
		defer func() {
			if err != nil {
				span.SetStatus(codes.Error, err.Error())
			}
			span.End()
		}()
	}
	switch name {
	case "effect.do":
		return a.effect(ctx, req)
	case "approval.request":
		return a.approval(ctx, req)
	case "handoff.get":
		return a.handoff()
	case "notes.list":
		return a.notesList(req)
	case "notes.compact":
		return a.notesCompact(ctx, req)
	case "http.fetch":
		return a.fetch(ctx, req)
	case "model.generate":
		return a.generate(ctx, req)
	case "progress.count":
		var r struct {
			Name  string `json:"name"`
			Delta int64  `json:"delta"`
		}
		if err := json.Unmarshal(req, &r); err != nil || r.Name == "" {
			return nil, herr(guest.StatusInvalid, "progress.count wants {\"name\": string, \"delta\": integer}")
		}
		if err := a.count(r.Name, r.Delta); err != nil {
			return nil, err
		}
		return []byte("{}"), nil
	case "progress.note":
		var r struct{ Kind, Text string }
		if err := json.Unmarshal(req, &r); err != nil {
			return nil, herr(guest.StatusInvalid, "progress.note wants {\"kind\": string, \"text\": string}")
		}
		switch r.Kind {
		case "finding", "decision", "blocker":
		default:
			return nil, herr(guest.StatusInvalid, "progress.note kind %q: want finding, decision or blocker", r.Kind)
		}
		if err := a.note(r.Kind, r.Text); err != nil {
			return nil, err
		}
		return []byte("{}"), nil
	case "kv.get":
		var r struct{ Key string }
		if err := json.Unmarshal(req, &r); err != nil || r.Key == "" {
			return nil, herr(guest.StatusInvalid, "kv.get wants {\"key\": string}")
		}
		v, ok, err := a.Store.KVGet(a.Lease.Task, a.Lease.Step, a.Lease.Item, r.Key)
		if err != nil {
			return nil, err
		}
		return json.Marshal(struct {
			Found bool            `json:"found"`
			Value json.RawMessage `json:"value"`
		}{ok, orNull(v)})
	case "kv.put":
		var r struct {
			Key   string          `json:"key"`
			Value json.RawMessage `json:"value"`
		}
		if err := json.Unmarshal(req, &r); err != nil || r.Key == "" {
			return nil, herr(guest.StatusInvalid, "kv.put wants {\"key\": string, \"value\": any}")
		}
		if err := a.Store.KVPut(ctx, a.Lease, r.Key, orNull(r.Value), int64(a.limits().KVBytes)); err != nil {
			if errors.Is(err, ledger.ErrLeaseLost) {
				return nil, herr(guest.StatusLeaseLost, "%v", err)
			}
			return nil, quotaStatus("kv.put", err)
		}
		return []byte("{}"), nil
	}
	return nil, herr(guest.StatusUnavailable, "unknown capability %q", name)
}

// PutArtifact stores an artifact with its provenance.
func (a *Attempt) PutArtifact(ctx context.Context, meta, data []byte) ([]byte, error) {
	a.Metrics.HostCall("artifact.put")
	var m struct {
		Name      string `json:"name"`
		MediaType string `json:"media_type"`
	}
	if err := json.Unmarshal(meta, &m); err != nil || m.Name == "" {
		return nil, herr(guest.StatusInvalid, "artifact meta wants {\"name\": string, \"media_type\": string}")
	}
	ref, err := a.Store.PutArtifact(ctx, ledger.Provenance{
		Name: m.Name, MediaType: m.MediaType, Task: a.Lease.Task, Step: a.Step.Name, Item: a.Lease.Item,
		Attempt: a.Lease.Attempt, PluginSHA256: a.PluginSHA256, InputSHA256: a.InputSHA256, Policies: a.Step.Policies,
		Environment: a.Environment,
	}, data, int64(a.limits().ArtifactBytes))
	if err != nil {
		return nil, quotaStatus("artifact_put", err)
	}
	a.own(ref)
	crashpoint.Reached(crashpoint.ArtifactAfterPut)
	return json.Marshal(map[string]any{"ref": ref, "size": len(data)})
}

// ReadArtifact reads part of an artifact by ref. A plugin reads only its
// own task's artifacts: a ref no unit of the task stored is StatusNotFound,
// whether or not another task stored it.
func (a *Attempt) ReadArtifact(_ context.Context, ref string, offset int64, buf []byte) (int, error) {
	a.Metrics.HostCall("artifact.read")
	a.mu.Lock()
	owned := a.owned[ref]
	a.mu.Unlock()
	if !owned {
		ok, err := a.Store.OwnsArtifact(a.Lease.Task, ref)
		if err != nil {
			return 0, err
		}
		if !ok {
			return 0, herr(guest.StatusNotFound, "artifact %s: this task stored no such artifact", ref)
		}
		a.own(ref)
	}
	n, _, err := a.Store.ReadArtifact(ref, offset, buf)
	if errors.Is(err, ledger.ErrNotFound) {
		return 0, herr(guest.StatusNotFound, "%v", err)
	}
	return n, err
}

// own notes that the task owns the artifact ref.
func (a *Attempt) own(ref string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.owned == nil {
		a.owned = map[string]bool{}
	}
	a.owned[ref] = true
}

func orNull(b json.RawMessage) json.RawMessage {
	if len(b) == 0 {
		return json.RawMessage("null")
	}
	return b
}

// quotaStatus turns a store quota refusal into the status a plugin sees:
// TooLarge for a value larger than the whole quota, Budget otherwise.
func quotaStatus(fn string, err error) error {
	var qe *ledger.QuotaError
	if !errors.As(err, &qe) {
		return err
	}
	if qe.TooLarge() {
		return herr(guest.StatusTooLarge, "%s: %v", fn, qe)
	}
	return herr(guest.StatusBudget, "%s: %v", fn, qe)
}

// count adds delta to the attempt's counter name, within the task's limits
// on distinct counter names: per attempt, and over the task (the names its
// committed units reported, read once per attempt, and this attempt's new
// ones). The limits are checked and the name added under one hold of a.mu,
// so calls at once cannot pass a limit together.
func (a *Attempt) count(name string, delta int64) error {
	lim := a.limits()
	a.mu.Lock()
	_, known := a.counts[name]
	load := !known && len(a.counts) < lim.CounterNamesPerAttempt && a.committed == nil
	a.mu.Unlock()
	if load {
		committed, err := a.committedCounterNames()
		if err != nil {
			return err
		}
		a.mu.Lock()
		if a.committed == nil {
			a.committed = committed
		}
		a.mu.Unlock()
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if _, known := a.counts[name]; !known {
		if len(a.counts) >= lim.CounterNamesPerAttempt {
			return herr(guest.StatusBudget, "progress.count %q: this attempt already reported %d distinct counter names, its limit (limits.counter_names_per_attempt)", name, lim.CounterNamesPerAttempt)
		}
		total := len(a.committed)
		for c := range a.counts {
			if !a.committed[c] {
				total++
			}
		}
		if !a.committed[name] && total >= lim.CounterNames {
			return herr(guest.StatusBudget, "progress.count %q: the task has %d distinct counter names, its limit (limits.counter_names)", name, lim.CounterNames)
		}
	}
	if a.counts == nil {
		a.counts = map[string]int64{}
	}
	a.counts[name] += delta
	return nil
}

// committedCounterNames are the counter names the task's committed units
// reported.
func (a *Attempt) committedCounterNames() (map[string]bool, error) {
	committed := map[string]bool{}
	err := a.Store.Read(func(r ledger.Reader) error {
		t, err := r.Task(a.Lease.Task)
		if err != nil {
			return err
		}
		for c := range t.Counters {
			committed[c] = true
		}
		return nil
	})
	return committed, err
}

// note keeps a progress note, within the attempt's limits on notes and on
// their bytes.
func (a *Attempt) note(kind, text string) error {
	lim := a.limits()
	size := uint64(len(text))
	if size > lim.NoteBytes {
		return herr(guest.StatusTooLarge, "progress.note: a note of %d bytes is larger than the attempt's whole note allowance of %d bytes (limits.note_bytes)", size, lim.NoteBytes)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.notes) >= lim.Notes {
		return herr(guest.StatusBudget, "progress.note: this attempt already made %d notes, its limit (limits.notes)", lim.Notes)
	}
	if a.noteBytes+size > lim.NoteBytes {
		return herr(guest.StatusBudget, "progress.note: this attempt's notes already hold %d of %d bytes (limits.note_bytes)", a.noteBytes, lim.NoteBytes)
	}
	a.noteBytes += size
	a.notes = append(a.notes, ledger.Note{Kind: kind, Text: text})
	return nil
}
