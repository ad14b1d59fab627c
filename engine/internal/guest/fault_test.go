package guest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lhengine/lhengine/fault"
	"github.com/lhengine/lhengine/internal/testwasm"
)

// requireKind asserts err is a *fault.StepError of kind whose message
// contains each of parts.
func requireKind(t *testing.T, err error, kind fault.Kind, parts ...string) {
	t.Helper()
	require.Error(t, err)
	var se *fault.StepError
	require.ErrorAs(t, err, &se, "error %v (%T)", err, err)
	require.Equal(t, kind, se.Kind, "error: %v", err)
	require.NotContains(t, se.Message, "\n")
	for _, p := range parts {
		require.Contains(t, se.Message, p)
	}
}

// requireHealthy runs a normal guest on r: whatever failed before, the
// runtime must still work.
func requireHealthy(t *testing.T, r *Runtime) {
	t.Helper()
	p := loadAs(t, r, "envelope", testwasm.CGuest(t, "envelope"))
	res, err := p.Run(context.Background(), Request{Step: "s", Attempt: 1, Input: json.RawMessage(`{"ok":true}`)}, Limits{}, nil)
	require.NoError(t, err)
	require.JSONEq(t, `{"ok":true}`, string(res.Output))
}

func TestRunFaults(t *testing.T) {
	t.Parallel()
	r := sharedRuntime(t)
	cases := []struct {
		name  string
		guest func(t *testing.T) string
		input string
		lim   Limits
		kind  fault.Kind
		parts []string
	}{
		{name: "infinite loop", guest: func(t *testing.T) string { return testwasm.CGuest(t, "loop") },
			lim: Limits{Timeout: 50 * time.Millisecond}, kind: fault.Timeout, parts: []string{"step timeout of 50ms"}},
		{name: "memory bomb", guest: func(t *testing.T) string { return testwasm.CGuest(t, "membomb") },
			lim: Limits{MemoryBytes: 8 << 20}, kind: fault.Memory, parts: []string{"limit 8 MiB", "membomb: out of memory"}},
		{name: "memory bomb default cap", guest: func(t *testing.T) string { return testwasm.CGuest(t, "membomb") },
			kind: fault.Memory, parts: []string{"limit 64 MiB"}},
		{name: "initial memory over cap", guest: func(t *testing.T) string { return testwasm.GoGuest(t, "conformance") },
			lim: Limits{MemoryBytes: 1 << 20}, kind: fault.Memory, parts: []string{"initial memory", "limit of 1 MiB"}},
		{name: "go guest out of memory", guest: func(t *testing.T) string { return testwasm.GoGuest(t, "hog") },
			lim: Limits{MemoryBytes: 16 << 20}, kind: fault.Memory, parts: []string{"limit 16 MiB"}},
		{name: "stdout flood", guest: func(t *testing.T) string { return testwasm.CGuest(t, "flood") },
			lim: Limits{MaxStdout: 1 << 20}, kind: fault.OutputTooLarge, parts: []string{"more than 1 MiB to stdout"}},
		{name: "trap", guest: func(t *testing.T) string { return testwasm.CGuest(t, "trap") },
			kind: fault.Trap, parts: []string{"trapped: wasm error: unreachable", "stderr: trap: about to trap"}},
		{name: "go panic", guest: func(t *testing.T) string { return testwasm.GoGuest(t, "panic") },
			kind: fault.PluginError, parts: []string{"exited with code 1: panic: handler gave up"}},
		{name: "trailing garbage", guest: func(t *testing.T) string { return testwasm.CGuest(t, "garbage") },
			input: `{"mode":"trailing"}`, kind: fault.BadResult, parts: []string{"more after the result object"}},
		{name: "not json", guest: func(t *testing.T) string { return testwasm.CGuest(t, "garbage") },
			input: `{"mode":"notjson"}`, kind: fault.BadResult, parts: []string{"not a JSON object"}},
		{name: "empty stdout", guest: func(t *testing.T) string { return testwasm.CGuest(t, "garbage") },
			input: `{"mode":"empty"}`, kind: fault.BadResult, parts: []string{"wrote nothing to stdout"}},
		{name: "array", guest: func(t *testing.T) string { return testwasm.CGuest(t, "garbage") },
			input: `{"mode":"array"}`, kind: fault.BadResult, parts: []string{"not a JSON object"}},
		{name: "two objects", guest: func(t *testing.T) string { return testwasm.CGuest(t, "garbage") },
			input: `{"mode":"two"}`, kind: fault.BadResult, parts: []string{"more after the result object"}},
		{name: "error not a string", guest: func(t *testing.T) string { return testwasm.CGuest(t, "garbage") },
			input: `{"mode":"badtype"}`, kind: fault.BadResult, parts: []string{`"error" must be a string`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := loadAs(t, r, "guest", tc.guest(t))
			input := json.RawMessage(tc.input)
			if tc.input == "" {
				input = nil
			}
			res, err := p.Run(context.Background(), Request{Step: "s", Attempt: 1, Input: input}, tc.lim, nil)
			requireKind(t, err, tc.kind, tc.parts...)
			require.NotNil(t, res)
			require.Nil(t, res.Output)
			requireHealthy(t, r)
		})
	}
}

