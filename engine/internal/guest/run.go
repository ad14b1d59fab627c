package guest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/hashicorp/go-hclog"
	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/experimental"
	"github.com/tetratelabs/wazero/sys"

	"github.com/lhengine/lhengine/engine/internal/guest/linmem"
	"github.com/lhengine/lhengine/fault"
)

// Plugin is a loaded module, ready to run. It is safe for concurrent use:
// every Run is a fresh instance, or for a stateless plugin an instance
// that only ever served attempts of the same task, put back to its
// post-start image (reuse.go).
type Plugin struct {
	Name   string // file base name, or the name given to LoadBytes
	SHA256 string // lower-case hex
	Size   int    // bytes
	Info   Info

	r        *Runtime
	compiled wazero.CompiledModule
	sec      sections
	cfg      wazero.ModuleConfig // what every attempt starts from; see moduleConfig
	reuse    bool                // stateless and reusable (reuse.go)
	nglob    int                 // globals exported for the image
}

// moduleConfig is the module configuration every attempt of a plugin
// starts from: Run adds the attempt's stdin, stdout, stderr and random
// source. A ModuleConfig's With methods return copies, so sharing it is
// safe.
func moduleConfig(name string) wazero.ModuleConfig {
	return wazero.NewModuleConfig().
		WithName(""). // anonymous: concurrent instances never collide
		WithArgs(name).
		WithStartFunctions("_start")
}

// Request is the request envelope of one attempt. It marshals exactly as
// specs/abi.md writes it.
type Request struct {
	TaskID, TaskName, Step string
	Item                   *Item // nil for steps that do not fan out
	Attempt                int   // 1 for the first attempt
	Repair                 *Repair
	Input                  json.RawMessage // nil => null
	// Policy is the policy parameters of the step (a JSON object,
	// specs/policies.md); nil => {}.
	Policy json.RawMessage
	// Environment is the task's environment facts as read before the
	// attempt, by name (the envelope's "environment"); nil omits it.
	Environment map[string]string
	// Objective and Constraints are the task's, verbatim (the envelope's
	// "objective" and "constraints"; omitted when empty).
	Objective   string
	Constraints []string
	// Now is the time the attempt was claimed, as the ledger recorded it:
	// the envelope's "now", and where the guest's wall clock starts. Zero
	// keeps the fixed clock of 2022-01-01T00:00:00Z and omits "now".
	Now time.Time
}

// Item is the fan-out item a step runs for.
type Item struct {
	Index      int
	Key, Value json.RawMessage // nil => null
}

// Repair says how often, and why, the task came back to this step. The
// envelope omits it while Count is 0.
type Repair struct {
	Count  int    `json:"count"`
	Reason string `json:"reason"`
}

type wireRequest struct {
	ABI      int             `json:"abi"`
	TaskID   string          `json:"task_id"`
	TaskName string          `json:"task_name"`
	Step     string          `json:"step"`
	Item     *wireItem       `json:"item"`
	Attempt  int             `json:"attempt"`
	Repair   *Repair         `json:"repair,omitempty"`
	Input    json.RawMessage `json:"input"`
	Policy   json.RawMessage `json:"policy"`
	Now      string          `json:"now,omitempty"`

	// Environment: Request.Environment.
	Environment map[string]string `json:"environment,omitempty"`
	// Objective, Constraints: Request.Objective, Request.Constraints.
	Objective   string   `json:"objective,omitempty"`
	Constraints []string `json:"constraints,omitempty"`
}

type wireItem struct {
	Index int             `json:"index"`
	Key   json.RawMessage `json:"key"`
	Value json.RawMessage `json:"value"`
}

// MarshalJSON writes the envelope as the ABI specifies.
func (r Request) MarshalJSON() ([]byte, error) {
	w := wireRequest{ABI: ABIVersion, TaskID: r.TaskID, TaskName: r.TaskName, Step: r.Step, Attempt: r.Attempt, Input: r.Input, Policy: r.Policy}
	if len(w.Policy) == 0 {
		w.Policy = json.RawMessage("{}")
	}
	if r.Item != nil {
		w.Item = &wireItem{Index: r.Item.Index, Key: r.Item.Key, Value: r.Item.Value}
	}
	if r.Repair != nil && r.Repair.Count > 0 {
		w.Repair = r.Repair
	}
	w.Environment = r.Environment
	w.Objective, w.Constraints = r.Objective, r.Constraints
	if !r.Now.IsZero() {
		w.Now = r.Now.UTC().Format(time.RFC3339Nano)
	}
	return json.Marshal(w)
}

