package main

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

// memoryLimitDefault is the default of --memory-limit: the heap size below
// which the process keeps itself unless told otherwise
// (LHENGINE_MEMORY_LIMIT, or GOMEMLIMIT, which Go reads itself).
//
// Why a limit at all: Badger builds every table it flushes or compacts in
// buffers of Go's heap (tens of MiB each, kept in a pool of up to eight),
// and Go's collector lets the heap grow to twice what is live before it
// collects, so resident memory followed twice Badger's high-water mark. A
// soft limit makes the collector reclaim dropped buffers sooner
// (specs/RATIONALE.md; docs/BENCHMARKS.md, "Memory").
func memoryLimitDefault() string {
	if v := os.Getenv("LHENGINE_MEMORY_LIMIT"); v != "" {
		return v
	}
	return "192MiB"
}

// parseMemoryLimit reads --memory-limit: the floor of the soft limit in
// bytes, or 0 for "off".
func parseMemoryLimit(s string) (int64, error) {
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

// memoryGovernor keeps Go's soft memory limit at the larger of its floor
// and 1.25 times the heap that was live at the end of the last collection.
// Below the floor the collector works as Go's defaults have it; near the
// floor the limit makes it collect before the heap doubles; a process whose
// live heap outgrows the floor (a large task's values, many plugin
// instances) gets a limit that grows with it, so the collector never runs
// without end against a limit it cannot meet.
type memoryGovernor struct {
	floor int64
	// adjusted, if set, hears every adjustment (tests).
	adjusted func(live, limit int64)

	mu      sync.Mutex // orders adjustments and stop
	stopped bool
	sample  []metrics.Sample
	limit   int64 // the limit set last
}

// governMemory is set by main: only a process of its own sets the runtime's
// limit (tests run many commands in one process).
var governMemory bool

// startMemoryGovernor sets the limit and keeps it adjusted after every
// collection until stop. With GOMEMLIMIT set the operator has chosen, and
// nothing is changed.
func startMemoryGovernor(floor int64) (stop func()) {
	if floor <= 0 || os.Getenv("GOMEMLIMIT") != "" {
		return func() {}
	}
	g := newMemoryGovernor(floor)
	g.start()
	return g.stop
}

func newMemoryGovernor(floor int64) *memoryGovernor {
	return &memoryGovernor{floor: floor, sample: []metrics.Sample{{Name: "/gc/heap/live:bytes"}}}
}

func (g *memoryGovernor) start() {
	g.adjust()
	g.arm()
}

// stop ends the adjustments and lifts the limit.
func (g *memoryGovernor) stop() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.stopped = true
	debug.SetMemoryLimit(math.MaxInt64)
}

// arm runs adjust once after the next collection: the cleanup of an object
// nothing refers to runs once a collection has found it unreachable, and
// re-arms itself. It runs on the runtime's cleanup goroutine, so the
// governor has no goroutine of its own.
func (g *memoryGovernor) arm() {
	sentinel := new([16]byte) // not a tiny allocation: its cleanup runs
	runtime.AddCleanup(sentinel, func(g *memoryGovernor) {
		if g.adjust() {
			g.arm()
		}
	}, g)
}

// adjust sets the limit from the live heap; it reports false once stopped.
func (g *memoryGovernor) adjust() bool {
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
