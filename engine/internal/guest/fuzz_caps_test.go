package guest

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/tetratelabs/wazero/api"
)

// The fuzz tests below call each capability function of lhengine_v1 with
// guest-chosen pointers, lengths, offsets and capacities over one page of
// memory: none may panic, and each returns the status its checks, in the
// documented order, call for.

// inRange reports whether [ptr, ptr+n) lies in one page.
func inRange(ptr, n uint32) bool { return uint64(ptr)+uint64(n) <= pageSize }

// span is a guest buffer a capability function checks, with the largest
// length it takes.
type span struct{ ptr, n, max uint32 }

// noMax is the max of a span of any length (an output buffer).
const noMax = ^uint32(0)

// spanStatus is the status the checks of spans, in order, call for: a
// length past its max is too large, a buffer off the page out of range;
// StatusOK when every span passes.
func spanStatus(spans ...span) int32 {
	for _, s := range spans {
		switch {
		case s.n > s.max:
			return StatusTooLarge
		case !inRange(s.ptr, s.n):
			return StatusRange
		}
	}
	return StatusOK
}

// fuzzAttempt is a fresh attempt over a testHost holding one artifact.
func fuzzAttempt() (*attempt, *testHost) {
	host := &testHost{
		kv:        map[string]json.RawMessage{"a": json.RawMessage(`{"x":1}`)},
		artifacts: map[string][]byte{"sha256:aa": []byte("artifact bytes")},
	}
	return &attempt{host: host, log: newLogBuffer(1 << 10)}, host
}

// checkStatus asserts the invariants every call keeps: a defined status,
// a message for every failure, one charged call.
func checkStatus(t *testing.T, att *attempt, rc int32) {
	t.Helper()
	require.GreaterOrEqual(t, rc, StatusPaused)
	if rc < 0 {
		require.NotEmpty(t, att.lastErr)
	} else {
		require.Empty(t, att.lastErr)
	}
	require.Equal(t, 1, att.calls)
}

func FuzzHostCall(f *testing.F) {
	mod := memoryModule(f)
	seed := []byte(`kv.get{"key":"a"}`)
	f.Add(uint32(0), uint32(6), uint32(6), uint32(11), uint32(100), uint32(100), seed)
	f.Add(uint32(0), uint32(6), uint32(6), uint32(11), uint32(100), uint32(4), seed)
	f.Add(uint32(0), uint32(6), uint32(6), uint32(5), uint32(100), uint32(100), seed)
	f.Add(uint32(0), uint32(5), uint32(6), uint32(11), uint32(100), uint32(100), seed)
	f.Add(uint32(0), uint32(65), uint32(6), uint32(11), uint32(100), uint32(100), seed)
	f.Add(uint32(0), uint32(6), uint32(6), uint32(CallRequestMax+1), uint32(100), uint32(100), seed)
	f.Add(uint32(0xffffffff), uint32(6), uint32(6), uint32(11), uint32(100), uint32(100), seed)
	f.Add(uint32(0), uint32(6), uint32(0xfffffff0), uint32(0x20), uint32(100), uint32(100), seed)
	f.Add(uint32(0), uint32(6), uint32(6), uint32(11), uint32(pageSize-10), uint32(100), seed)
	f.Add(uint32(0), uint32(6), uint32(6), uint32(11), uint32(0xffffffff), uint32(0), seed)
	f.Add(uint32(0), uint32(6), uint32(6), uint32(11), uint32(0), uint32(0xffffffff), []byte("kv.get{\"key\":\"\xff\"}"))
	f.Fuzz(func(t *testing.T, namePtr, nameLen, reqPtr, reqLen, outPtr, outCap uint32, data []byte) {
		mem := mod.Memory()
		if len(data) <= pageSize {
			mem.Write(0, data)
		}
		name, _ := mem.Read(namePtr, nameLen)
		name = append([]byte(nil), name...)
		req, _ := mem.Read(reqPtr, reqLen)
		req = append([]byte(nil), req...)
		att, _ := fuzzAttempt()
		att.pending = []byte("old")
		rc := callDirect(context.Background(), att, mod, "call",
			uint64(namePtr), uint64(nameLen), uint64(reqPtr), uint64(reqLen), uint64(outPtr), uint64(outCap))
		checkStatus(t, att, rc)
		switch want := spanStatus(span{namePtr, nameLen, CallNameMax}, span{reqPtr, reqLen, CallRequestMax}, span{outPtr, outCap, noMax}); {
		case want != StatusOK:
			require.Equal(t, want, rc)
		case !capabilitySet[string(name)]:
			require.Equal(t, StatusUnavailable, rc)
		case !isJSONObject(req):
			require.Equal(t, StatusInvalid, rc)
		}
		if rc >= 0 && uint32(rc) > outCap {
			require.Len(t, att.pending, int(rc))
		} else {
			require.Nil(t, att.pending, "any call drops the pending result")
		}
	})
}