// Limits bound one attempt. Zero values take the defaults.
type Limits struct {
	Timeout      time.Duration // 0 = no deadline beyond ctx's
	MemoryBytes  uint64        // cap on linear memory; 0 = 64 MiB
	MaxStdout    int           // 0 = 4 MiB; more is fault.OutputTooLarge
	MaxStderr    int           // 0 = 1 MiB; the log is truncated past it, not failed
	MaxHostCalls int           // 0 = unlimited; calls past it return StatusBudget
	// Mounts are the host directories the guest sees through WASI
	// preopens; none gives it no filesystem at all.
	Mounts []Mount
}

// Default limits.
const (
	DefaultMemoryBytes = 64 << 20
	DefaultMaxStdout   = 4 << 20
	DefaultMaxStderr   = 1 << 20
)

func (l Limits) withDefaults() Limits {
	if l.MemoryBytes == 0 {
		l.MemoryBytes = DefaultMemoryBytes
	}
	if l.MaxStdout <= 0 {
		l.MaxStdout = DefaultMaxStdout
	}
	if l.MaxStderr <= 0 {
		l.MaxStderr = DefaultMaxStderr
	}
	return l
}

// Host is what the engine provides to one attempt. Its methods are called
// from the goroutine running the guest, one at a time.
type Host interface {
	// Log receives each message the guest logs (also kept in Result.Log).
	Log(level hclog.Level, msg string)
	// Heartbeat renews the lease of the attempt's work unit. A non-nil
	// error means the lease is lost: the guest is told so and the attempt
	// is cancelled.
	Heartbeat(ctx context.Context) error
	// Call performs a JSON capability (name is one of Capabilities, request
	// a JSON object) and returns its JSON response. A *HostError's Status
	// and Message go to the guest; any other error is StatusInternal with
	// its message. request is the Host's to keep.
	Call(ctx context.Context, name string, request []byte) ([]byte, error)
	// PutArtifact stores data described by meta (a JSON object with a
	// "name") and returns the JSON response {"ref":"sha256:<hex>","size":N}.
	// data is a view of the guest's memory, valid only until PutArtifact
	// returns: the Host must not keep or modify it. meta is the Host's.
	PutArtifact(ctx context.Context, meta, data []byte) ([]byte, error)
	// ReadArtifact copies up to len(buf) bytes of artifact ref from offset
	// into buf and returns how many; 0 at or past the end (io.EOF with
	// the count is accepted as well). An unknown ref
	// is a *HostError with StatusNotFound. buf is a view of the guest's
	// memory, valid only until ReadArtifact returns.
	ReadArtifact(ctx context.Context, ref string, offset int64, buf []byte) (int, error)
}

type nopHost struct{}

func (nopHost) Log(hclog.Level, string)         {}
func (nopHost) Heartbeat(context.Context) error { return nil }
func (nopHost) Call(context.Context, string, []byte) ([]byte, error) {
	return nil, errNoHost
}
func (nopHost) PutArtifact(context.Context, []byte, []byte) ([]byte, error) {
	return nil, errNoHost
}
func (nopHost) ReadArtifact(context.Context, string, int64, []byte) (int, error) {
	return 0, errNoHost
}

var errNoHost = &HostError{Status: StatusUnavailable, Message: "not available: the attempt has no host"}

// Result is what a successful attempt produced.
type Result struct {
	Output       json.RawMessage // compact JSON; "null" when the plugin gave none
	NeedsRepair  bool
	RepairReason string
	Log          []byte        // stderr and log-call lines, bounded by Limits.MaxStderr
	Duration     time.Duration // instantiation to exit
	HostCalls    int           // lhengine_v1 calls made
	MemoryBytes  uint64        // largest size of linear memory
}

