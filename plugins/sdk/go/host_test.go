//go:build !wasip1

package sdk

import (
	"errors"
	"strings"
	"testing"
	"unicode/utf8"
)

// The tests here play the host: they replace the native host-call stubs
// (host_other.go) and check what the SDK sends and how it maps each answer.
// They do not run in parallel, since the stubs are package variables.
// engine/internal/guest runs the same SDK against the real host
// (TestGoSDKHostCalls).

// fakeHost replaces the stubs for the duration of t.
func fakeHost(t *testing.T) {
	t.Helper()
	saved := []any{hostLog, hostHeartbeat, hostCall, hostResult, hostArtifactPut, hostArtifactRead, hostLastError}
	t.Cleanup(func() {
		hostLog = saved[0].(func(Level, string) int32)
		hostHeartbeat = saved[1].(func() int32)
		hostCall = saved[2].(func(string, []byte, []byte) int32)
		hostResult = saved[3].(func([]byte) int32)
		hostArtifactPut = saved[4].(func([]byte, []byte, []byte) int32)
		hostArtifactRead = saved[5].(func(string, int64, []byte) int32)
		hostLastError = saved[6].(func([]byte) int32)
	})
}

// lastErrorOf makes a last_error that follows the ABI: it returns the
// message's length and writes it only when it fits.
func lastErrorOf(msg string) func([]byte) int32 {
	return func(out []byte) int32 {
		if len(msg) > len(out) {
			return int32(len(msg))
		}
		return int32(copy(out, msg))
	}
}

func TestHeartbeatStatuses(t *testing.T) {
	cases := []struct {
		rc   int32
		want error
	}{
		{0, nil},
		{int32(ErrLeaseLost), ErrLeaseLost},
		{int32(ErrBudget), ErrBudget},
		{int32(ErrInternal), ErrInternal},
		{int32(ErrPaused), ErrPaused},
	}
	for _, tc := range cases {
		fakeHost(t)
		calls := 0
		hostHeartbeat = func() int32 { calls++; return tc.rc }
		err := (&Context{}).Heartbeat()
		if calls != 1 {
			t.Fatalf("status %d: Heartbeat made %d host calls, want 1", tc.rc, calls)
		}
		if tc.want == nil {
			if err != nil {
				t.Fatalf("status 0: Heartbeat returned %v, want nil", err)
			}
			continue
		}
		if !errors.Is(err, tc.want) {
			t.Fatalf("status %d: Heartbeat returned %v, want %v", tc.rc, err, tc.want)
		}
	}
}

func TestLogSendsTruncatedUTF8(t *testing.T) {
	fakeHost(t)
	var gotLevel Level
	var got string
	hostLog = func(level Level, msg string) int32 {
		gotLevel, got = level, msg
		return int32(ErrBudget) // a refused log is dropped, never a failure
	}
	ctx := &Context{}
	ctx.Log(LevelWarn, strings.Repeat("é", LogMax)) // 2*LogMax bytes
	if gotLevel != LevelWarn {
		t.Fatalf("level %d, want %d", gotLevel, LevelWarn)
	}
	if len(got) != LogMax || !utf8.ValidString(got) {
		t.Fatalf("host got %d bytes (valid UTF-8: %v), want %d bytes cut at a rune boundary", len(got), utf8.ValidString(got), LogMax)
	}
	ctx.Logf(LevelDebug, "page %d of %s", 3, "site")
	if gotLevel != LevelDebug || got != "page 3 of site" {
		t.Fatalf("Logf sent %d %q", gotLevel, got)
	}
}

// TestCallOutputConvention: a response larger than the SDK's buffer is
// fetched with result, once, into a buffer of the announced size.
func TestCallOutputConvention(t *testing.T) {
	fakeHost(t)
	big := strings.Repeat("x", 3*callBufSize)
	var gotName, gotReq string
	hostCall = func(name string, req, out []byte) int32 {
		gotName, gotReq = name, string(req)
		if len(big) <= len(out) {
			t.Fatalf("the test's response must not fit the SDK's first buffer of %d bytes", len(out))
		}
		return int32(len(big))
	}
	results := 0
	hostResult = func(out []byte) int32 {
		results++
		if len(out) < len(big) {
			return int32(len(big))
		}
		return int32(copy(out, big))
	}
	out, err := (&Context{}).CallRaw("http.fetch", []byte(`{"url":"u"}`))
	if err != nil {
		t.Fatal(err)
	}
	if string(out) != big || results != 1 {
		t.Fatalf("got %d bytes after %d result calls, want %d bytes after 1", len(out), results, len(big))
	}
	if gotName != "http.fetch" || gotReq != `{"url":"u"}` {
		t.Fatalf("host got %q %q", gotName, gotReq)
	}
}

// TestCallRefused: a negative status becomes a *HostError with that status
// and the host's last_error message, however long.
func TestCallRefused(t *testing.T) {
	for _, st := range []Errno{ErrRange, ErrTooLarge, ErrInvalid, ErrDenied, ErrNotFound, ErrLeaseLost, ErrBudget, ErrUnavailable, ErrInternal, ErrPaused} {
		fakeHost(t)
		msg := "refused: " + strings.Repeat("m", 300) // longer than the first buffer
		hostCall = func(string, []byte, []byte) int32 { return int32(st) }
		hostLastError = lastErrorOf(msg)
		err := (&Context{}).Call("kv.get", map[string]string{"key": "k"}, nil)
		var he *HostError
		if !errors.As(err, &he) || he.Status != st || he.Message != msg {
			t.Fatalf("status %d: got %#v, want a *HostError with status %d and the host's message", st, err, st)
		}
		if !errors.Is(err, st) {
			t.Fatalf("status %d: errors.Is(err, %v) is false", st, st)
		}
	}
}

// TestCallPendingResultLost: when result fails after a call announced a
// large response, the error is result's, not a truncated response.
func TestCallPendingResultLost(t *testing.T) {
	fakeHost(t)
	hostCall = func(string, []byte, []byte) int32 { return 10 * callBufSize }
	hostResult = func([]byte) int32 { return int32(ErrNotFound) }
	hostLastError = lastErrorOf("result: nothing pending")
	_, err := (&Context{}).CallRaw("kv.get", []byte(`{}`))
	if !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), "nothing pending") {
		t.Fatalf("got %v", err)
	}
}

func TestReadArtifactReadsToEnd(t *testing.T) {
	fakeHost(t)
	data := make([]byte, 2*readChunk+5)
	for i := range data {
		data[i] = byte(i * 7)
	}
	hostArtifactRead = func(ref string, off int64, out []byte) int32 {
		if ref != "sha256:ab" {
			return int32(ErrNotFound)
		}
		return int32(copy(out, data[off:]))
	}
	got, err := (&Context{}).ReadArtifact("sha256:ab")
	if err != nil || string(got) != string(data) {
		t.Fatalf("got %d bytes, %v; want %d bytes", len(got), err, len(data))
	}
}
