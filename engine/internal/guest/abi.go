package guest

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/hashicorp/go-hclog"
	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"

	"github.com/lhengine/lhengine/fault"
	"github.com/lhengine/lhengine/plugins/sdk/go/abi"
)

// ABIVersion is the major version of the plugin ABI this engine speaks,
// defined once in the SDK's leaf package abi (which the SDK also imports).
const ABIVersion = abi.Version

// HostModule is the name of the module the host functions of ABI v1 are
// imported from (abi.HostModule). The name carries the major version, so a
// module built for another major version fails to load instead of
// misbehaving.
const HostModule = abi.HostModule

// wasiModule is the name of the WASI preview 1 host module.
const wasiModule = wasi_snapshot_preview1.ModuleName

// Status codes returned by host functions (specs/abi.md, "Status codes").
// A host function returns a value >= 0 on success and one of these on
// failure. They are part of the ABI: append only.
const (
	StatusOK          int32 = 0
	StatusRange       int32 = -1  // a (ptr, len) is outside the guest's linear memory
	StatusTooLarge    int32 = -2  // the request is larger than the function accepts
	StatusInvalid     int32 = -3  // malformed request: bad JSON or UTF-8, out-of-range argument
	StatusDenied      int32 = -4  // not allowed by the task's policy
	StatusNotFound    int32 = -5  // the named thing does not exist
	StatusLeaseLost   int32 = -6  // the work unit's lease is lost; the attempt is being cancelled
	StatusBudget      int32 = -7  // a budget (host calls, cost) is exhausted
	StatusUnavailable int32 = -8  // the capability is not available to this attempt
	StatusInternal    int32 = -9  // the host failed; the call may succeed if retried
	StatusPaused      int32 = -10 // the task is pausing for a human decision; the attempt will be stopped
)

// LogMax is the largest message one log call accepts, in bytes.
const LogMax = 4096

var abiModuleRe = regexp.MustCompile(`^lhengine_v([0-9]+)$`)

const (
	i32 = api.ValueTypeI32
	i64 = api.ValueTypeI64
)

// hostFunc is one function of the lhengine_v1 module.
type hostFunc struct {
	name    string
	params  []api.ValueType
	names   []string
	results []api.ValueType
	fn      api.GoModuleFunc
}

// hostFuncs are the functions of lhengine_v1, in the order specs/abi.md
// lists them.
var hostFuncs = []hostFunc{
	{name: "version", results: []api.ValueType{i32}, fn: hostVersion},
	{name: "log", params: []api.ValueType{i32, i32, i32}, names: []string{"level", "ptr", "len"}, results: []api.ValueType{i32}, fn: hostLog},
	{name: "heartbeat", results: []api.ValueType{i32}, fn: hostHeartbeat},
	{name: "result", params: []api.ValueType{i32, i32}, names: []string{"out_ptr", "out_cap"}, results: []api.ValueType{i32}, fn: hostResult},
	{name: "call", params: []api.ValueType{i32, i32, i32, i32, i32, i32},
		names: []string{"name_ptr", "name_len", "req_ptr", "req_len", "out_ptr", "out_cap"}, results: []api.ValueType{i32}, fn: hostCall},
	{name: "artifact_put", params: []api.ValueType{i32, i32, i32, i32, i32, i32},
		names: []string{"meta_ptr", "meta_len", "data_ptr", "data_len", "out_ptr", "out_cap"}, results: []api.ValueType{i32}, fn: hostArtifactPut},
	{name: "artifact_read", params: []api.ValueType{i32, i32, i64, i32, i32},
		names: []string{"ref_ptr", "ref_len", "offset", "out_ptr", "out_cap"}, results: []api.ValueType{i32}, fn: hostArtifactRead},
	{name: "last_error", params: []api.ValueType{i32, i32}, names: []string{"out_ptr", "out_cap"}, results: []api.ValueType{i32}, fn: hostLastError},
	{name: serveNextName, results: []api.ValueType{i32}, fn: hostServeNext},
}

// instantiateHostModules adds wasi_snapshot_preview1 and lhengine_v1 to rt.
func instantiateHostModules(ctx context.Context, rt wazero.Runtime) error {
	if err := instantiateWASI(ctx, rt); err != nil {
		return err
	}
	b := rt.NewHostModuleBuilder(HostModule)
	for _, f := range hostFuncs {
		fb := b.NewFunctionBuilder().WithGoModuleFunction(f.fn, f.params, f.results)
		if f.names != nil {
			fb = fb.WithParameterNames(f.names...)
		}
		fb.Export(f.name)
	}
	_, err := b.Instantiate(ctx)
	return err
}

