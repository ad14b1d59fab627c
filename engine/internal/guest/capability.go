package guest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

	"github.com/hashicorp/go-hclog"
	"github.com/tetratelabs/wazero/api"
)

// Request size caps of the capability functions (specs/abi.md). A larger
// request is StatusTooLarge.
const (
	CallNameMax     = 64        // bytes of a call's capability name
	CallRequestMax  = 1 << 20   // bytes of a call's JSON request
	ArtifactMetaMax = 4 << 10   // bytes of artifact_put's JSON meta
	ArtifactDataMax = 256 << 20 // bytes of artifact_put's data
	ArtifactRefMax  = 1 << 10   // bytes of artifact_read's ref
	LastErrorMax    = 4 << 10   // bytes of a last_error message; longer ones are cut
)

// Capabilities are the names call accepts.
var Capabilities = []string{"effect.do", "http.fetch", "progress.count", "progress.note", "kv.get", "kv.put", "model.generate", "approval.request", "handoff.get", "notes.list", "notes.compact"}

var capabilitySet = func() map[string]bool {
	m := map[string]bool{}
	for _, c := range Capabilities {
		m[c] = true
	}
	return m
}()

// HostError is an error a Host returns to give the guest a specific
// status and message (read with last_error). Status must be one of the
// negative status codes; anything else is reported as StatusInternal.
type HostError struct {
	Status  int32
	Message string
}

func (e *HostError) Error() string {
	if e.Message == "" {
		return fmt.Sprintf("host status %d", e.Status)
	}
	return e.Message
}

// DefaultLogPassthrough is how many bytes of log messages an attempt passes
// to Host.Log when the Host does not say (LogPassthroughLimiter).
const DefaultLogPassthrough = 1 << 20

// LogPassthroughLimiter is an optional interface of a Host: LogPassthrough
// is the most bytes of log messages of one attempt that Host.Log receives.
// Past it Host.Log receives one warning, "log passthrough suppressed after N
// bytes", and nothing more from the attempt; every message is still kept in
// the attempt's own log (Result.Log), which is bounded apart.
type LogPassthroughLimiter interface {
	LogPassthrough() int64
}

// passLog passes a log message on to the Host within the attempt's log
// passthrough cap.
func (a *attempt) passLog(lvl hclog.Level, msg string) {
	if a == orphan || a.logSent < 0 {
		return
	}
	limit := int64(DefaultLogPassthrough)
	if l, ok := a.host.(LogPassthroughLimiter); ok {
		limit = l.LogPassthrough()
	}
	if a.logSent+int64(len(msg)) > limit {
		notice := fmt.Sprintf("log passthrough suppressed after %d bytes", a.logSent)
		a.logSent = -1
		a.log.line("warn", notice)
		a.host.Log(hclog.Warn, notice)
		return
	}
	a.logSent += int64(len(msg))
	a.host.Log(lvl, msg)
}

// begin starts a host call other than result: the pending result is
// dropped (the ABI keeps one only until the next call) and the call is
// charged to the budget.
func (a *attempt) begin(fn string) int32 {
	a.dropPending()
	return a.chargeFor(fn)
}

func (a *attempt) dropPending() {
	if a != orphan { // shared: never written
		a.pending = nil
	}
}

// chargeFor is charge, recording why a refused call failed.
func (a *attempt) chargeFor(fn string) int32 {
	rc := a.charge()
	if rc != StatusOK {
		a.fail(rc, fn+": host call budget exhausted")
	}
	return rc
}

// fail records msg as the attempt's last error and returns rc.
func (a *attempt) fail(rc int32, msg string) int32 {
	if a == orphan { // shared: never written
		return rc
	}
	if len(msg) > LastErrorMax {
		cut := LastErrorMax
		for cut > 0 && !utf8.RuneStart(msg[cut]) {
			cut--
		}
		msg = msg[:cut]
	}
	if !utf8.ValidString(msg) {
		msg = strings.ToValidUTF8(msg, "\uFFFD")
	}
	a.lastErr = msg
	if rc == StatusBudget {
		a.overBudget = true
	}
	return rc
}

