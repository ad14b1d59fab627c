// Package sdk is the Go SDK for lhengine step plugins.
//
// A plugin is a WASI preview 1 command: the engine writes one JSON request to
// its stdin and reads one JSON result from its stdout (specs/abi.md is the
// contract). Run does that plumbing, so a plugin is a typed function:
//
//	func main() {
//		sdk.Run(func(ctx *sdk.Context, in Input) (Output, error) {
//			ctx.Logf(sdk.LevelInfo, "drafting %q", in.Topic)
//			return Output{Text: "..."}, nil
//		})
//	}
//
// Build it with:
//
//	GOOS=wasip1 GOARCH=wasm go build -o plugin.wasm .
//
// The handler's error decides the result: nil gives {"output": ...}, an error
// made by NeedsRepair gives {"needs_repair": true, "reason": ...}, any other
// error gives {"error": ...}. A panic gives {"error": "panic: ..."}, the stack
// on stderr, and exit status 1.
//
// A handler that keeps nothing from one request to the next may say so:
//
//	sdk.Run(Draft, sdk.Stateless())
//
// The engine may then start the plugin once and serve many attempts of the
// same task from it, each from the image of memory the plugin had once
// started, instead of starting the Go runtime for every attempt (about
// three quarters of a small Go plugin's cost). What a handler leaves in
// globals, caches or goroutines is wiped before the next attempt, so it is
// not a way to keep state either; see Stateless for what changes.
//
// The package uses only the standard library and compiles on every GOOS.
// Off wasip1 the host calls do nothing (Log discards, Heartbeat returns nil,
// capabilities such as Call and PutArtifact return ErrUnavailable), so
// handlers can be unit-tested with a plain &sdk.Context{...} and Serve.
package sdk

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/lhengine/lhengine/plugins/sdk/go/abi"
)

// ABI is the major version of the plugin ABI this SDK speaks (abi.Version).
// Its host functions are imported from the module abi.HostModule,
// "lhengine_v1".
const ABI = abi.Version

// LogMax is the largest message the host accepts in one log call, in bytes.
// Longer messages are truncated by Log.
const LogMax = 4096

// Level is the severity of a log message.
type Level int32

// Log levels, as the ABI numbers them.
const (
	LevelDebug Level = 0
	LevelInfo  Level = 1
	LevelWarn  Level = 2
	LevelError Level = 3
)

// Errno is a status code returned by a host function (always negative).
// Compare with errors.Is against the Err* values.
type Errno int32

// Status codes of host functions (specs/abi.md, "Status codes").
const (
	ErrRange       Errno = -1  // a (ptr, len) outside linear memory
	ErrTooLarge    Errno = -2  // request larger than allowed
	ErrInvalid     Errno = -3  // malformed request
	ErrDenied      Errno = -4  // not allowed by the task's policy
	ErrNotFound    Errno = -5  // the named thing does not exist
	ErrLeaseLost   Errno = -6  // the work unit's lease is lost; stop work
	ErrBudget      Errno = -7  // a budget is spent
	ErrUnavailable Errno = -8  // capability not available
	ErrInternal    Errno = -9  // the host failed; may be retried
	ErrPaused      Errno = -10 // the task is pausing for a human decision; stop work
)

func (e Errno) Error() string {
	switch e {
	case ErrRange:
		return "lhengine: bad pointer or range"
	case ErrTooLarge:
		return "lhengine: request too large"
	case ErrInvalid:
		return "lhengine: invalid request"
	case ErrDenied:
		return "lhengine: not allowed"
	case ErrNotFound:
		return "lhengine: not found"
	case ErrLeaseLost:
		return "lhengine: lease lost"
	case ErrBudget:
		return "lhengine: budget exhausted"
	case ErrUnavailable:
		return "lhengine: capability unavailable"
	case ErrInternal:
		return "lhengine: host failure"
	case ErrPaused:
		return "lhengine: task pausing for a human decision"
	}
	return "lhengine: status " + strconv.Itoa(int(e))
}

// Item is the fan-out item a step runs for.
type Item struct {
	Index int             `json:"index"`
	Key   json.RawMessage `json:"key"`
	Value json.RawMessage `json:"value"`
}

// Repair says why the task came back to this step, when it did.
type Repair struct {
	Count  int    `json:"count"`  // 0 on the first pass
	Reason string `json:"reason"` // the reason given by the step that asked for the repair
}