// attempt is the state of one Run that host functions reach through the
// context.
type attempt struct {
	host     Host
	log      *logBuffer
	calls    int
	maxCalls int // 0 = unlimited, < 0 = none allowed
	cancel   context.CancelCauseFunc
	leaseErr error
	rand     fakeRand // the guest's random_get
	pending  []byte   // the pending result, nil if none
	lastErr  string   // the message of the most recent failed call
	logSent  int64    // bytes of log messages passed to Host.Log; -1 once suppressed (passLog)

	overBudget bool   // a call was refused for a budget (StatusBudget)
	fsErrno    uint64 // the WASI errno of a write a mount's guard refused in the call under way; 0 for none
	serveCalls int    // serve_next calls in a fresh instance

	// In a reused instance (reuse.go): the attempt's context, request,
	// stdout, whether the instance has switched to it, and the base of its
	// wall clock (wallBase).
	ctx      context.Context
	env      []byte
	stdout   *stdoutBuffer
	served   bool
	wallBase int64
}

var (
	errStepTimeout    = errors.New("step timeout")
	errOutputTooLarge = errors.New("stdout limit reached")
)

// Run runs one attempt of the plugin in a fresh instance (for a stateless
// plugin, possibly an instance reset to its image: reuse.go): req is its stdin,
// its stdout is the result, host serves its lhengine_v1 calls (nil serves
// logs to nothing, heartbeats as always held and capabilities as
// StatusUnavailable), lim.Mounts are its filesystem.
//
// The returned *Result is never nil: when the attempt fails it still
// carries the Log, Duration and counters, alongside the error. Failures of
// the attempt are *fault.StepError of kind
//
//   - Timeout: it ran past lim.Timeout;
//   - Memory: it tried to grow memory past lim.MemoryBytes and then failed
//     (trapped, exited non-zero or wrote no result), or declares more
//     initial memory than that;
//   - OutputTooLarge: it wrote more than lim.MaxStdout to stdout;
//   - Trap: it trapped;
//   - PluginError: it exited non-zero (the message has the end of its
//     stderr) or answered {"error": ...};
//   - BadResult: stdout was not exactly one JSON result object;
//   - Input: req could not be encoded (its Input is not JSON), or a mount
//     of lim.Mounts is unusable.
//
// When ctx is cancelled or its own deadline passes, the guest is stopped
// and the error has kind Internal and wraps ctx's error (errors.Is(err,
// context.Canceled) holds); the attempt says nothing about the plugin. When
// host.Heartbeat reports the lease lost, the guest is stopped and the error
// has kind Internal and wraps the error Heartbeat returned.
//
// Run never panics on anything the guest does.
func (p *Plugin) Run(ctx context.Context, req Request, lim Limits, host Host) (*Result, error) {
	lim = lim.withDefaults()
	if host == nil {
		host = nopHost{}
	}
	res := &Result{}
	env, err := json.Marshal(req)
	if err != nil {
		return res, fault.Wrap(fault.Input, err, "encoding the request envelope: "+err.Error())
	}
	if minBytes := uint64(p.sec.memMin) << 16; minBytes > lim.MemoryBytes {
		return res, fault.New(fault.Memory, "plugin %s declares %s of initial memory, over its limit of %s",
			p.Name, byteSize(minBytes), byteSize(lim.MemoryBytes))
	}
	if err := ctx.Err(); err != nil {
		return res, fault.Wrap(fault.Internal, err, "attempt not started: "+err.Error())
	}
	p.r.mu.Lock()
	closed := p.r.closed
	p.r.mu.Unlock()
	if closed {
		return res, fault.New(fault.Internal, "running %s: runtime is closed", p.Name)
	}
	if p.reusable(lim) {
		return p.runReused(ctx, req, env, lim, host)
	}
	return p.runFresh(ctx, req, env, lim, host)
}

