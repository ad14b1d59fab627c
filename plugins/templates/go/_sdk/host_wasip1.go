//go:build wasip1

package sdk

import "unsafe"

//go:wasmimport lhengine_v1 log
func lhLog(level int32, ptr unsafe.Pointer, n int32) int32

//go:wasmimport lhengine_v1 heartbeat
func lhHeartbeat() int32

//go:wasmimport lhengine_v1 call
func lhCall(namePtr unsafe.Pointer, nameLen int32, reqPtr unsafe.Pointer, reqLen int32, outPtr unsafe.Pointer, outCap int32) int32

//go:wasmimport lhengine_v1 result
func lhResult(outPtr unsafe.Pointer, outCap int32) int32

//go:wasmimport lhengine_v1 artifact_put
func lhArtifactPut(metaPtr unsafe.Pointer, metaLen int32, dataPtr unsafe.Pointer, dataLen int32, outPtr unsafe.Pointer, outCap int32) int32

//go:wasmimport lhengine_v1 artifact_read
func lhArtifactRead(refPtr unsafe.Pointer, refLen int32, offset int64, outPtr unsafe.Pointer, outCap int32) int32

//go:wasmimport lhengine_v1 last_error
func lhLastError(outPtr unsafe.Pointer, outCap int32) int32

//go:wasmimport lhengine_v1 serve_next
func lhServeNext() int32

func hostLog(level Level, msg string) int32 {
	return lhLog(int32(level), unsafe.Pointer(unsafe.StringData(msg)), int32(len(msg)))
}

func hostHeartbeat() int32 { return lhHeartbeat() }

func hostCall(name string, req, out []byte) int32 {
	return lhCall(unsafe.Pointer(unsafe.StringData(name)), int32(len(name)),
		unsafe.Pointer(unsafe.SliceData(req)), int32(len(req)),
		unsafe.Pointer(unsafe.SliceData(out)), int32(len(out)))
}

func hostResult(out []byte) int32 {
	return lhResult(unsafe.Pointer(unsafe.SliceData(out)), int32(len(out)))
}

func hostArtifactPut(meta, data, out []byte) int32 {
	return lhArtifactPut(unsafe.Pointer(unsafe.SliceData(meta)), int32(len(meta)),
		unsafe.Pointer(unsafe.SliceData(data)), int32(len(data)),
		unsafe.Pointer(unsafe.SliceData(out)), int32(len(out)))
}

func hostArtifactRead(ref string, offset int64, out []byte) int32 {
	return lhArtifactRead(unsafe.Pointer(unsafe.StringData(ref)), int32(len(ref)), offset,
		unsafe.Pointer(unsafe.SliceData(out)), int32(len(out)))
}

func hostLastError(out []byte) int32 {
	return lhLastError(unsafe.Pointer(unsafe.SliceData(out)), int32(len(out)))
}

func hostServeNext() int32 { return lhServeNext() }
