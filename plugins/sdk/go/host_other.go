//go:build !wasip1

package sdk

// Outside a Wasm host the host calls do nothing, so handlers can be
// unit-tested natively.

func hostLog(Level, string) int32 { return 0 }

func hostHeartbeat() int32 { return 0 }