// runFresh is Run in a fresh instance.
func (p *Plugin) runFresh(ctx context.Context, req Request, env []byte, lim Limits, host Host) (*Result, error) {
	res := &Result{}
	runCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	if lim.Timeout > 0 {
		var stop context.CancelFunc
		runCtx, stop = context.WithTimeoutCause(runCtx, lim.Timeout, errStepTimeout)
		defer stop()
	}
	att := &attempt{host: host, log: newLogBuffer(lim.MaxStderr), maxCalls: lim.MaxHostCalls, cancel: cancel, rand: fakeRand{seed: Seed(req)}}
	mem := linmem.New(lim.MemoryBytes)
	// The memory goes back to the pool only once the instance is closed
	// (or never made): nothing runs on it then.
	defer mem.Done()
	stdout := &stdoutBuffer{max: lim.MaxStdout, overflow: func() { cancel(errOutputTooLarge) }}
	runCtx = experimental.WithMemoryAllocator(runCtx, mem)
	// Last, so host calls find it first.
	runCtx = context.WithValue(runCtx, attemptKey{}, att)

	fsCfg, err := mountConfig(lim.Mounts, att.refusedWrite)
	if err != nil {
		return res, fault.Wrap(fault.Input, err, "plugin "+p.Name+": "+err.Error())
	}
	cfg := p.cfg
	if fsCfg != nil {
		cfg = cfg.WithFSConfig(fsCfg)
	}
	cfg = cfg.
		WithStdin(bytes.NewReader(env)).
		WithStdout(stdout).
		WithStderr(att.log).
		WithRandSource(&att.rand)
	clock := guestClock{base: wallBase(req.Now)}
	cfg = cfg.
		WithWalltime(clock.walltime, sys.ClockResolution(time.Microsecond)).
		WithNanotime(clock.nanotime, sys.ClockResolution(1))

	start := time.Now()
	mod, err := p.r.rt.InstantiateModule(runCtx, p.compiled, cfg)
	res.Duration = time.Since(start)
	if mod != nil {
		mod.Close(context.WithoutCancel(ctx))
	}
	res.Log = att.log.Bytes()
	res.HostCalls = att.calls
	res.MemoryBytes = mem.Peak()

	if err := p.classify(ctx, runCtx, err, lim, att, mem, stdout, res); err != nil {
		return res, err
	}
	return res, nil
}

// classify turns how the instance ended into a fault, or fills res from
// its stdout. The order matters: a stopped instance is explained by why it
// was stopped before anything else.
func (p *Plugin) classify(ctx, runCtx context.Context, err error, lim Limits, att *attempt, mem *linmem.Cap, stdout *stdoutBuffer, res *Result) error {
	name := p.Name
	if att.leaseErr != nil {
		return fault.Wrap(fault.Internal, att.leaseErr, "plugin "+name+" stopped: lease lost: "+att.leaseErr.Error())
	}
	if stdout.over {
		return fault.Wrap(fault.OutputTooLarge, err, fmt.Sprintf("plugin %s wrote more than %s to stdout", name, byteSize(uint64(lim.MaxStdout))))
	}
	if err != nil && runCtx.Err() != nil {
		switch cause := context.Cause(runCtx); {
		case errors.Is(cause, errStepTimeout) && ctx.Err() == nil:
			return fault.Wrap(fault.Timeout, err, fmt.Sprintf("plugin %s ran past its step timeout of %s", name, lim.Timeout))
		default:
			cerr := ctx.Err()
			if cerr == nil {
				cerr = runCtx.Err()
			}
			return fault.Wrap(fault.Internal, cerr, "plugin "+name+" stopped: "+cerr.Error())
		}
	}
	memMsg := func() string {
		return fmt.Sprintf("plugin %s ran out of memory: growing to %s refused, limit %s", name, byteSize(mem.RefusedSize()), byteSize(lim.MemoryBytes))
	}
	if err != nil {
		if mem.Hit() {
			return fault.Wrap(fault.Memory, err, memMsg()+stderrSuffix(att))
		}
		var exit *sys.ExitError
		if errors.As(err, &exit) {
			// A plugin may say why before exiting (the Go SDK does after a
			// panic): its {"error": ...} leads the message when present.
			msg := fmt.Sprintf("plugin %s exited with code %d", name, exit.ExitCode())
			if _, perr := parseResult(stdout.buf.Bytes()); perr != nil && perr.Kind == fault.PluginError {
				msg += ": " + perr.Message + stderrSuffix(att)
			} else if tail := att.log.stderrTail(); tail != "" {
				msg += ": " + tail
			} else {
				msg += " (stderr empty)"
			}
			return fault.Wrap(fault.PluginError, err, msg)
		}
		return fault.Wrap(fault.Trap, err, fmt.Sprintf("plugin %s trapped: %s", name, trapMessage(err))+stderrSuffix(att))
	}

	out, serr := parseResult(stdout.buf.Bytes())
	if serr != nil {
		if serr.Kind == fault.BadResult && mem.Hit() {
			return fault.Wrap(fault.Memory, serr, memMsg()+stderrSuffix(att))
		}
		serr.Message = "plugin " + name + ": " + serr.Message
		return serr
	}
	res.Output, res.NeedsRepair, res.RepairReason = out.output, out.needsRepair, out.reason
	return nil
}