// signature is a function type.
type signature struct{ params, results []api.ValueType }

func (s signature) equal(o signature) bool {
	return slices.Equal(s.params, o.params) && slices.Equal(s.results, o.results)
}

// provided lists the functions the host modules of rt export, by module and
// name.
func provided(rt wazero.Runtime) map[string]map[string]signature {
	out := map[string]map[string]signature{}
	for _, name := range []string{wasiModule, HostModule} {
		fns := map[string]signature{}
		for n, d := range rt.Module(name).ExportedFunctionDefinitions() {
			fns[n] = signature{params: d.ParamTypes(), results: d.ResultTypes()}
		}
		out[name] = fns
	}
	return out
}

// checkABI reports whether a module with these imports and exports can run
// under this engine: a *fault.StepError of kind ABIMismatch for an import the
// host does not provide, BadModule for a module that is not a WASI command.
func checkABI(imports []importEntry, funcs []api.FunctionDefinition, exports map[string]api.FunctionDefinition, have map[string]map[string]signature) error {
	for _, im := range imports {
		if m := abiModuleRe.FindStringSubmatch(im.module); m != nil && m[1] != strconv.Itoa(ABIVersion) {
			return fault.New(fault.ABIMismatch,
				"module imports %s.%s: it was built for plugin ABI v%s, this engine speaks ABI v%d",
				im.module, im.name, m[1], ABIVersion)
		}
		if _, ok := have[im.module]; !ok {
			return fault.New(fault.ABIMismatch,
				"module imports %s.%s: a plugin may import only from %s and %s",
				im.module, im.name, wasiModule, HostModule)
		}
		if im.kind != externFunc {
			return fault.New(fault.ABIMismatch,
				"module imports %s %s.%s: the host provides only functions", im.kind, im.module, im.name)
		}
	}
	for _, f := range funcs {
		mod, name, _ := f.Import()
		want, ok := have[mod][name]
		if !ok {
			return fault.New(fault.ABIMismatch,
				"module imports %s.%s, which this engine does not provide (ABI v%d)", mod, name, ABIVersion)
		}
		got := signature{params: f.ParamTypes(), results: f.ResultTypes()}
		if !got.equal(want) {
			return fault.New(fault.ABIMismatch,
				"module imports %s.%s as %s, the host provides %s", mod, name, sigString(got), sigString(want))
		}
	}
	start, ok := exports["_start"]
	if !ok {
		if _, reactor := exports["_initialize"]; reactor {
			return fault.New(fault.BadModule, "module is a WASI reactor (exports _initialize); a plugin must be a command exporting _start")
		}
		return fault.New(fault.BadModule, "module does not export _start; a plugin must be a WASI command")
	}
	if len(start.ParamTypes()) != 0 || len(start.ResultTypes()) != 0 {
		return fault.New(fault.BadModule, "module exports _start as %s; it must take and return nothing",
			sigString(signature{params: start.ParamTypes(), results: start.ResultTypes()}))
	}
	return nil
}

func sigString(s signature) string {
	names := func(ts []api.ValueType) string {
		var out []string
		for _, t := range ts {
			out = append(out, api.ValueTypeName(t))
		}
		return "(" + strings.Join(out, ", ") + ")"
	}
	return names(s.params) + " -> " + names(s.results)
}

// --- host functions ---
//
// Every host function finds its attempt in the context, charges the
// attempt's host-call budget, checks its arguments and never panics: a bad
// argument is a negative status, not a trap.

func hostVersion(ctx context.Context, _ api.Module, stack []uint64) {
	att, _ := attemptFrom(ctx)
	if rc := att.begin("version"); rc != StatusOK {
		stack[0] = api.EncodeI32(rc)
		return
	}
	stack[0] = api.EncodeI32(ABIVersion)
}

// hostLog is log(level i32, ptr i32, len i32) -> i32. Arguments are checked
// in this order: level (StatusInvalid), len (StatusTooLarge), range
// (StatusRange). Invalid UTF-8 is replaced, not refused: a log line is worth
// keeping even when mangled.
func hostLog(ctx context.Context, mod api.Module, stack []uint64) {
	stack[0] = api.EncodeI32(logCall(ctx, mod, api.DecodeI32(stack[0]), api.DecodeU32(stack[1]), api.DecodeU32(stack[2])))
}

