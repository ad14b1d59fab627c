// Package memlimit keeps the process's heap below a soft limit that follows
// what is live (--memory-limit): the collector reclaims freed memory before
// the heap passes the limit, and the limit rises to 1.25 times what is live
// when that is more. specs/RATIONALE.md, "Why does lhengine set a soft
// memory limit, and why one that follows the live heap?", says why.
package memlimit

import (
	"fmt"
	"math"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"strings"
	"sync"

	"github.com/lhengine/lhengine/internal/bytesize"
)

// Default is the default of --memory-limit: the heap size below
// which the process keeps itself unless told otherwise
// (LHENGINE_MEMORY_LIMIT, or GOMEMLIMIT, which Go reads itself).
//
// Why a limit at all: Badger builds every table it flushes or compacts in
// buffers of Go's heap (tens of MiB each, kept in a pool of up to eight),
// and Go's collector lets the heap grow to twice what is live before it
// collects, so resident memory followed twice Badger's high-water mark. A
// soft limit makes the collector reclaim dropped buffers sooner
// (specs/RATIONALE.md; docs/BENCHMARKS.md, "Memory").
func Default() string {
	if v := os.Getenv("LHENGINE_MEMORY_LIMIT"); v != "" {
		return v
	}
	return "192MiB"
}

// Parse reads --memory-limit: the floor of the soft limit in
// bytes, or 0 for "off".
func Parse(s string) (int64, error) {
	if strings.EqualFold(strings.TrimSpace(s), "off") {
		return 0, nil
	}
	n, err := bytesize.Parse("--memory-limit", s)
	if err != nil {
		return 0, err
	}
	if n < 32<<20 {
		return 0, fmt.Errorf("--memory-limit %s: want at least 32MiB, or off (a lower limit would only make the collector run without end)", s)
	}
	if n > math.MaxInt64 {
		n = math.MaxInt64
	}
	return int64(n), nil
}

// BeforeStoreClose returns the heap's free memory to the operating system
// (a collection, then all free pages released). It is meant for the moment
// a process's work has stopped and its embedded store is about to close:
// closing the store flushes Badger's memtable into a table that Badger
// builds in new heap buffers, about twice the memtable's contents, and
// without this those buffers come on top of the heap the work left, whose
// freed pages the runtime keeps resident until its scavenger returns them.
// For a 3,000-item fan-out that close was the process's peak, 10 MiB above
// its peak while it ran (docs/BENCHMARKS.md, "Performance II", "Not done").
func BeforeStoreClose() {
	debug.FreeOSMemory()
}

// governor keeps Go's soft memory limit at the larger of its floor
// and 1.25 times the heap that was live at the end of the last collection.
// Below the floor the collector works as Go's defaults have it; near the
// floor the limit makes it collect before the heap doubles; a process whose
// live heap outgrows the floor (a large task's values, many plugin
// instances) gets a limit that grows with it, so the collector never runs
// without end against a limit it cannot meet.
type governor struct {
	floor int64
	// adjusted, if set, hears every adjustment (tests).
	adjusted func(live, limit int64)

	mu      sync.Mutex // orders adjustments and stop
	stopped bool
	sample  []metrics.Sample
	limit   int64 // the limit set last
}

// Start sets the limit and keeps it adjusted after every
// collection until stop. With GOMEMLIMIT set the operator has chosen, and
// nothing is changed.
func Start(floor int64) (stop func()) {
	if floor <= 0 || os.Getenv("GOMEMLIMIT") != "" {
		return func() {}
	}
	g := newGovernor(floor)
	g.start()
	return g.stop
}

func newGovernor(floor int64) *governor {
	return &governor{floor: floor, sample: []metrics.Sample{{Name: "/gc/heap/live:bytes"}}}
}

func (g *governor) start() {
	g.adjust()
	g.arm()
}

// stop ends the adjustments and lifts the limit.
func (g *governor) stop() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.stopped = true
	debug.SetMemoryLimit(math.MaxInt64)
}

// arm runs adjust once after the next collection: the cleanup of an object
// nothing refers to runs once a collection has found it unreachable, and
// re-arms itself. It runs on the runtime's cleanup goroutine, so the
// governor has no goroutine of its own.
func (g *governor) arm() {
	sentinel := new([16]byte) // not a tiny allocation: its cleanup runs
	runtime.AddCleanup(sentinel, func(g *governor) {
		if g.adjust() {
			g.arm()
		}
	}, g)
}

// adjust sets the limit from the live heap; it reports false once stopped.
func (g *governor) adjust() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.stopped {
		return false
	}
	metrics.Read(g.sample)
	var live int64
	if s := g.sample[0]; s.Value.Kind() == metrics.KindUint64 {
		live = int64(min(s.Value.Uint64(), math.MaxInt64/2))
	}
	limit := max(g.floor, live+live/4)
	if limit != g.limit {
		g.limit = limit
		debug.SetMemoryLimit(limit)
	}
	if g.adjusted != nil {
		g.adjusted(live, limit)
	}
	return true
}