// trapMessage is the one-line gist of a wazero trap: "wasm error:
// unreachable (in main)", from the error and the first frame of its stack
// trace.
func trapMessage(err error) string {
	text := err.Error()
	line := firstLine(text)
	if i := strings.Index(line, "wasm error:"); i >= 0 {
		line = line[i:]
	}
	if _, trace, ok := strings.Cut(text, "wasm stack trace:\n"); ok {
		frame := strings.TrimSpace(firstLine(trace))
		if i := strings.IndexByte(frame, '('); i > 0 {
			frame = frame[:i]
		}
		if frame = strings.TrimPrefix(frame, "."); frame != "" {
			line += " (in " + frame + ")"
		}
	}
	return line
}

func stderrSuffix(att *attempt) string {
	if tail := att.log.stderrTail(); tail != "" {
		return "; stderr: " + tail
	}
	return ""
}

type parsedResult struct {
	output      json.RawMessage
	needsRepair bool
	reason      string
}

// parseResult reads stdout as the ABI's one result object. A PluginError
// is the plugin's own {"error": ...}; anything malformed is BadResult.
func parseResult(stdout []byte) (parsedResult, *fault.StepError) {
	var out parsedResult
	trimmed := bytes.TrimSpace(stdout)
	if len(trimmed) == 0 {
		return out, fault.New(fault.BadResult, "wrote nothing to stdout; want one JSON object")
	}
	if !utf8.Valid(trimmed) {
		return out, fault.New(fault.BadResult, "stdout is not valid UTF-8")
	}
	if trimmed[0] != '{' {
		return out, fault.New(fault.BadResult, "stdout is not a JSON object: %s", excerpt(trimmed))
	}
	var w struct {
		Output      json.RawMessage `json:"output"`
		Error       json.RawMessage `json:"error"`
		NeedsRepair json.RawMessage `json:"needs_repair"`
		Reason      json.RawMessage `json:"reason"`
	}
	dec := json.NewDecoder(bytes.NewReader(trimmed))
	if err := dec.Decode(&w); err != nil {
		return out, fault.Wrap(fault.BadResult, err, "stdout is not one JSON object: "+err.Error())
	}
	if rest := trimmed[dec.InputOffset():]; len(bytes.TrimSpace(rest)) > 0 {
		return out, fault.New(fault.BadResult, "stdout has more after the result object: %s", excerpt(rest))
	}
	if isSet(w.Error) {
		var msg string
		if err := json.Unmarshal(w.Error, &msg); err != nil {
			return out, fault.New(fault.BadResult, `"error" must be a string, got %s`, excerpt(w.Error))
		}
		if msg = oneLine(msg); msg == "" {
			msg = "(no message)"
		}
		return out, fault.New(fault.PluginError, "%s", msg)
	}
	if isSet(w.NeedsRepair) {
		if err := json.Unmarshal(w.NeedsRepair, &out.needsRepair); err != nil {
			return out, fault.New(fault.BadResult, `"needs_repair" must be a boolean, got %s`, excerpt(w.NeedsRepair))
		}
		if out.needsRepair {
			if isSet(w.Reason) {
				if err := json.Unmarshal(w.Reason, &out.reason); err != nil {
					return out, fault.New(fault.BadResult, `"reason" must be a string, got %s`, excerpt(w.Reason))
				}
			}
			return out, nil
		}
	}
	out.output = json.RawMessage("null")
	if len(w.Output) > 0 {
		var buf bytes.Buffer
		if err := json.Compact(&buf, w.Output); err != nil { // cannot fail: Decode checked it
			return out, fault.Wrap(fault.BadResult, err, "output: "+err.Error())
		}
		out.output = buf.Bytes()
	}
	return out, nil
}

func isSet(raw json.RawMessage) bool { return len(raw) > 0 && string(raw) != "null" }

// excerpt quotes the start of b for a message.
func excerpt(b []byte) string {
	const max = 60
	if len(b) > max {
		return fmt.Sprintf("%q...", b[:max])
	}
	return fmt.Sprintf("%q", b)
}

// oneLine folds s onto one line of at most 1 KiB.
func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 1024 {
		cut := 1024
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut] + "..."
	}
	return s
}

func byteSize(n uint64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}
