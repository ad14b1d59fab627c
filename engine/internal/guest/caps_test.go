package guest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/tetratelabs/wazero/api"

	"github.com/lhengine/lhengine/fault"
	"github.com/lhengine/lhengine/internal/testwasm"
)

// normJSON is b re-encoded with sorted keys, for comparing requests written
// by different guests.
func normJSON(b []byte) string {
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return "!" + string(b)
	}
	out, _ := json.Marshal(v)
	return string(out)
}

// bigBody is the body of http.fetch of a URL ending in /big.
const bigBody = 100_000

func (h *testHost) Call(_ context.Context, name string, request []byte) ([]byte, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.calls = append(h.calls, name+" "+normJSON(request))
	var req struct {
		Key   string          `json:"key"`
		Value json.RawMessage `json:"value"`
		URL   string          `json:"url"`
	}
	if err := json.Unmarshal(request, &req); err != nil {
		return nil, &HostError{Status: StatusInvalid, Message: err.Error()}
	}
	switch name {
	case "kv.get":
		if v, ok := h.kv[req.Key]; ok {
			return json.Marshal(map[string]any{"found": true, "value": v})
		}
		return []byte(`{"found":false}`), nil
	case "kv.put":
		if req.Key == "denied" {
			return nil, &HostError{Status: StatusDenied, Message: `kv key "denied" is read-only`}
		}
		if h.kv == nil {
			h.kv = map[string]json.RawMessage{}
		}
		h.kv[req.Key] = req.Value
		return []byte(`{}`), nil
	case "http.fetch":
		body := "ok"
		if strings.HasSuffix(req.URL, "/big") {
			body = strings.Repeat("a", bigBody)
		}
		return json.Marshal(map[string]any{"status": 200, "headers": map[string]string{"Content-Type": "text/plain"}, "body": body, "url": req.URL})
	case "effect.do":
		if h.effects == nil {
			h.effects = map[string]bool{}
		}
		replayed := h.effects[req.Key]
		h.effects[req.Key] = true
		return json.Marshal(map[string]any{"result": map[string]any{"status": 200, "headers": map[string]string{}, "body": "sent"}, "replayed": replayed})
	case "progress.count", "progress.note":
		return nil, nil // the engine answers {}
	}
	return nil, fmt.Errorf("fake host: no %s", name)
}

func (h *testHost) PutArtifact(_ context.Context, meta, data []byte) ([]byte, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	sum := sha256.Sum256(data)
	ref := "sha256:" + hex.EncodeToString(sum[:])
	h.calls = append(h.calls, fmt.Sprintf("artifact_put %s %d", normJSON(meta), len(data)))
	if h.artifacts == nil {
		h.artifacts = map[string][]byte{}
	}
	h.artifacts[ref] = append([]byte(nil), data...)
	return json.Marshal(map[string]any{"ref": ref, "size": len(data)})
}

func (h *testHost) ReadArtifact(_ context.Context, ref string, offset int64, buf []byte) (int, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.reads++
	data, ok := h.artifacts[ref]
	if !ok {
		return 0, &HostError{Status: StatusNotFound, Message: fmt.Sprintf("unknown artifact %q", ref)}
	}
	if offset >= int64(len(data)) {
		return 0, nil
	}
	return copy(buf, data[offset:]), nil
}

