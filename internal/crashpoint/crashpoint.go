// Package crashpoint makes the process die abruptly at named durable
// boundaries, so tests can prove that a crash at any of them loses and
// repeats nothing. It is switched on by the environment variable
// LHENGINE_CRASH_AT, read once at start-up:
//
//	LHENGINE_CRASH_AT=effect.after_perform       die the first time the point is reached
//	LHENGINE_CRASH_AT=unit.after_commit@3        die the third time
//
// Dying is SIGKILL sent to the process itself: no deferred function, no
// flush, no goodbye. It is a process crash, not a power loss: the kernel
// keeps every write the process made, synced or not, and Badger's files are
// what the kernel has. So a crash point proves that a restarted process
// loses and repeats nothing, but it cannot catch a missing fsync; the
// store's own tests do that (store.TestCommitIsInTheLastSyncedImage copies
// the files at each sync, which is what a power loss would leave).
//
// Where there is no SIGKILL (Windows), the process terminates itself
// (TerminateProcess), or failing that exits at once with status 137; see
// crashpoint_other.go.
package crashpoint

import (
	"os"
	"strconv"
	"strings"
	"sync/atomic"
)

// The named points. Each sits at a durable boundary of a work unit or of
// the effect journal.
const (
	UnitBeforeCommit   = "unit.before_commit"   // attempt finished, outcome not committed
	UnitAfterCommit    = "unit.after_commit"    // commit synced
	EffectAfterIntent  = "effect.after_intent"  // intent synced, effect not performed
	EffectAfterPerform = "effect.after_perform" // effect performed, outcome not recorded
	EffectAfterOutcome = "effect.after_outcome" // outcome synced, unit not committed
	ArtifactAfterPut   = "artifact.after_put"   // artifact and provenance synced
	// ModelAfterRecord: a model call's response and cost synced, unit not
	// committed. Only steps that call models reach it, so it is not among
	// Points, whose matrix runs a task that calls none.
	ModelAfterRecord = "model.after_record"
	// NotifyAfterIntent: a notification's intent synced, not sent;
	// NotifyAfterSend: sent and answered, its outcome not recorded. Only
	// tasks with a notify block reach them, so they are not among Points.
	NotifyAfterIntent = "notify.after_intent"
	NotifyAfterSend   = "notify.after_send"
)

// Points lists every point, for tests that run a matrix over them.
var Points = []string{UnitBeforeCommit, UnitAfterCommit, EffectAfterIntent, EffectAfterPerform, EffectAfterOutcome, ArtifactAfterPut}

var (
	armed string
	after int64 = 1
	hits  atomic.Int64
)

func init() {
	v := os.Getenv("LHENGINE_CRASH_AT")
	if v == "" {
		return
	}
	name, n, ok := strings.Cut(v, "@")
	if ok {
		if k, err := strconv.ParseInt(n, 10, 64); err == nil && k > 0 {
			after = k
		}
	}
	armed = name
}

// Armed reports whether point is the one this process dies at.
func Armed(point string) bool { return armed != "" && armed == point }

// Reached marks that the process reached point; if the point is armed and
// this is the chosen hit, the process dies here.
func Reached(point string) {
	if armed == "" || point != armed {
		return
	}
	if hits.Add(1) == after {
		die() // crashpoint_unix.go, crashpoint_other.go; never returns
	}
}
