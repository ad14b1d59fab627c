package memlimit

import (
	"math"
	"runtime"
	"runtime/debug"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestParse(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]int64{"off": 0, "OFF": 0, "256MiB": 256 << 20, "32MiB": 32 << 20, "1GB": 1e9} {
		got, err := Parse(in)
		require.NoError(t, err, in)
		require.Equal(t, want, got, in)
	}
	for in, msg := range map[string]string{
		"31MiB": "want at least 32MiB, or off",
		"0":     "want at least 32MiB",
		"lots":  "--memory-limit must be a whole number followed by a unit",
		"1TiB":  `"TiB" is not a size unit`,
	} {
		_, err := Parse(in)
		require.ErrorContains(t, err, msg, in)
	}
}

// TestMemoryGovernorFollowsTheLiveHeap: the soft limit is the floor while
// little is live, rises to 1.25 times the live heap when that is more (a
// limit below what is live would only make the collector run without end),
// comes back down when the heap is freed, and is lifted by stop. Not
// parallel: the limit is the process's.
func TestMemoryGovernorFollowsTheLiveHeap(t *testing.T) {
	prev := debug.SetMemoryLimit(-1)
	defer debug.SetMemoryLimit(prev)
	const floor = 64 << 20
	type adjustment struct{ live, limit int64 }
	adjusted := make(chan adjustment, 1)
	g := newGovernor(floor)
	g.adjusted = func(live, limit int64) {
		select {
		case <-adjusted: // keep only the newest
		default:
		}
		adjusted <- adjustment{live, limit}
	}
	runtime.GC()
	g.start()
	defer g.stop()
	require.Equal(t, int64(floor), debug.SetMemoryLimit(-1))

	// waitFor collects until an adjustment satisfies ok (each collection
	// runs the governor once, on the runtime's cleanup goroutine).
	waitFor := func(what string, ok func(adjustment) bool) adjustment {
		t.Helper()
		deadline := time.After(time.Minute)
		for {
			runtime.GC()
			select {
			case a := <-adjusted:
				if ok(a) {
					return a
				}
			case <-deadline:
				t.Fatalf("no adjustment %s after a minute of collections", what)
			}
		}
	}

	live := make([]*[1 << 20]byte, 128) // 128 MiB live
	for i := range live {
		live[i] = new([1 << 20]byte)
	}
	a := waitFor("to 1.25 times 128 MiB", func(a adjustment) bool { return a.live >= 128<<20 })
	require.Equal(t, a.live+a.live/4, a.limit)
	require.Equal(t, a.limit, debug.SetMemoryLimit(-1))
	runtime.KeepAlive(live)

	live = nil
	waitFor("back to the floor", func(a adjustment) bool { return a.limit == floor })
	require.Equal(t, int64(floor), debug.SetMemoryLimit(-1))

	g.stop()
	require.Equal(t, int64(math.MaxInt64), debug.SetMemoryLimit(-1))
}

// TestMemoryLimitLeftToGOMEMLIMIT: an operator's GOMEMLIMIT is Go's own
// setting, and the governor does not start over it.
func TestMemoryLimitLeftToGOMEMLIMIT(t *testing.T) {
	prev := debug.SetMemoryLimit(-1)
	defer debug.SetMemoryLimit(prev)
	t.Setenv("GOMEMLIMIT", "1GiB")
	debug.SetMemoryLimit(1 << 30)
	stop := Start(64 << 20)
	require.Equal(t, int64(1<<30), debug.SetMemoryLimit(-1))
	stop()
	require.Equal(t, int64(1<<30), debug.SetMemoryLimit(-1))
}