func logCall(ctx context.Context, mod api.Module, level int32, ptr, n uint32) int32 {
	att, _ := attemptFrom(ctx)
	if rc := att.begin("log"); rc != StatusOK {
		return rc
	}
	lvl, ok := logLevels[level]
	if !ok {
		return att.fail(StatusInvalid, fmt.Sprintf("log: level %d is not 0..3", level))
	}
	b, rc := att.readIn("log", "message", mod.Memory(), ptr, n, LogMax)
	if rc != StatusOK {
		return rc
	}
	msg := string(b) // copy: the guest may reuse the memory
	if !utf8.ValidString(msg) {
		msg = strings.ToValidUTF8(msg, "\uFFFD")
	}
	att.log.line(lvl.String(), msg)
	att.passLog(lvl, msg)
	return StatusOK
}

var logLevels = map[int32]hclog.Level{0: hclog.Debug, 1: hclog.Info, 2: hclog.Warn, 3: hclog.Error}

// hostHeartbeat is heartbeat() -> i32. When the host reports the lease lost
// it returns StatusLeaseLost and cancels the attempt.
func hostHeartbeat(ctx context.Context, _ api.Module, stack []uint64) {
	att, ctx := attemptFrom(ctx)
	if rc := att.begin("heartbeat"); rc != StatusOK {
		stack[0] = api.EncodeI32(rc)
		return
	}
	if err := att.host.Heartbeat(ctx); err != nil {
		if ctx.Err() != nil {
			// The attempt is being stopped (timeout, cancellation) and the
			// host gave up with it: that says nothing about the lease.
			stack[0] = api.EncodeI32(att.fail(StatusInternal, "heartbeat: "+err.Error()))
			return
		}
		att.loseLease(err)
		stack[0] = api.EncodeI32(att.fail(StatusLeaseLost, "heartbeat: lease lost: "+err.Error()))
		return
	}
	stack[0] = api.EncodeI32(StatusOK)
}

// writeResult is how a host function hands bytes back to the guest under
// the ABI's output convention: out is written to [outPtr, outPtr+len(out))
// when it fits in outCap bytes, and the return value is len(out) either way,
// so a guest seeing a value > outCap knows nothing was written and how much
// room to make. A destination outside memory is StatusRange.
func writeResult(mem api.Memory, outPtr, outCap uint32, out []byte) int32 {
	if len(out) > int(^uint32(0)>>1) {
		return StatusTooLarge
	}
	n := uint32(len(out))
	if n > outCap {
		return int32(n)
	}
	if mem == nil || !mem.Write(outPtr, out) {
		return StatusRange
	}
	return int32(n)
}

// readRequest reads a guest's (ptr, len) request of at most max bytes.
func readRequest(mem api.Memory, ptr, n, max uint32) ([]byte, int32) {
	if n > max {
		return nil, StatusTooLarge
	}
	if mem == nil {
		return nil, StatusRange
	}
	b, ok := mem.Read(ptr, n)
	if !ok {
		return nil, StatusRange
	}
	return append([]byte(nil), b...), StatusOK
}

// attemptKey is the context key of the *attempt a host call belongs to.
type attemptKey struct{}

// attemptFrom returns the attempt of ctx and the context its Host calls
// take: the attempt's own in a reused instance (whose ctx is the
// instance's), ctx otherwise. A call from outside Run (which cannot happen
// through Run) gets an attempt whose budget is spent.
func attemptFrom(ctx context.Context) (*attempt, context.Context) {
	switch v := ctx.Value(attemptKey{}).(type) {
	case *attempt:
		return v, ctx
	case *instance:
		if a := v.cur; a.ctx != nil {
			return a, a.ctx
		}
		return v.cur, ctx
	}
	return orphan, ctx
}

var orphan = &attempt{maxCalls: -1, host: nopHost{}, log: newLogBuffer(0)}

// charge counts one host call against the attempt's budget.
func (a *attempt) charge() int32 {
	if a.maxCalls < 0 || (a.maxCalls > 0 && a.calls >= a.maxCalls) {
		return StatusBudget
	}
	a.calls++
	return StatusOK
}

func (a *attempt) loseLease(err error) {
	if a.leaseErr == nil {
		a.leaseErr = err
	}
	if a.cancel != nil {
		a.cancel(&leaseLostError{err: err})
	}
}

type leaseLostError struct{ err error }

func (e *leaseLostError) Error() string { return fmt.Sprintf("lease lost: %v", e.err) }
func (e *leaseLostError) Unwrap() error { return e.err }