// hostStatus turns an error of the Host into the status and message the
// guest sees.
func (a *attempt) hostStatus(ctx context.Context, fn string, err error) int32 {
	var he *HostError
	if errors.As(err, &he) {
		rc := he.Status
		if rc > StatusRange || rc < StatusPaused {
			rc = StatusInternal
		}
		if rc == StatusLeaseLost && ctx.Err() == nil {
			a.loseLease(err)
		}
		msg := he.Message
		if msg == "" {
			msg = statusNames[rc]
		}
		if rc == StatusBudget || rc == StatusTooLarge {
			// A quota refusal is kept in the attempt's own (bounded) log
			// too, so the attempt's record shows what was refused.
			a.log.line("warn", "host refused "+fn+": "+msg)
		}
		return a.fail(rc, fn+": "+msg)
	}
	// A host failure (the store out of disk space, for one) is kept in
	// the attempt's log too: a plugin that ignores it still leaves a trace.
	a.log.line("warn", "host failed "+fn+": "+err.Error())
	return a.fail(StatusInternal, fn+": "+err.Error())
}

var statusNames = map[int32]string{
	StatusRange: "range", StatusTooLarge: "too large", StatusInvalid: "invalid request",
	StatusDenied: "denied", StatusNotFound: "not found", StatusLeaseLost: "lease lost",
	StatusBudget: "budget exhausted", StatusUnavailable: "unavailable", StatusInternal: "internal error",
	StatusPaused: "paused",
}

// guestBytes is a view of [ptr, ptr+n) of the guest's memory, with the
// status of a failed range check. The view aliases the memory: no copy.
func guestBytes(mem api.Memory, ptr, n uint32) ([]byte, bool) {
	if mem == nil {
		return nil, false
	}
	return mem.Read(ptr, n)
}

// checkOut range-checks an output buffer before the work is done, so that a
// side effect never happens for a guest that cannot receive its result.
func (a *attempt) checkOut(fn string, mem api.Memory, outPtr, outCap uint32) int32 {
	if _, ok := guestBytes(mem, outPtr, outCap); !ok {
		return a.fail(StatusRange, fmt.Sprintf("%s: output buffer [%d, +%d) is outside linear memory", fn, outPtr, outCap))
	}
	return StatusOK
}

// readIn reads an input (ptr, n) of at most max bytes as a view of guest
// memory, recording a failure.
func (a *attempt) readIn(fn, what string, mem api.Memory, ptr, n, max uint32) ([]byte, int32) {
	if n > max {
		return nil, a.fail(StatusTooLarge, fmt.Sprintf("%s: %s of %d bytes is over the limit of %d", fn, what, n, max))
	}
	b, ok := guestBytes(mem, ptr, n)
	if !ok {
		return nil, a.fail(StatusRange, fmt.Sprintf("%s: %s [%d, +%d) is outside linear memory", fn, what, ptr, n))
	}
	return b, StatusOK
}

// respond hands a result to the guest under the output convention: written
// when it fits, otherwise kept as the pending result.
func (a *attempt) respond(fn string, mem api.Memory, outPtr, outCap uint32, out []byte) int32 {
	rc := writeResult(mem, outPtr, outCap, out)
	switch {
	case rc == StatusTooLarge:
		return a.fail(rc, fn+": result over 2 GiB")
	case rc < 0:
		return a.fail(rc, fn+": output buffer is outside linear memory")
	case uint32(rc) > outCap:
		a.pending = out
	}
	return rc
}

// isJSONObject reports whether b is valid UTF-8 holding exactly one JSON
// object.
func isJSONObject(b []byte) bool {
	if !utf8.Valid(b) || !json.Valid(b) {
		return false
	}
	for _, c := range b {
		switch c {
		case ' ', '\t', '\n', '\r':
			continue
		}
		return c == '{'
	}
	return false
}

// hostCall is call(name_ptr, name_len, req_ptr, req_len, out_ptr, out_cap)
// -> i32. Checks, in order: budget, name length (TooLarge) and range, request
// length (TooLarge) and range, output range, name known (Unavailable),
// request a JSON object (Invalid); then the Host's Call.
func hostCall(ctx context.Context, mod api.Module, stack []uint64) {
	stack[0] = api.EncodeI32(callCall(ctx, mod,
		api.DecodeU32(stack[0]), api.DecodeU32(stack[1]), api.DecodeU32(stack[2]),
		api.DecodeU32(stack[3]), api.DecodeU32(stack[4]), api.DecodeU32(stack[5])))
}