// Context is the request a handler runs for, with the host's capabilities.
// Its zero value is usable (in tests, say).
type Context struct {
	TaskID   string
	TaskName string
	Step     string
	Item     *Item // nil unless the step fans out
	Attempt  int   // 1 on the first attempt of this step
	Repair   Repair
	// Policy holds the parameters the run's harness policies hand to this
	// step (specs/policies.md); empty when none do.
	Policy Policy
	// Now is the time the attempt was leased, as the ledger recorded it
	// (the request's "now"): the same for every run of the attempt, and
	// where the guest's clock starts, so time.Now() reads it plus a
	// millisecond per reading. Zero when the request has none.
	Now time.Time
	// Environment holds the task's environment facts this unit runs
	// under, by name, as the engine read them just before the attempt
	// (the request's "environment": a commit id for a git_head fact, a
	// sha256 for a file_sha256 fact). Nil when the task declares no
	// environment block.
	Environment map[string]string
	// Objective and Constraints are the task's (the request's "objective"
	// and "constraints"), verbatim: what the task is for and what it must
	// never do, for a step that starts in a fresh model context. Keep
	// them whole: never summarise them away. Empty when the task declares
	// none. The rest of what a fresh context needs is in Handoff.
	Objective   string
	Constraints []string
}

// Log appends msg to the step's log at level. Messages longer than LogMax
// bytes are truncated. Logging never fails a step, so errors are dropped.
func (c *Context) Log(level Level, msg string) {
	if len(msg) > LogMax {
		cut := LogMax
		for cut > 0 && !utf8.RuneStart(msg[cut]) {
			cut--
		}
		msg = msg[:cut]
	}
	hostLog(level, msg)
}

// Logf formats its arguments as fmt.Sprintf does and logs the result.
func (c *Context) Logf(level Level, format string, args ...any) {
	c.Log(level, fmt.Sprintf(format, args...))
}

// Heartbeat renews the lease of the work unit this attempt runs in. Call it
// during long work. It returns ErrLeaseLost when another worker has taken the
// work over: stop then, as the engine is cancelling the attempt and will
// discard its result.
func (c *Context) Heartbeat() error {
	if rc := hostHeartbeat(); rc < 0 {
		return Errno(rc)
	}
	return nil
}

// RepairError is the error NeedsRepair returns.
type RepairError struct{ Reason string }

func (e *RepairError) Error() string { return "needs repair: " + e.Reason }

// NeedsRepair returns an error that, returned by a handler (possibly
// wrapped), asks the engine to repair the task: the step's repair block
// decides which step runs again, and that step sees the reason in its
// Context.Repair.
func NeedsRepair(reason string) error { return &RepairError{Reason: reason} }

// Handler is a step's code: it turns the request's input into the step's
// output.
type Handler[In, Out any] func(ctx *Context, in In) (Out, error)

// Run reads the request from stdin, calls h, writes the result to stdout and
// exits. It does not return. With Stateless it may serve many requests, one
// after another, before it exits.
func Run[In, Out any](h Handler[In, Out], opts ...Option) {
	os.Exit(run(os.Stdin, os.Stdout, os.Stderr, h, opts))
}

func run[In, Out any](stdin io.Reader, stdout, stderr io.Writer, h Handler[In, Out], opts []Option) int {
	one := func() int { return Serve(stdin, stdout, stderr, h) }
	for _, o := range opts {
		if o.untested {
			fmt.Fprintf(stderr, "sdk: Stateless ignored: instance reuse is tested with Go 1.26 only, and this plugin was built with %s; each attempt runs in a fresh instance\n", runtime.Version())
		}
		if o.serve != nil {
			return o.serve(one, warmUp[In, Out])
		}
	}
	return one()
}

// warmUp readies a reused instance before the engine takes the image its
// requests start from. It runs what Serve runs for every request but the
// handler, on a made-up request, so that the image holds what a first
// request fills in (encoding/json's caches of the envelope's, the input's
// and the output's types, and of the dynamic types outputs are often
// built of), which every request would otherwise pay for.
// And it leaves the Go heap with free room (warmHeadroom): a request that
// needs more memory than the image has grows the instance's memory, which
// cannot shrink back, so the engine closes the instance after it. It has
// no effect a request can see, unless the input or output type has JSON
// methods with side effects.
func warmUp[In, Out any]() {
	warmSink = make([]byte, warmHeadroom)
	warmSink = nil
	runtime.GC()

	var env envelope
	_ = json.Unmarshal(warmEnvelope, &env)
	var in In
	_ = json.Unmarshal([]byte("{}"), &in)
	var out Out
	raw, _ := json.Marshal(out)
	// The types handlers build their output from without declaring one:
	// encoding/json derives how to encode a type on its first use, and in
	// a reused instance every request is a first use.
	var dynamic any
	_ = json.Unmarshal(warmDynamic, &dynamic)
	_, _ = json.Marshal(map[string]any{"v": dynamic, "raw": json.RawMessage(`{}`), "item": &Item{}, "repair": Repair{},
		"policy": Policy{}, "strings": []string{}, "map": map[string]string{}, "n": 0, "f": 0.5, "b": true})
	var buf bytes.Buffer
	_ = json.NewEncoder(&buf).Encode(result{Output: raw})
	_ = json.NewEncoder(&buf).Encode(result{Error: "e", NeedsRepair: true, Reason: "r"})
}

