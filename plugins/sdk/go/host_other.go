//go:build !wasip1

package sdk

// Outside a Wasm host the host calls do nothing, so handlers can be
// unit-tested natively: Log discards, Heartbeat succeeds, and the
// capabilities report ErrUnavailable.

func hostLog(Level, string) int32 { return 0 }

func hostHeartbeat() int32 { return 0 }

func hostCall(string, []byte, []byte) int32 { return int32(ErrUnavailable) }

func hostResult([]byte) int32 { return int32(ErrNotFound) }

func hostArtifactPut([]byte, []byte, []byte) int32 { return int32(ErrUnavailable) }

func hostArtifactRead(string, int64, []byte) int32 { return int32(ErrUnavailable) }

func hostLastError(out []byte) int32 {
	if len(out) < len(offHostMessage) {
		return int32(len(offHostMessage))
	}
	return int32(copy(out, offHostMessage))
}

const offHostMessage = "not running under an lhengine host"