// TestCapsConformance runs the capability modes against the Go guest (with
// the SDK), the C guest (with lhengine.h), the Rust guest (with the Rust
// SDK) and the AssemblyScript guest (with its SDK): all must make the same
// host calls and give the same output, status codes and messages included.
func TestCapsConformance(t *testing.T) {
	t.Parallel()
	r := sharedRuntime(t)
	artData := make([]byte, 2<<20)
	for i := range artData {
		artData[i] = byte(uint32(i)*31 + uint32(i)>>11)
	}
	sum := sha256.Sum256(artData)
	artRef := "sha256:" + hex.EncodeToString(sum[:])
	unknownCap := `call: unknown capability "mail.send" (known: effect.do, http.fetch, progress.count, progress.note, kv.get, kv.put, model.generate, approval.request, handoff.get, notes.list, notes.compact)`
	cases := []struct {
		mode  string
		want  string
		calls []string
		reads bool
	}{
		{
			mode: "kv",
			want: `{"found":true,"value":{"page":3},"missing":false}`,
			calls: []string{`kv.put {"key":"cursor","value":{"page":3}}`, `kv.get {"key":"cursor"}`,
				`kv.get {"key":"missing"}`},
		},
		{
			mode:  "big",
			want:  fmt.Sprintf(`{"status":200,"body_len":%d,"again":%d}`, bigBody, StatusNotFound),
			calls: []string{`http.fetch {"headers":{},"method":"GET","url":"http://example.test/big"}`},
		},
		{
			mode: "artifact",
			want: fmt.Sprintf(`{"ref":%q,"size":%d,"same":true,"unknown":[-5,"artifact_read: unknown artifact \"sha256:0000\""]}`,
				artRef, len(artData)),
			calls: []string{`artifact_put {"media_type":"application/octet-stream","name":"data.bin"} 2097152`},
			reads: true,
		},
		{
			mode: "refused",
			want: fmt.Sprintf(`{"unknown":[-8,%q],"invalid":[-3,"call kv.get: request is not a UTF-8 JSON object"],`+
				`"denied":[-4,"call kv.put: kv key \"denied\" is read-only"],"ok":true,`+
				`"after_ok":"call kv.put: kv key \"denied\" is read-only"}`, unknownCap),
			calls: []string{`kv.put {"key":"denied","value":1}`, `kv.get {"key":"x"}`},
		},
		{
			mode: "effect",
			want: `{"status":200,"body":"sent","replayed":[false,true],"progress":true}`,
			calls: []string{
				`effect.do {"key":"send-1","kind":"http","request":{"body":"{}","headers":{"Content-Type":"application/json"},"method":"POST","url":"http://127.0.0.1:8080/mail"}}`,
				`effect.do {"key":"send-1","kind":"http","request":{"body":"{}","headers":{"Content-Type":"application/json"},"method":"POST","url":"http://127.0.0.1:8080/mail"}}`,
				`progress.count {"delta":1,"name":"pages"}`,
				`progress.note {"kind":"finding","text":"two pages"}`,
			},
		},
	}
	guests := map[string]func(t *testing.T) *Plugin{
		"go":   func(t *testing.T) *Plugin { return loadAs(t, r, "caps", testwasm.GoGuest(t, "caps")) },
		"c":    func(t *testing.T) *Plugin { return loadAs(t, r, "caps", testwasm.CGuest(t, "caps")) },
		"rust": func(t *testing.T) *Plugin { return loadAs(t, r, "caps", buildRust(t, "conformance")) },
		"assemblyscript": func(t *testing.T) *Plugin {
			return loadAs(t, r, "caps", buildAssemblyScript(t, "conformance"))
		},
	}
	for gname, load := range guests {
		t.Run(gname, func(t *testing.T) {
			t.Parallel()
			p := load(t)
			for _, tc := range cases {
				t.Run(tc.mode, func(t *testing.T) {
					t.Parallel()
					host := &testHost{}
					res, err := p.Run(context.Background(), Request{Step: "s", Attempt: 1,
						Input: json.RawMessage(`{"mode":"` + tc.mode + `"}`)}, Limits{}, host)
					require.NoError(t, err, "log: %s", res.Log)
					require.JSONEq(t, tc.want, string(res.Output))
					require.Equal(t, tc.calls, host.calls)
					require.Equal(t, tc.reads, host.reads > 0)
				})
			}
		})
	}
}