// warmHeadroom is the free heap a stateless plugin's image keeps: the Go
// runtime's smallest heap goal, so that a request whose live heap stays
// small never grows the memory (the collector runs instead). It costs the
// instance 4 MiB of memory, so a stateless Go plugin needs a memory limit
// of about 8 MiB or more.
const warmHeadroom = 4 << 20

// warmSink is only written: the store of a package-level variable keeps
// warmUp's allocation from being optimised away.
//
//lint:ignore U1000 written to grow the heap, never read
var warmSink []byte

var warmDynamic = []byte(`{"o":{"a":[1,"s",true,null]}}`)

var warmEnvelope = []byte(`{"abi":1,"task_id":"t","task_name":"n","step":"s","item":{"index":0,"key":"k","value":{}},"attempt":1,"repair":{"count":1,"reason":"r"},"input":{}}`)

// Option changes how Run serves requests.
type Option struct {
	serve func(one func() int, warm func()) int
	// untested: Stateless was asked for on a toolchain its reuse was not
	// tested with, and is ignored (reuseTested).
	untested bool
}

// Stateless declares that the handler keeps no state between requests, so
// the engine may reuse the plugin's instance for further attempts of the
// same task instead of starting a new one for each (specs/abi.md, section
// 2.2). Run then tells the engine, through the host function serve_next,
// once the Go runtime and the package's init functions have run, and
// again after each result.
//
// Every attempt starts from the plugin's memory as it was at that first
// call: globals set, caches filled and goroutines started by one request
// are gone at the next. The clocks, the random bytes of crypto/rand, the
// request, stdout and stderr are the attempt's own, as in a fresh
// instance. What differs: state the Go runtime seeds at start-up from the
// random source (the top-level functions of math/rand and math/rand/v2,
// map iteration order) is that of the start-up, the same for every attempt
// of the task, where a fresh instance has it differ per attempt; draw
// identifiers from crypto/rand. Before its first request a stateless
// plugin has no capabilities (Call and the others return ErrUnavailable);
// its init functions may log.
//
// encoding/json works out how to encode or decode a type the first time it
// meets it, and in a reused instance every attempt meets it for the first
// time again, unless the image already knows it. The SDK warms the
// handler's input and output types and the dynamic ones (any,
// map[string]any, []any, json.RawMessage and the like) before the image
// is taken; a handler that decodes or encodes types of its own beside
// those can warm them in an init function, which runs before it too:
//
//	func init() { _ = json.Unmarshal([]byte("{}"), new(options)) }
//
// Under wazero each type left cold costs an attempt tens of microseconds
// to about 100.
//
// An engine that does not reuse instances (for an attempt with workspace
// mounts, say) runs the plugin as usual: one request on stdin, then exit.
//
// Using Stateless is what makes the module import serve_next: a plugin that
// does not call it is built without the import and is always run fresh.
//
// The contract the reuse rests on: at a host call, linear memory and the
// mutable globals are a Go wasip1 instance's whole state, because the Go
// compiler keeps nothing in Wasm locals across a call. Go does not promise
// that; this SDK has tested it with Go 1.26 only. Built with any other Go
// release, Stateless is ignored (every attempt runs in a fresh instance,
// and the plugin says so in its log once per attempt), until the SDK is
// tested with that release and the build constraint of reuse_tested.go
// admits it.
func Stateless() Option {
	if !reuseTested {
		return Option{untested: true}
	}
	return Option{serve: serveStateless}
}

// serveStateless serves requests until the host stops giving them or a
// request fails the process (a panic, a result that could not be written).
func serveStateless(one func() int, warm func()) int {
	rc := hostServeNext()
	if rc == 1 { // a reused instance: get ready before the first request
		warm()
		rc = hostServeNext()
	}
	if rc != 0 {
		return one() // not served by the engine: the one request on stdin
	}
	for {
		if status := one(); status != 0 {
			return status
		}
		if hostServeNext() != 0 {
			return 0
		}
	}
}

