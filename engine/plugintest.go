package engine

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/lhengine/lhengine/engine/internal/guest"
	"github.com/lhengine/lhengine/engine/internal/hostcall"
	"github.com/lhengine/lhengine/engine/internal/taskfile"
	"github.com/lhengine/lhengine/fault"
	"github.com/lhengine/lhengine/ledger"
	"github.com/lhengine/lhengine/store"
)

// PluginTest says how TestPlugin runs a plugin once (lhengine plugin test).
type PluginTest struct {
	// Name is the plugin's name in messages (its file name).
	Name string
	// Input is the step input; nil is null. Ignored when Request is set.
	Input json.RawMessage
	// Request, when set, is a whole request envelope (specs/abi.md §3):
	// what the plugin reads on stdin, as far as its members go.
	Request json.RawMessage
	// Policy are policy parameters, set over the request's.
	Policy map[string]json.RawMessage
	// AllowHTTP are the host patterns http.fetch and http effects may reach,
	// as a step's http { allow = [...] } and effect "http" { hosts = [...] }
	// would grant; none denies both.
	AllowHTTP []string
	// CacheDir keeps compiled modules between processes; "" compiles in
	// memory.
	CacheDir string
	// HTTPClient performs fetches and effects; nil is a default client.
	HTTPClient *http.Client
}

// PluginTestResult is what one TestPlugin run gave.
type PluginTestResult struct {
	// Output is the plugin's output when it succeeded (and did not ask for
	// repair).
	Output json.RawMessage
	// NeedsRepair and RepairReason: the plugin asked for the task to repair.
	NeedsRepair  bool
	RepairReason string
	// FailureKind and FailureMessage say why the attempt failed ("" when it
	// did not); the kinds are fault.Kind's.
	FailureKind, FailureMessage string
	Log                         string // the plugin's log (stderr and log calls)
	// HostCalls are the first MaxRecordedHostCalls capability calls that
	// reached the host, in order; calls the sandbox refuses before (an
	// unknown capability, a request that is not a JSON object, a call past
	// the budget) are only counted in HostCallsMade.
	HostCalls     []HostCall
	HostCallsMade int // every lhengine_v1 call, recorded or not
	Duration      time.Duration
	MemoryBytes   uint64 // the largest size of linear memory
}

// HostCall is one capability call a plugin made: a call (its name),
// artifact_put or artifact_read.
type HostCall struct {
	Name string `json:"name"`
	// Request is the call's JSON argument (artifact_put: its meta, with
	// "bytes"; artifact_read: {"ref", "offset"}); Response the host's
	// answer when it gave one. Past MaxRecordedHostCallBytes either is a
	// JSON string holding its beginning.
	Request  json.RawMessage `json:"request"`
	Response json.RawMessage `json:"response,omitempty"`
	// Status is 0 for an answer, else the ABI status the plugin was given,
	// StatusName and Message what it means.
	Status     int32  `json:"status"`
	StatusName string `json:"status_name,omitempty"`
	Message    string `json:"message,omitempty"`
}

// Bounds of what TestPlugin records of host calls.
const (
	MaxRecordedHostCalls     = 1000
	MaxRecordedHostCallBytes = 4 << 10
)