func FuzzHostResult(f *testing.F) {
	mod := memoryModule(f)
	f.Add(uint32(0), uint32(100), uint32(10), true)
	f.Add(uint32(0), uint32(5), uint32(10), true)
	f.Add(uint32(pageSize-5), uint32(10), uint32(10), true)
	f.Add(uint32(0xffffffff), uint32(0xffffffff), uint32(1), true)
	f.Add(uint32(0), uint32(100), uint32(10), false)
	f.Fuzz(func(t *testing.T, outPtr, outCap, n uint32, pending bool) {
		att, _ := fuzzAttempt()
		var want []byte
		if pending {
			want = make([]byte, n%(2*pageSize))
			att.pending = want
		}
		rc := callDirect(context.Background(), att, mod, "result", uint64(outPtr), uint64(outCap))
		checkStatus(t, att, rc)
		switch {
		case !pending:
			require.Equal(t, StatusNotFound, rc)
		case uint32(len(want)) > outCap:
			require.Equal(t, int32(len(want)), rc)
			require.NotNil(t, att.pending, "kept")
		case !inRange(outPtr, uint32(len(want))):
			require.Equal(t, StatusRange, rc)
			require.NotNil(t, att.pending, "kept")
		default:
			require.Equal(t, int32(len(want)), rc)
			require.Nil(t, att.pending, "fetched")
		}
	})
}

func FuzzHostArtifactPut(f *testing.F) {
	mod := memoryModule(f)
	seed := []byte(`{"name":"a.md","media_type":"text/markdown"}hello`)
	f.Add(uint32(0), uint32(44), uint32(44), uint32(5), uint32(200), uint32(200), seed)
	f.Add(uint32(0), uint32(44), uint32(44), uint32(5), uint32(200), uint32(10), seed)
	f.Add(uint32(0), uint32(43), uint32(44), uint32(5), uint32(200), uint32(200), seed)
	f.Add(uint32(0), uint32(ArtifactMetaMax+1), uint32(44), uint32(5), uint32(200), uint32(200), seed)
	f.Add(uint32(0), uint32(44), uint32(44), uint32(ArtifactDataMax+1), uint32(200), uint32(200), seed)
	f.Add(uint32(0), uint32(44), uint32(0xfffffff0), uint32(0x20), uint32(200), uint32(200), seed)
	f.Add(uint32(0), uint32(44), uint32(44), uint32(pageSize), uint32(200), uint32(200), seed)
	f.Add(uint32(0), uint32(44), uint32(44), uint32(5), uint32(pageSize), uint32(1), seed)
	f.Add(uint32(0), uint32(11), uint32(0), uint32(0), uint32(0), uint32(0), []byte(`{"name":""}`))
	f.Add(uint32(0), uint32(25), uint32(0), uint32(0), uint32(0), uint32(0), []byte(`{"name":"x","media_type":1}`))
	f.Fuzz(func(t *testing.T, metaPtr, metaLen, dataPtr, dataLen, outPtr, outCap uint32, data []byte) {
		mem := mod.Memory()
		if len(data) <= pageSize {
			mem.Write(0, data)
		}
		// The output may overwrite the inputs: look at them first.
		meta, _ := mem.Read(metaPtr, metaLen)
		meta = append([]byte(nil), meta...)
		att, host := fuzzAttempt()
		rc := callDirect(context.Background(), att, mod, "artifact_put",
			uint64(metaPtr), uint64(metaLen), uint64(dataPtr), uint64(dataLen), uint64(outPtr), uint64(outCap))
		checkStatus(t, att, rc)
		if want := spanStatus(span{metaPtr, metaLen, ArtifactMetaMax}, span{dataPtr, dataLen, ArtifactDataMax}, span{outPtr, outCap, noMax}); want != StatusOK {
			require.Equal(t, want, rc)
		} else {
			if !isJSONObject(meta) {
				require.Equal(t, StatusInvalid, rc)
			}
			if rc >= 0 {
				require.Len(t, host.artifacts, 2)
				return
			}
		}
		require.Len(t, host.artifacts, 1, "nothing stored")
	})
}