// TestCapsWithoutHost: a nil host makes every capability unavailable.
func TestCapsWithoutHost(t *testing.T) {
	t.Parallel()
	p := loadAs(t, sharedRuntime(t), "caps", testwasm.CGuest(t, "caps"))
	_, err := p.Run(context.Background(), Request{Input: json.RawMessage(`{"mode":"kv"}`)}, Limits{}, nil)
	var se *fault.StepError
	require.ErrorAs(t, err, &se)
	require.Equal(t, fault.PluginError, se.Kind)
	require.Equal(t, "plugin caps: kv.put: -8", se.Message)
}

// TestCapsBudget: host calls past Limits.MaxHostCalls are refused.
func TestCapsBudget(t *testing.T) {
	t.Parallel()
	p := loadAs(t, sharedRuntime(t), "caps", testwasm.CGuest(t, "caps"))
	host := &testHost{kv: map[string]json.RawMessage{"cursor": json.RawMessage(`1`)}}
	res, err := p.Run(context.Background(), Request{Input: json.RawMessage(`{"mode":"bench","n":10}`)}, Limits{MaxHostCalls: 4}, host)
	require.NoError(t, err)
	require.Equal(t, "4", string(res.Output))
	require.Equal(t, 4, res.HostCalls)
	require.Len(t, host.calls, 4)
}

// errHost is a Host whose capabilities fail with err.
type errHost struct {
	testHost
	err error
}

func (h *errHost) Call(context.Context, string, []byte) ([]byte, error) { return nil, h.err }
func (h *errHost) PutArtifact(context.Context, []byte, []byte) ([]byte, error) {
	return nil, h.err
}
func (h *errHost) ReadArtifact(context.Context, string, int64, []byte) (int, error) {
	return 0, h.err
}

// callDirect calls a host function of lhengine_v1 on mod with att.
func callDirect(ctx context.Context, att *attempt, mod api.Module, name string, args ...uint64) int32 {
	ctx = context.WithValue(ctx, attemptKey{}, att)
	for _, f := range hostFuncs {
		if f.name == name {
			stack := make([]uint64, max(len(f.params), len(f.results)))
			copy(stack, args)
			f.fn(ctx, mod, stack)
			return api.DecodeI32(stack[0])
		}
	}
	panic("no host function " + name)
}

// TestHostErrors: how errors of the Host reach the guest.
func TestHostErrors(t *testing.T) {
	t.Parallel()
	mod := memoryModule(t)
	mem := mod.Memory()
	require.True(t, mem.Write(0, []byte(`kv.get{"key":"a"}`)))
	cases := []struct {
		err    error
		status int32
		msg    string
		lost   bool
	}{
		{&HostError{Status: StatusDenied, Message: "no"}, StatusDenied, "call kv.get: no", false},
		{&HostError{Status: StatusPaused, Message: "waiting for approval"}, StatusPaused, "call kv.get: waiting for approval", false},
		{&HostError{Status: StatusPaused}, StatusPaused, "call kv.get: paused", false},
		{&HostError{Status: 3, Message: "odd"}, StatusInternal, "call kv.get: odd", false},
		{&HostError{Status: -77, Message: "odd"}, StatusInternal, "call kv.get: odd", false},
		{fmt.Errorf("wrapped: %w", &HostError{Status: StatusBudget, Message: "cost"}), StatusBudget, "call kv.get: cost", false},
		{errors.New("disk on fire"), StatusInternal, "call kv.get: disk on fire", false},
		{&HostError{Status: StatusLeaseLost, Message: "gone"}, StatusLeaseLost, "call kv.get: gone", true},
	}
	for _, tc := range cases {
		ctx, cancel := context.WithCancelCause(context.Background())
		att := &attempt{host: &errHost{err: tc.err}, log: newLogBuffer(1 << 10), cancel: cancel}
		rc := callDirect(ctx, att, mod, "call", 0, 6, 6, 11, 100, 100)
		require.Equal(t, tc.status, rc, tc.msg)
		require.Equal(t, tc.msg, att.lastErr)
		require.Equal(t, tc.lost, att.leaseErr != nil, tc.msg)
		require.Equal(t, tc.lost, ctx.Err() != nil, tc.msg)
		cancel(nil)

		// last_error reports it, and keeps it.
		for range 2 {
			n := callDirect(context.Background(), att, mod, "last_error", 1000, 200)
			require.Equal(t, int32(len(tc.msg)), n)
			got, _ := mem.Read(1000, uint32(n))
			require.Equal(t, tc.msg, string(got))
		}
		require.Equal(t, int32(len(tc.msg)), callDirect(context.Background(), att, mod, "last_error", 1000, 2), "too small: the length")
	}
}