// TestPlugin runs the plugin wasm once, outside any home, with the limits
// and sandbox of a step that declares nothing: the default timeout and
// memory, no workspace, no model, and only the http hosts t allows. The
// calls that need a store (kv, artifacts, effects, progress, notes,
// approval) are served by a throwaway store in a temporary folder holding a
// one-unit task under a lease, removed when TestPlugin returns.
//
// A failure of the plugin, including a module that cannot be loaded, is
// reported in the result; the error is for bad options (a request
// envelope that is not one) and for the engine's own failures.
func TestPlugin(ctx context.Context, wasm []byte, t PluginTest) (*PluginTestResult, error) {
	req, err := pluginTestRequest(t)
	if err != nil {
		return nil, err
	}
	step := &taskfile.Step{Name: req.Step, Timeout: taskfile.DefaultTimeout, Memory: taskfile.DefaultMemory,
		Workspace: taskfile.WorkspaceNone, Params: req.Policy}
	if len(t.AllowHTTP) > 0 {
		hosts := make([]string, len(t.AllowHTTP))
		for i, h := range t.AllowHTTP {
			hosts[i] = strings.ToLower(h)
		}
		step.HTTP = &taskfile.HTTPGrant{Allow: hosts, MaxBytes: taskfile.DefaultHTTPMaxBytes, Timeout: taskfile.DefaultHTTPTimeout}
		step.Effects = map[string]*taskfile.EffectGrant{taskfile.EffectHTTP: {Kind: taskfile.EffectHTTP, Hosts: hosts, Mode: taskfile.DefaultEffectMode}}
	}

	// On disk, not in memory: Badger's in-memory mode refuses values as
	// large as an artifact's chunks. Nothing in it outlives the call, so
	// its commits are not synced.
	dir, err := os.MkdirTemp("", "lhengine-plugin-test-")
	if err != nil {
		return nil, fmt.Errorf("throwaway store: %w", err)
	}
	defer os.RemoveAll(dir)
	s, err := store.Open(dir, store.Options{NoSync: true})
	if err != nil {
		return nil, fmt.Errorf("throwaway store: %w", err)
	}
	defer s.Close()
	if _, _, err := s.Submit(ctx, ledger.NewTask{Name: req.TaskName, Steps: []ledger.StepState{{Name: step.Name}}}); err != nil {
		return nil, fmt.Errorf("throwaway store: %w", err)
	}
	c, err := s.Claim(ctx, ledger.ClaimRequest{Owner: s.Owner("plugin-test"), Max: 1, LeaseFor: 24 * time.Hour})
	if err != nil {
		return nil, fmt.Errorf("throwaway store: %w", err)
	}
	if len(c.Leases) != 1 {
		return nil, errors.New("throwaway store: the test unit could not be claimed")
	}
	l := c.Leases[0]
	if req.TaskID == "" {
		req.TaskID = l.Task
	}
	if req.Now.IsZero() {
		req.Now = l.Unit.Claimed
	}

	rt, err := guest.NewRuntime(ctx, guest.Config{CacheDir: t.CacheDir})
	if err != nil {
		return nil, err
	}
	defer rt.Close(context.WithoutCancel(ctx))
	name := t.Name
	if name == "" {
		name = "plugin.wasm"
	}
	p, err := rt.LoadBytes(ctx, name, wasm)
	if err != nil {
		var se *fault.StepError
		if errors.As(err, &se) {
			return &PluginTestResult{FailureKind: string(se.Kind), FailureMessage: se.Message}, nil
		}
		return nil, err
	}
	inSum := sha256.Sum256(req.Input)
	h := &recorder{Attempt: &hostcall.Attempt{Store: s, Lease: l, TaskName: req.TaskName, Step: step,
		PluginSHA256: p.SHA256, InputSHA256: hex.EncodeToString(inSum[:]), Client: t.HTTPClient}}
	res, runErr := p.Run(ctx, req, guest.Limits{Timeout: step.Timeout, MemoryBytes: step.Memory}, h)
	out := &PluginTestResult{HostCalls: h.calls}
	if res != nil {
		out.Log, out.HostCallsMade, out.Duration, out.MemoryBytes = string(res.Log), res.HostCalls, res.Duration, res.MemoryBytes
	}
	if runErr != nil {
		if ctx.Err() != nil {
			return nil, runErr
		}
		var se *fault.StepError
		if !errors.As(runErr, &se) {
			return nil, runErr
		}
		out.FailureKind, out.FailureMessage = string(se.Kind), se.Message
		return out, nil
	}
	if reason := h.PauseReason(); reason != "" {
		// A worker would pause the task here; there is no task to pause.
		out.FailureKind, out.FailureMessage = string(fault.Internal), "the attempt would pause its task: "+reason
		return out, nil
	}
	if res.NeedsRepair {
		out.NeedsRepair, out.RepairReason = true, res.RepairReason
		return out, nil
	}
	out.Output = res.Output
	return out, nil
}

