package guest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"

	"github.com/lhengine/lhengine/fault"
	"github.com/lhengine/lhengine/internal/testwasm"
)

// memoryModule instantiates a module that is one page of exported memory,
// for calling host functions directly with guest-chosen arguments.
func memoryModule(t testing.TB) api.Module {
	t.Helper()
	r := sharedRuntime(t)
	wasm, err := os.ReadFile(testwasm.BuildWat(t, "memory", `(module (memory (export "memory") 1))`))
	require.NoError(t, err)
	ctx := context.Background()
	compiled, err := r.rt.CompileModule(ctx, wasm)
	require.NoError(t, err)
	mod, err := r.rt.InstantiateModule(ctx, compiled, wazero.NewModuleConfig().WithName(""))
	require.NoError(t, err)
	t.Cleanup(func() { mod.Close(ctx); compiled.Close(ctx) })
	return mod
}

const pageSize = 65536

func FuzzHostLog(f *testing.F) {
	mod := memoryModule(f)
	f.Add(int32(1), uint32(0), uint32(5), []byte("hello"))
	f.Add(int32(3), uint32(pageSize-5), uint32(5), []byte("\xff\xfe\x00ok"))
	f.Add(int32(0), uint32(pageSize), uint32(0), []byte{})
	f.Add(int32(0), uint32(pageSize), uint32(1), []byte{})
	f.Add(int32(4), uint32(0), uint32(1), []byte("x"))
	f.Add(int32(-1), uint32(0xffffffff), uint32(0xffffffff), []byte("x"))
	f.Add(int32(2), uint32(0xfffffff0), uint32(0x20), []byte("wrap"))
	f.Add(int32(2), uint32(0), uint32(LogMax+1), []byte("big"))
	f.Fuzz(func(t *testing.T, level int32, ptr, n uint32, data []byte) {
		if uint64(ptr)+uint64(len(data)) <= pageSize {
			mod.Memory().Write(ptr, data)
		}
		host := &testHost{}
		att := &attempt{host: host, log: newLogBuffer(1 << 16)}
		ctx := context.WithValue(context.Background(), attemptKey{}, att)
		stack := []uint64{api.EncodeI32(level), api.EncodeU32(ptr), api.EncodeU32(n)}
		hostLog(ctx, mod, stack)
		rc := api.DecodeI32(stack[0])
		switch {
		case level < 0 || level > 3:
			require.Equal(t, StatusInvalid, rc)
		case n > LogMax:
			require.Equal(t, StatusTooLarge, rc)
		case uint64(ptr)+uint64(n) > pageSize:
			require.Equal(t, StatusRange, rc)
		default:
			require.Equal(t, StatusOK, rc)
			require.Len(t, host.logs, 1)
			require.Contains(t, string(att.log.Bytes()), "] ")
			return
		}
		require.Empty(t, host.logs)
		require.Equal(t, 1, att.calls)
	})
}

func FuzzWriteResult(f *testing.F) {
	mod := memoryModule(f)
	f.Add(uint32(0), uint32(16), []byte(`{"ok":true}`))
	f.Add(uint32(pageSize-4), uint32(16), []byte(`12345`))
	f.Add(uint32(0), uint32(2), []byte(`12345`))
	f.Add(uint32(0xffffffff), uint32(0xffffffff), []byte(`x`))
	f.Add(uint32(pageSize), uint32(0), []byte{})
	f.Fuzz(func(t *testing.T, ptr, outCap uint32, out []byte) {
		rc := writeResult(mod.Memory(), ptr, outCap, out)
		switch {
		case uint32(len(out)) > outCap:
			require.Equal(t, int32(len(out)), rc, "too small: the size needed")
		case uint64(ptr)+uint64(len(out)) > pageSize:
			require.Equal(t, StatusRange, rc)
		default:
			require.Equal(t, int32(len(out)), rc)
			got, ok := mod.Memory().Read(ptr, uint32(len(out)))
			require.True(t, ok)
			require.True(t, bytes.Equal(out, got))
		}
		if uint32(len(out)) <= outCap {
			require.Equal(t, StatusRange, writeResult(nil, ptr, outCap, out), "no memory")
		}
	})
}