// TestPendingResult: a result too large for the buffer is kept until it is
// fetched or another call is made.
func TestPendingResult(t *testing.T) {
	t.Parallel()
	mod := memoryModule(t)
	mem := mod.Memory()
	require.True(t, mem.Write(0, []byte(`http.fetch{"url":"/small"}`)))
	host := &testHost{}
	att := &attempt{host: host, log: newLogBuffer(1 << 10)}
	ctx := context.Background()
	fetch := func() int32 { return callDirect(ctx, att, mod, "call", 0, 10, 10, 16, 100, 16) }

	n := fetch()
	require.Greater(t, n, int32(16))
	require.Equal(t, n, callDirect(ctx, att, mod, "result", 100, 16), "still too small: kept")
	require.Equal(t, StatusRange, callDirect(ctx, att, mod, "result", pageSize-4, uint64(n)), "out of range: kept")
	require.Equal(t, n, callDirect(ctx, att, mod, "result", 100, uint64(n)))
	got, _ := mem.Read(100, uint32(n))
	require.JSONEq(t, `{"status":200,"headers":{"Content-Type":"text/plain"},"body":"ok","url":"/small"}`, string(got))
	require.Equal(t, StatusNotFound, callDirect(ctx, att, mod, "result", 100, uint64(n)), "fetched: dropped")
	require.Equal(t, "result: no pending result", att.lastErr)

	for _, other := range []func() int32{
		func() int32 { return callDirect(ctx, att, mod, "version") },
		func() int32 { return callDirect(ctx, att, mod, "last_error", 0, 0) },
		func() int32 { return callDirect(ctx, att, mod, "heartbeat") },
	} {
		require.Equal(t, n, fetch())
		require.GreaterOrEqual(t, other(), int32(0))
		require.Equal(t, StatusNotFound, callDirect(ctx, att, mod, "result", 100, uint64(n)), "another call: dropped")
	}
	require.Len(t, host.calls, 4, "never repeated")
}

// TestReadArtifactEOF: a Host may end a read with io.EOF.
func TestReadArtifactEOF(t *testing.T) {
	t.Parallel()
	mod := memoryModule(t)
	require.True(t, mod.Memory().Write(0, []byte("sha256:aa")))
	att := &attempt{host: &errHost{err: io.EOF}, log: newLogBuffer(1 << 10)}
	require.Equal(t, int32(0), callDirect(context.Background(), att, mod, "artifact_read", 0, 9, 0, 100, 100))
	require.Empty(t, att.lastErr)
}

// TestGoGuestManyCalls: a Go guest making host calls in a loop that never
// blocks keeps its heap bounded (the SDK lets the garbage collector's
// workers run; without that the heap grows past 64 MiB by 100000 calls).
func TestGoGuestManyCalls(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("100000 host calls")
	}
	p := loadAs(t, sharedRuntime(t), "caps", testwasm.GoGuest(t, "caps"))
	res, err := p.Run(context.Background(), Request{Input: json.RawMessage(`{"mode":"bench","n":100000}`)}, Limits{}, kvHost{})
	require.NoError(t, err)
	require.Equal(t, "100000", string(res.Output))
	require.Less(t, res.MemoryBytes, uint64(16<<20))
}