// pluginTestRequest is the envelope of t: Request decoded, or one built
// around Input, with t.Policy set over its policy.
func pluginTestRequest(t PluginTest) (guest.Request, error) {
	req := guest.Request{TaskName: "plugin-test", Step: "test", Attempt: 1, Input: t.Input}
	var policy map[string]json.RawMessage
	if t.Request != nil {
		var w struct {
			ABI      *int   `json:"abi"`
			TaskID   string `json:"task_id"`
			TaskName string `json:"task_name"`
			Step     string `json:"step"`
			Item     *struct {
				Index int             `json:"index"`
				Key   json.RawMessage `json:"key"`
				Value json.RawMessage `json:"value"`
			} `json:"item"`
			Attempt     int                        `json:"attempt"`
			Repair      *guest.Repair              `json:"repair"`
			Input       json.RawMessage            `json:"input"`
			Policy      map[string]json.RawMessage `json:"policy"`
			Now         *time.Time                 `json:"now"`
			Environment map[string]string          `json:"environment"`
			Objective   string                     `json:"objective"`
			Constraints []string                   `json:"constraints"`
		}
		if err := json.Unmarshal(t.Request, &w); err != nil {
			return req, fmt.Errorf("the request envelope is not one (specs/abi.md §3): %w", err)
		}
		if w.ABI != nil && *w.ABI != guest.ABIVersion {
			return req, fmt.Errorf("the request envelope is of abi %d; this engine speaks abi %d", *w.ABI, guest.ABIVersion)
		}
		if w.TaskName != "" {
			req.TaskName = w.TaskName
		}
		if w.Step != "" {
			req.Step = w.Step
		}
		if w.Attempt > 0 {
			req.Attempt = w.Attempt
		}
		req.TaskID, req.Repair, req.Input = w.TaskID, w.Repair, w.Input
		if w.Item != nil {
			req.Item = &guest.Item{Index: w.Item.Index, Key: w.Item.Key, Value: w.Item.Value}
		}
		if w.Now != nil {
			req.Now = *w.Now
		}
		req.Environment, req.Objective, req.Constraints = w.Environment, w.Objective, w.Constraints
		policy = w.Policy
	}
	if len(t.Policy) > 0 {
		if policy == nil {
			policy = map[string]json.RawMessage{}
		}
		for k, v := range t.Policy {
			policy[k] = v
		}
	}
	if policy != nil {
		b, err := json.Marshal(policy)
		if err != nil {
			return req, fmt.Errorf("policy parameters: %w", err)
		}
		req.Policy = b
	}
	return req, nil
}

// recorder is the host of a TestPlugin attempt: the step's hostcall.Attempt,
// with every capability call it serves recorded.
type recorder struct {
	*hostcall.Attempt // Call, PutArtifact, ReadArtifact, LogPassthrough

	mu    sync.Mutex
	calls []HostCall
}

func (r *recorder) Log(hclog.Level, string)         {}
func (r *recorder) Heartbeat(context.Context) error { return nil }

func (r *recorder) Call(ctx context.Context, name string, req []byte) ([]byte, error) {
	resp, err := r.Attempt.Call(ctx, name, req)
	r.record(name, recorded(req), resp, err)
	return resp, err
}

func (r *recorder) PutArtifact(ctx context.Context, meta, data []byte) ([]byte, error) {
	resp, err := r.Attempt.PutArtifact(ctx, meta, data)
	var m map[string]json.RawMessage
	arg := recorded(meta)
	if json.Unmarshal(meta, &m) == nil && m != nil && len(meta) <= MaxRecordedHostCallBytes {
		m["bytes"] = json.RawMessage(fmt.Sprint(len(data)))
		if b, err := json.Marshal(m); err == nil {
			arg = b
		}
	}
	r.record("artifact_put", arg, resp, err)
	return resp, err
}

func (r *recorder) ReadArtifact(ctx context.Context, ref string, offset int64, buf []byte) (int, error) {
	n, err := r.Attempt.ReadArtifact(ctx, ref, offset, buf)
	arg, _ := json.Marshal(struct {
		Ref    string `json:"ref"`
		Offset int64  `json:"offset"`
	}{ref, offset})
	var resp []byte
	if err == nil || n > 0 {
		resp = fmt.Appendf(nil, `{"bytes":%d}`, n)
	}
	r.record("artifact_read", arg, resp, err)
	return n, err
}

// record keeps one call, up to MaxRecordedHostCalls of them.
func (r *recorder) record(name string, req, resp []byte, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.calls) >= MaxRecordedHostCalls {
		return
	}
	c := HostCall{Name: name, Request: req}
	var he *guest.HostError
	switch {
	case errors.As(err, &he):
		c.Status, c.Message = he.Status, he.Message
	case err != nil:
		c.Status, c.Message = guest.StatusInternal, err.Error()
	default:
		c.Response = recorded(resp)
	}
	if c.Status != 0 {
		c.StatusName = guest.StatusName(c.Status)
	}
	r.calls = append(r.calls, c)
}

// recorded is b as a HostCall records it: b when it is JSON of at most
// MaxRecordedHostCallBytes, else a JSON string of its beginning.
func recorded(b []byte) json.RawMessage {
	if len(b) <= MaxRecordedHostCallBytes && json.Valid(b) {
		return append(json.RawMessage(nil), b...)
	}
	s := string(b[:min(len(b), MaxRecordedHostCallBytes)])
	if len(b) > MaxRecordedHostCallBytes {
		s += fmt.Sprintf("... (%d bytes)", len(b))
	}
	out, _ := json.Marshal(s)
	return out
}