func callCall(ctx context.Context, mod api.Module, namePtr, nameLen, reqPtr, reqLen, outPtr, outCap uint32) int32 {
	const fn = "call"
	att, ctx := attemptFrom(ctx)
	if rc := att.begin(fn); rc != StatusOK {
		return rc
	}
	mem := mod.Memory()
	nameB, rc := att.readIn(fn, "name", mem, namePtr, nameLen, CallNameMax)
	if rc != StatusOK {
		return rc
	}
	reqB, rc := att.readIn(fn, "request", mem, reqPtr, reqLen, CallRequestMax)
	if rc != StatusOK {
		return rc
	}
	if rc := att.checkOut(fn, mem, outPtr, outCap); rc != StatusOK {
		return rc
	}
	name := string(nameB)
	if !capabilitySet[name] {
		return att.fail(StatusUnavailable, fmt.Sprintf("call: unknown capability %q (known: %s)", excerptString(name), strings.Join(Capabilities, ", ")))
	}
	if !isJSONObject(reqB) {
		return att.fail(StatusInvalid, "call "+name+": request is not a UTF-8 JSON object")
	}
	// A copy: the host may keep the request past the call.
	req := append([]byte(nil), reqB...)
	resp, err := att.host.Call(ctx, name, req)
	if err != nil {
		return att.hostStatus(ctx, "call "+name, err)
	}
	if len(resp) == 0 {
		resp = []byte("{}")
	}
	return att.respond("call "+name, mem, outPtr, outCap, resp)
}

// hostResult is result(out_ptr, out_cap) -> i32. Checks: budget, a pending
// result (NotFound), output range. The pending result is dropped once it
// has been written.
func hostResult(ctx context.Context, mod api.Module, stack []uint64) {
	stack[0] = api.EncodeI32(resultCall(ctx, mod, api.DecodeU32(stack[0]), api.DecodeU32(stack[1])))
}

func resultCall(ctx context.Context, mod api.Module, outPtr, outCap uint32) int32 {
	const fn = "result"
	att, _ := attemptFrom(ctx)
	if rc := att.chargeFor(fn); rc != StatusOK {
		return rc
	}
	if att.pending == nil {
		return att.fail(StatusNotFound, "result: no pending result")
	}
	rc := writeResult(mod.Memory(), outPtr, outCap, att.pending)
	switch {
	case rc < 0:
		return att.fail(rc, "result: output buffer is outside linear memory")
	case uint32(rc) <= outCap:
		att.pending = nil
	}
	return rc
}

// hostArtifactPut is artifact_put(meta_ptr, meta_len, data_ptr, data_len,
// out_ptr, out_cap) -> i32. Checks: budget, meta length and range, data
// length and range, output range, meta a JSON object with a non-empty
// string "name" (Invalid). The data is handed to the Host as a view of
// guest memory, without a copy.
func hostArtifactPut(ctx context.Context, mod api.Module, stack []uint64) {
	stack[0] = api.EncodeI32(artifactPutCall(ctx, mod,
		api.DecodeU32(stack[0]), api.DecodeU32(stack[1]), api.DecodeU32(stack[2]),
		api.DecodeU32(stack[3]), api.DecodeU32(stack[4]), api.DecodeU32(stack[5])))
}

func artifactPutCall(ctx context.Context, mod api.Module, metaPtr, metaLen, dataPtr, dataLen, outPtr, outCap uint32) int32 {
	const fn = "artifact_put"
	att, ctx := attemptFrom(ctx)
	if rc := att.begin(fn); rc != StatusOK {
		return rc
	}
	mem := mod.Memory()
	metaB, rc := att.readIn(fn, "meta", mem, metaPtr, metaLen, ArtifactMetaMax)
	if rc != StatusOK {
		return rc
	}
	data, rc := att.readIn(fn, "data", mem, dataPtr, dataLen, ArtifactDataMax)
	if rc != StatusOK {
		return rc
	}
	if rc := att.checkOut(fn, mem, outPtr, outCap); rc != StatusOK {
		return rc
	}
	if !isJSONObject(metaB) {
		return att.fail(StatusInvalid, "artifact_put: meta is not a UTF-8 JSON object")
	}
	// Fields are matched exactly (encoding/json would also take "Name").
	var meta map[string]json.RawMessage
	var name string
	if err := json.Unmarshal(metaB, &meta); err != nil || json.Unmarshal(meta["name"], &name) != nil || name == "" {
		return att.fail(StatusInvalid, `artifact_put: meta needs a non-empty string "name"`)
	}
	if mt, ok := meta["media_type"]; ok && isSet(mt) && mt[0] != '"' {
		return att.fail(StatusInvalid, `artifact_put: meta "media_type" must be a string`)
	}
	resp, err := att.host.PutArtifact(ctx, append([]byte(nil), metaB...), data)
	if err != nil {
		return att.hostStatus(ctx, fn, err)
	}
	return att.respond(fn, mem, outPtr, outCap, resp)
}

