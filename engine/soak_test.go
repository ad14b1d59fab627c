package engine_test

import (
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lhengine/lhengine/internal/testwasm"
)

// rssAnon reads the process's anonymous resident memory (heap, stacks,
// runtime) from /proc (Linux). File-backed pages (Badger's memory-mapped
// tables and logs, which the kernel can drop at will) are left out: they
// follow the size of the store, not the engine's footprint.
func rssAnon(b *testing.B) int64 { return rssField(b, "RssAnon:") }

// rssField reads a field of /proc/self/status given in kB, in bytes.
func rssField(b *testing.B, field string) int64 {
	b.Helper()
	raw, err := os.ReadFile("/proc/self/status")
	if err != nil {
		b.Skipf("no /proc/self/status: %v", err)
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if v, ok := strings.CutPrefix(line, field); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			require.NoError(b, err)
			return kb << 10
		}
	}
	b.Skipf("no %s in /proc/self/status", field)
	return 0
}

// BenchmarkSequentialTasksRSS runs b.N small three-step tasks one after the
// other in one engine, the way a long-running worker does, and reports the
// anonymous resident memory after the first 1,000 and at the end, and the
// growth per task in between: a process that works for weeks must stay flat.
//
//	go test -run '^$' -bench SequentialTasksRSS -benchtime 10000x ./engine/
func BenchmarkSequentialTasksRSS(b *testing.B) {
	e, path := benchEngine(b, testwasm.CGuest(b, "pipeline"), serialTask(3, `{ mode = "echo", at = "x" }`), false)
	warm := min(b.N, 1000)
	var base int64
	b.ResetTimer()
	for i := range b.N {
		runTask(b, e, path, 0)
		if i+1 == warm {
			runtime.GC()
			base = rssAnon(b)
		}
	}
	b.StopTimer()
	runtime.GC()
	end := rssAnon(b)
	b.ReportMetric(float64(base)/(1<<20), "anon-MiB-at-1k")
	b.ReportMetric(float64(end)/(1<<20), "anon-MiB-at-end")
	if n := b.N - warm; n > 0 {
		b.ReportMetric(float64(end-base)/float64(n), "anon-B/task")
	}
	b.ReportMetric(0, "ns/op")
}