func TestLoadFaults(t *testing.T) {
	t.Parallel()
	r := sharedRuntime(t)
	ctx := context.Background()
	wat := func(name, src string) func(t *testing.T) string {
		return func(t *testing.T) string { return testwasm.BuildWat(t, name, src) }
	}
	cases := []struct {
		name  string
		path  func(t *testing.T) string
		kind  fault.Kind
		parts []string
	}{
		{name: "lhengine_v2 import", path: func(t *testing.T) string { return testwasm.CGuest(t, "abi_v2") },
			kind: fault.ABIMismatch, parts: []string{"lhengine_v2.log", "ABI v2", "ABI v1"}},
		{name: "unknown lhengine_v1 function", path: func(t *testing.T) string { return testwasm.CGuest(t, "abi_unknown") },
			kind: fault.ABIMismatch, parts: []string{"lhengine_v1.teleport", "does not provide"}},
		{name: "wrong signature", path: wat("badsig", `(module
				(import "lhengine_v1" "log" (func (param i32)))
				(memory (export "memory") 1)
				(func (export "_start")))`),
			kind: fault.ABIMismatch, parts: []string{"lhengine_v1.log as (i32) -> ()", "(i32, i32, i32) -> (i32)"}},
		{name: "foreign module", path: wat("env", `(module
				(import "env" "abort" (func))
				(func (export "_start")))`),
			kind: fault.ABIMismatch, parts: []string{"env.abort", "only from wasi_snapshot_preview1 and lhengine_v1"}},
		{name: "unknown wasi function", path: wat("wasi", `(module
				(import "wasi_snapshot_preview1" "teleport" (func))
				(func (export "_start")))`),
			kind: fault.ABIMismatch, parts: []string{"wasi_snapshot_preview1.teleport"}},
		{name: "imported memory", path: wat("impmem", `(module
				(import "lhengine_v1" "memory" (memory 1))
				(func (export "_start")))`),
			kind: fault.ABIMismatch, parts: []string{"memory lhengine_v1.memory"}},
		{name: "reactor", path: wat("reactor", `(module (func (export "_initialize")))`),
			kind: fault.BadModule, parts: []string{"reactor"}},
		{name: "no _start", path: wat("empty", `(module)`),
			kind: fault.BadModule, parts: []string{"does not export _start"}},
		{name: "_start with params", path: wat("startparams", `(module (func (export "_start") (param i32)))`),
			kind: fault.BadModule, parts: []string{"(i32) -> ()"}},
		{name: "garbage bytes", path: func(t *testing.T) string {
			p := filepath.Join(t.TempDir(), "garbage.wasm")
			require.NoError(t, os.WriteFile(p, []byte("#!/bin/sh\necho not wasm\n"), 0o644))
			return p
		}, kind: fault.BadModule, parts: []string{"not a valid Wasm module"}},
		{name: "missing file", path: func(t *testing.T) string { return filepath.Join(t.TempDir(), "nope.wasm") },
			kind: fault.PluginMissing, parts: []string{"nope.wasm does not exist"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			path := tc.path(t)
			p, err := r.Load(ctx, path, "")
			require.Nil(t, p)
			requireKind(t, err, tc.kind, tc.parts...)
			require.False(t, tc.kind.Retryable())
			// The same bytes fail the same way from the cache.
			_, err2 := r.Load(ctx, path, "")
			require.Equal(t, err.Error(), err2.Error())
			requireHealthy(t, r)
		})
	}

	t.Run("hash mismatch", func(t *testing.T) {
		t.Parallel()
		path := testwasm.CGuest(t, "envelope")
		wasm, err := os.ReadFile(path)
		require.NoError(t, err)
		sum := sha256.Sum256(wasm)
		good := hex.EncodeToString(sum[:])

		_, err = r.Load(ctx, path, strings.Repeat("0", 64))
		requireKind(t, err, fault.HashMismatch, good)

		for _, want := range []string{good, strings.ToUpper(good), "sha256:" + good} {
			p, err := r.Load(ctx, path, want)
			require.NoError(t, err)
			require.Equal(t, good, p.SHA256)
			require.Equal(t, len(wasm), p.Size)
			require.Equal(t, "envelope.wasm", p.Name)
		}
	})
}