// hostArtifactRead is artifact_read(ref_ptr, ref_len, offset i64, out_ptr,
// out_cap) -> i32. Checks: budget, ref length and range, offset >= 0
// (Invalid), output range, ref non-empty UTF-8 (Invalid). The Host copies
// straight into guest memory. Returns the bytes written, 0 at the end.
func hostArtifactRead(ctx context.Context, mod api.Module, stack []uint64) {
	stack[0] = api.EncodeI32(artifactReadCall(ctx, mod,
		api.DecodeU32(stack[0]), api.DecodeU32(stack[1]), int64(stack[2]),
		api.DecodeU32(stack[3]), api.DecodeU32(stack[4])))
}

// readChunkMax bounds one artifact_read so that its count fits an i32.
const readChunkMax = 1 << 30

func artifactReadCall(ctx context.Context, mod api.Module, refPtr, refLen uint32, offset int64, outPtr, outCap uint32) int32 {
	const fn = "artifact_read"
	att, ctx := attemptFrom(ctx)
	if rc := att.begin(fn); rc != StatusOK {
		return rc
	}
	mem := mod.Memory()
	refB, rc := att.readIn(fn, "ref", mem, refPtr, refLen, ArtifactRefMax)
	if rc != StatusOK {
		return rc
	}
	if offset < 0 {
		return att.fail(StatusInvalid, fmt.Sprintf("artifact_read: negative offset %d", offset))
	}
	buf, ok := guestBytes(mem, outPtr, outCap)
	if !ok {
		return att.fail(StatusRange, fmt.Sprintf("artifact_read: output buffer [%d, +%d) is outside linear memory", outPtr, outCap))
	}
	if len(refB) == 0 || !utf8.Valid(refB) {
		return att.fail(StatusInvalid, "artifact_read: ref must be non-empty UTF-8")
	}
	ref := string(refB)
	if len(buf) > readChunkMax {
		buf = buf[:readChunkMax]
	}
	n, err := att.host.ReadArtifact(ctx, ref, offset, buf)
	if err != nil && !errors.Is(err, io.EOF) { // io.EOF: n bytes, then the end
		return att.hostStatus(ctx, fn, err)
	}
	if n < 0 || n > len(buf) {
		return att.fail(StatusInternal, fmt.Sprintf("artifact_read: host read %d bytes into a %d-byte buffer", n, len(buf)))
	}
	return int32(n)
}

// hostLastError is last_error(out_ptr, out_cap) -> i32: the message of the
// attempt's most recent failed call, written when it fits; its length, 0
// when no call has failed. The message stays until another call fails, so a
// guest whose buffer was too small asks again; last_error keeps no pending
// result and its own failures are not recorded.
func hostLastError(ctx context.Context, mod api.Module, stack []uint64) {
	stack[0] = api.EncodeI32(lastErrorCall(ctx, mod, api.DecodeU32(stack[0]), api.DecodeU32(stack[1])))
}

func lastErrorCall(ctx context.Context, mod api.Module, outPtr, outCap uint32) int32 {
	att, _ := attemptFrom(ctx)
	att.dropPending()
	if rc := att.charge(); rc != StatusOK {
		return rc
	}
	return writeResult(mod.Memory(), outPtr, outCap, []byte(att.lastErr))
}

func excerptString(s string) string {
	if len(s) > 32 {
		return s[:32] + "..."
	}
	return s
}
