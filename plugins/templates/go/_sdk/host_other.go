//go:build !wasip1

package sdk

// Outside a Wasm host the host calls do nothing, so handlers can be
// unit-tested natively: Log discards, Heartbeat succeeds, and the
// capabilities report ErrUnavailable.
//
// They are variables so that the package's own tests can play the host and
// check how the SDK maps each status the ABI defines; nothing else assigns
// them.
var (
	hostLog       = func(Level, string) int32 { return 0 }
	hostHeartbeat = func() int32 { return 0 }
	hostCall      = func(string, []byte, []byte) int32 { return int32(ErrUnavailable) }
	hostResult    = func([]byte) int32 { return int32(ErrNotFound) }

	hostArtifactPut  = func([]byte, []byte, []byte) int32 { return int32(ErrUnavailable) }
	hostArtifactRead = func(string, int64, []byte) int32 { return int32(ErrUnavailable) }
	hostLastError    = offHostLastError
	hostServeNext    = func() int32 { return int32(ErrUnavailable) }
)

func offHostLastError(out []byte) int32 {
	if len(out) < len(offHostMessage) {
		return int32(len(offHostMessage))
	}
	return int32(copy(out, offHostMessage))
}

const offHostMessage = "not running under an lhengine host"