func FuzzReadRequest(f *testing.F) {
	mod := memoryModule(f)
	f.Add(uint32(0), uint32(10), uint32(100))
	f.Add(uint32(pageSize-1), uint32(2), uint32(100))
	f.Add(uint32(0xffffffff), uint32(0xffffffff), uint32(0xffffffff))
	f.Add(uint32(1), uint32(101), uint32(100))
	f.Fuzz(func(t *testing.T, ptr, n, max uint32) {
		b, rc := readRequest(mod.Memory(), ptr, n, max)
		switch {
		case n > max:
			require.Equal(t, StatusTooLarge, rc)
		case uint64(ptr)+uint64(n) > pageSize:
			require.Equal(t, StatusRange, rc)
		default:
			require.Equal(t, StatusOK, rc)
			require.Len(t, b, int(n))
			return
		}
		require.Nil(t, b)
	})
}

// TestHostCallsWithoutAttempt: a host function reached without an attempt
// in its context (which Run never does) refuses, it does not panic.
func TestHostCallsWithoutAttempt(t *testing.T) {
	t.Parallel()
	mod := memoryModule(t)
	for _, f := range hostFuncs {
		stack := make([]uint64, max(len(f.params), len(f.results)))
		f.fn(context.Background(), mod, stack)
		require.Equal(t, StatusBudget, api.DecodeI32(stack[0]), f.name)
	}
}

func FuzzInspect(f *testing.F) {
	// Small seeds keep the fuzzer fast; the C guests are 15-150 KB.
	for i, wat := range []string{
		`(module (func (export "_start")))`,
		`(module (import "lhengine_v1" "log" (func (param i32 i32 i32) (result i32)))
			(memory (export "memory") 2 16) (func (export "_start")))`,
		`(module (import "lhengine_v2" "log" (func (param i32 i32 i32) (result i32))) (func (export "_start")))`,
		`(module (import "wasi_snapshot_preview1" "fd_write" (func (param i32 i32 i32 i32) (result i32)))
			(memory 1) (data (i32.const 8) "hi") (func (export "_start") unreachable))`,
		`(module (import "env" "g" (global i32)) (table 1 funcref) (func (export "_initialize")))`,
	} {
		wasm, err := os.ReadFile(testwasm.BuildWat(f, fmt.Sprintf("seed%d", i), wat))
		require.NoError(f, err)
		f.Add(wasm)
		f.Add(wasm[:len(wasm)/2])
	}
	f.Add([]byte{})
	f.Add([]byte("\x00asm"))
	f.Add([]byte("\x00asm\x01\x00\x00\x00"))
	f.Add([]byte("\x00asm\x01\x00\x00\x00\x05\x03\x01\x00\x01"))
	f.Fuzz(func(t *testing.T, wasm []byte) {
		info, err := Inspect(context.Background(), wasm)
		if err == nil {
			require.True(t, info.Command)
			return
		}
		var se *fault.StepError
		require.ErrorAs(t, err, &se)
		require.Contains(t, []fault.Kind{fault.BadModule, fault.ABIMismatch}, se.Kind, "%v", err)
	})
}

func FuzzParseResult(f *testing.F) {
	for _, s := range []string{`{"output":1}`, `{"error":"x"}`, `{"needs_repair":true,"reason":"r"}`,
		`{"output":1} x`, `[`, ``, `{"output":"\ud800"}`, "{\"output\":\"\xff\"}", `{"a":{"b":[{"c":null}]}}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, stdout []byte) {
		out, err := parseResult(stdout)
		if err != nil {
			require.Contains(t, []fault.Kind{fault.BadResult, fault.PluginError}, err.Kind)
			return
		}
		if !out.needsRepair {
			require.True(t, json.Valid(out.output), "%q", out.output)
		}
	})
}
