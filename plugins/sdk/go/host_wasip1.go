//go:build wasip1

package sdk

import "unsafe"

//go:wasmimport lhengine_v1 log
func lhLog(level int32, ptr unsafe.Pointer, n int32) int32

//go:wasmimport lhengine_v1 heartbeat
func lhHeartbeat() int32

func hostLog(level Level, msg string) int32 {
	return lhLog(int32(level), unsafe.Pointer(unsafe.StringData(msg)), int32(len(msg)))
}

func hostHeartbeat() int32 { return lhHeartbeat() }