func FuzzHostArtifactRead(f *testing.F) {
	mod := memoryModule(f)
	seed := []byte("sha256:aa")
	f.Add(uint32(0), uint32(9), int64(0), uint32(100), uint32(100), seed)
	f.Add(uint32(0), uint32(9), int64(3), uint32(100), uint32(4), seed)
	f.Add(uint32(0), uint32(9), int64(14), uint32(100), uint32(100), seed)
	f.Add(uint32(0), uint32(9), int64(1<<62), uint32(100), uint32(100), seed)
	f.Add(uint32(0), uint32(9), int64(-1), uint32(100), uint32(100), seed)
	f.Add(uint32(0), uint32(8), int64(0), uint32(100), uint32(100), seed)
	f.Add(uint32(0), uint32(0), int64(0), uint32(100), uint32(100), seed)
	f.Add(uint32(0), uint32(ArtifactRefMax+1), int64(0), uint32(100), uint32(100), seed)
	f.Add(uint32(0xffffffff), uint32(9), int64(0), uint32(100), uint32(100), seed)
	f.Add(uint32(0), uint32(9), int64(0), uint32(pageSize-2), uint32(100), seed)
	f.Add(uint32(0), uint32(9), int64(0), uint32(0xffffffff), uint32(0xffffffff), seed)
	f.Fuzz(func(t *testing.T, refPtr, refLen uint32, offset int64, outPtr, outCap uint32, data []byte) {
		mem := mod.Memory()
		if len(data) <= pageSize {
			mem.Write(0, data)
		}
		ref, _ := mem.Read(refPtr, refLen)
		ref = append([]byte(nil), ref...)
		att, _ := fuzzAttempt()
		rc := callDirect(context.Background(), att, mod, "artifact_read",
			uint64(refPtr), uint64(refLen), uint64(offset), uint64(outPtr), uint64(outCap))
		checkStatus(t, att, rc)
		switch {
		case refLen > ArtifactRefMax:
			require.Equal(t, StatusTooLarge, rc)
		case !inRange(refPtr, refLen):
			require.Equal(t, StatusRange, rc)
		case offset < 0:
			require.Equal(t, StatusInvalid, rc)
		case !inRange(outPtr, outCap):
			require.Equal(t, StatusRange, rc)
		default:
			art := []byte("artifact bytes")
			switch {
			case refLen == 0:
				require.Equal(t, StatusInvalid, rc)
			case string(ref) != "sha256:aa":
				require.Contains(t, []int32{StatusInvalid, StatusNotFound}, rc)
			case offset >= int64(len(art)):
				require.Equal(t, int32(0), rc)
			default:
				want := art[offset:]
				if len(want) > int(outCap) {
					want = want[:outCap]
				}
				require.Equal(t, int32(len(want)), rc)
				got, _ := mem.Read(outPtr, uint32(rc))
				require.Equal(t, string(want), string(got))
			}
		}
	})
}

func FuzzHostLastError(f *testing.F) {
	mod := memoryModule(f)
	f.Add("call: unknown capability", uint32(0), uint32(100))
	f.Add("call: unknown capability", uint32(0), uint32(3))
	f.Add("", uint32(0xffffffff), uint32(0xffffffff))
	f.Add("x", uint32(pageSize-1), uint32(1))
	f.Add("xy", uint32(pageSize-1), uint32(2))
	f.Fuzz(func(t *testing.T, msg string, outPtr, outCap uint32) {
		att, _ := fuzzAttempt()
		att.fail(StatusDenied, msg)
		stored := att.lastErr
		require.LessOrEqual(t, len(stored), LastErrorMax)
		stack := []uint64{api.EncodeU32(outPtr), api.EncodeU32(outCap)}
		hostLastError(context.WithValue(context.Background(), attemptKey{}, att), mod, stack)
		rc := api.DecodeI32(stack[0])
		switch {
		case uint32(len(stored)) > outCap:
			require.Equal(t, int32(len(stored)), rc)
		case !inRange(outPtr, uint32(len(stored))):
			require.Equal(t, StatusRange, rc)
		default:
			require.Equal(t, int32(len(stored)), rc)
			got, _ := mod.Memory().Read(outPtr, uint32(rc))
			require.Equal(t, stored, string(got))
		}
		require.Equal(t, stored, att.lastErr, "kept")
		require.Equal(t, 1, att.calls)
	})
}