// Serve is Run without the process: it reads the request from stdin, calls
// h, writes the result to stdout, and returns the exit status the plugin
// should end with (0, or 1 after a panic or when the result could not be
// written). Tests of a handler can drive it with in-memory readers and
// writers.
func Serve[In, Out any](stdin io.Reader, stdout, stderr io.Writer, h Handler[In, Out]) (exitStatus int) {
	var env envelope
	req, err := io.ReadAll(stdin)
	if err == nil {
		err = decodeEnvelope(req, &env)
	}
	if err != nil {
		return writeResult(stdout, stderr, result{Error: "sdk: reading the request: " + err.Error()})
	}
	if env.ABI != ABI {
		return writeResult(stdout, stderr, result{Error: fmt.Sprintf("sdk: request is for ABI %d, this plugin speaks ABI %d", env.ABI, ABI)})
	}
	ctx := &Context{
		TaskID:   env.TaskID,
		TaskName: env.TaskName,
		Step:     env.Step,
		Item:     env.Item,
		Attempt:  env.Attempt,
	}
	if env.Repair != nil {
		ctx.Repair = *env.Repair
	}
	ctx.Policy = env.Policy
	ctx.Environment = env.Environment
	ctx.Objective, ctx.Constraints = env.Objective, env.Constraints
	if env.Now != "" {
		if t, err := time.Parse(time.RFC3339Nano, env.Now); err == nil {
			ctx.Now = t
		}
	}
	var in In
	if raw, ok := any(&in).(*json.RawMessage); ok {
		// The envelope's input is valid JSON already (decodeEnvelope),
		// and json.Unmarshal would copy it as it is.
		if len(env.Input) > 0 {
			*raw = env.Input
		}
	} else if len(env.Input) > 0 {
		if err := json.Unmarshal(env.Input, &in); err != nil {
			return writeResult(stdout, stderr, result{Error: "sdk: decoding the input: " + err.Error()})
		}
	}

	out, panicked, err := call(ctx, in, h)
	if panicked != nil {
		fmt.Fprintf(stderr, "panic: %v\n\n%s", panicked.value, panicked.stack)
		writeResult(stdout, stderr, result{Error: fmt.Sprintf("panic: %v", panicked.value)})
		return 1
	}
	var rep *RepairError
	switch {
	case errors.As(err, &rep):
		return writeResult(stdout, stderr, result{NeedsRepair: true, Reason: rep.Reason})
	case err != nil:
		msg := err.Error()
		if msg == "" {
			msg = "error with no message"
		}
		return writeResult(stdout, stderr, result{Error: msg})
	}
	raw, err := json.Marshal(out)
	if err != nil {
		return writeResult(stdout, stderr, result{Error: "sdk: encoding the output: " + err.Error()})
	}
	return writeBytes(stdout, stderr, appendOutput(nil, raw))
}

type panicInfo struct {
	value any
	stack []byte
}

func call[In, Out any](ctx *Context, in In, h Handler[In, Out]) (out Out, p *panicInfo, err error) {
	defer func() {
		if v := recover(); v != nil {
			p = &panicInfo{value: v, stack: debug.Stack()}
		}
	}()
	out, err = h(ctx, in)
	return out, nil, err
}

// envelope is the request as the ABI writes it.
type envelope struct {
	ABI      int             `json:"abi"`
	TaskID   string          `json:"task_id"`
	TaskName string          `json:"task_name"`
	Step     string          `json:"step"`
	Item     *Item           `json:"item"`
	Attempt  int             `json:"attempt"`
	Repair   *Repair         `json:"repair"`
	Input    json.RawMessage `json:"input"`
	Policy   Policy          `json:"policy"`
	Now      string          `json:"now"`
	// Environment: Context.Environment.
	Environment map[string]string `json:"environment"`
	// Objective, Constraints: Context.Objective, Context.Constraints.
	Objective   string   `json:"objective"`
	Constraints []string `json:"constraints"`
}

// result is the answer as the ABI reads it.
type result struct {
	Output      json.RawMessage `json:"output,omitempty"`
	Error       string          `json:"error,omitempty"`
	NeedsRepair bool            `json:"needs_repair,omitempty"`
	Reason      string          `json:"reason,omitempty"`
}

func writeResult(stdout, stderr io.Writer, r result) int {
	if r.Error == "" && !r.NeedsRepair && len(r.Output) == 0 {
		r.Output = json.RawMessage("null")
	}
	var buf bytes.Buffer
	if err := json.NewEncoder(&buf).Encode(r); err != nil {
		fmt.Fprintf(stderr, "sdk: encoding the result: %v\n", err)
		return 1
	}
	return writeBytes(stdout, stderr, buf.Bytes())
}

func writeBytes(stdout, stderr io.Writer, b []byte) int {
	if _, err := stdout.Write(b); err != nil {
		fmt.Fprintf(stderr, "sdk: writing the result: %v\n", err)
		return 1
	}
	return 0
}