func TestRunCancel(t *testing.T) {
	t.Parallel()
	r := sharedRuntime(t)
	loop := loadAs(t, r, "loop", testwasm.CGuest(t, "loop"))

	t.Run("caller deadline", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		_, err := loop.Run(ctx, Request{}, Limits{}, nil)
		requireKind(t, err, fault.Internal, "stopped")
		require.ErrorIs(t, err, context.DeadlineExceeded)
	})
	t.Run("caller deadline before step timeout", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		defer cancel()
		_, err := loop.Run(ctx, Request{}, Limits{Timeout: time.Hour}, nil)
		requireKind(t, err, fault.Internal)
		require.ErrorIs(t, err, context.DeadlineExceeded)
	})
	t.Run("already cancelled", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		_, err := loop.Run(ctx, Request{}, Limits{}, nil)
		requireKind(t, err, fault.Internal)
		require.ErrorIs(t, err, context.Canceled)
	})
	t.Run("lease lost", func(t *testing.T) {
		t.Parallel()
		lost := errors.New("lease taken over by worker-2")
		p := loadAs(t, r, "conformance", testwasm.CGuest(t, "conformance"))
		host := &testHost{leaseErr: lost}
		res, err := p.Run(context.Background(), Request{Input: json.RawMessage(`{"mode":"log"}`)}, Limits{}, host)
		requireKind(t, err, fault.Internal, "lease lost", "worker-2")
		require.ErrorIs(t, err, lost)
		require.Equal(t, 1, host.beats)
		require.Contains(t, string(res.Log), "hello from guest")
	})
}

// blockingHost's Heartbeat waits for the attempt to be stopped.
type blockingHost struct{ testHost }

func (h *blockingHost) Heartbeat(ctx context.Context) error {
	<-ctx.Done()
	return ctx.Err()
}

// TestHeartbeatDuringTimeout: a heartbeat that fails because the attempt is
// being stopped is not a lost lease.
func TestHeartbeatDuringTimeout(t *testing.T) {
	t.Parallel()
	p := loadAs(t, sharedRuntime(t), "conformance", testwasm.CGuest(t, "conformance"))
	res, err := p.Run(context.Background(), Request{Input: json.RawMessage(`{"mode":"log"}`)},
		Limits{Timeout: 20 * time.Millisecond}, &blockingHost{})
	if err != nil {
		// The guest is stopped at its next check, or finishes first.
		requireKind(t, err, fault.Timeout)
		return
	}
	require.JSONEq(t, `{"logged":true,"lease":"lost"}`, string(res.Output))
}

func TestRunLimits(t *testing.T) {
	t.Parallel()
	r := sharedRuntime(t)

	t.Run("host call budget", func(t *testing.T) {
		t.Parallel()
		p := loadAs(t, r, "hostcalls", testwasm.CGuest(t, "hostcalls"))
		res, err := p.Run(context.Background(), Request{Input: json.RawMessage(`{"n":10}`)}, Limits{MaxHostCalls: 4}, nil)
		require.NoError(t, err)
		// 4 calls return 1, 6 return StatusBudget.
		require.Equal(t, "-38", string(res.Output))
		require.Equal(t, 4, res.HostCalls)
	})
	t.Run("stderr truncated", func(t *testing.T) {
		t.Parallel()
		p := loadAs(t, r, "noisy", testwasm.CGuest(t, "noisy"))
		res, err := p.Run(context.Background(), Request{}, Limits{MaxStderr: 4096}, nil)
		require.NoError(t, err)
		require.Equal(t, `"done"`, string(res.Output))
		log := string(res.Log)
		require.Less(t, len(log), 4096+64)
		require.True(t, strings.HasPrefix(log, "line 0\nline 1\n"), log[:20])
		require.True(t, strings.HasSuffix(log, "line 99999\n"))
		require.Contains(t, log, "[truncated: ")
	})
	t.Run("memory reported", func(t *testing.T) {
		t.Parallel()
		p := loadAs(t, r, "envelope", testwasm.CGuest(t, "envelope"))
		res, err := p.Run(context.Background(), Request{}, Limits{}, nil)
		require.NoError(t, err)
		require.Equal(t, "null", string(res.Output))
		require.GreaterOrEqual(t, res.MemoryBytes, uint64(p.Info.MemoryMinPages)<<16)
	})
	t.Run("input not json", func(t *testing.T) {
		t.Parallel()
		p := loadAs(t, r, "envelope", testwasm.CGuest(t, "envelope"))
		_, err := p.Run(context.Background(), Request{Input: json.RawMessage(`{oops`)}, Limits{}, nil)
		requireKind(t, err, fault.Input)
	})
}

// TestRunConcurrent runs many attempts of one plugin at once: instances must
// not share state or collide on names.
func TestRunConcurrent(t *testing.T) {
	t.Parallel()
	r := sharedRuntime(t)
	p := loadAs(t, r, "conformance", testwasm.CGuest(t, "conformance"))
	var wg sync.WaitGroup
	errs := make([]error, 32)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			in := json.RawMessage(fmt.Sprintf(`{"mode":"echo","i":%d}`, i))
			res, err := p.Run(context.Background(), Request{Step: "s", Attempt: i, Input: in}, Limits{}, &testHost{})
			if err == nil {
				var out struct {
					Attempt int
					Input   struct{ I int }
				}
				err = json.Unmarshal(res.Output, &out)
				if err == nil && (out.Attempt != i || out.Input.I != i) {
					err = fmt.Errorf("attempt %d echoed %s", i, res.Output)
				}
			}
			errs[i] = err
		}()
	}
	wg.Wait()
	for _, err := range errs {
		require.NoError(t, err)
	}
}
