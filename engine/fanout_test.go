package engine_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lhengine/lhengine/engine"
	"github.com/lhengine/lhengine/internal/testwasm"
	"github.com/lhengine/lhengine/ledger"
)

// runTimeFanOut lists n items in its first step; the second fans out over
// that output, so its items are planned while the task runs, and the last
// reads every output. (lhengine bench runs the same task.)
func runTimeFanOut(n int) string {
	var ranges []string // range() gives at most 1,024 values
	for left := n; left > 0; left -= 1000 {
		ranges = append(ranges, fmt.Sprintf("range(%d)", min(left, 1000)))
	}
	return fmt.Sprintf(`task "large" {
  step "list" {
    plugin = "step.wasm"
    input  = { mode = "echo", items = flatten([%s]) }
  }
  step "each" {
    plugin      = "step.wasm"
    for_each    = step.list.output.items
    concurrency = 16
    input       = { mode = "item" }
  }
  step "count" {
    plugin = "step.wasm"
    input  = { mode = "echo", n = length(step.each.output) }
  }
}
`, strings.Join(ranges, ", "))
}

func TestFanOutPlannedAtRunTimeInBatches(t *testing.T) {
	t.Parallel()
	const items = 2000 // two planning batches
	b := setup(t, runTimeFanOut(items))
	task := b.submit(t, nil)
	require.NoError(t, b.e.Work(b.ctx, engine.WorkOptions{Task: task.ID, Concurrency: 16, ExitWhenIdle: true}))
	got, err := b.e.Task(b.ctx, task.ID)
	require.NoError(t, err)
	require.Equal(t, ledger.Succeeded, got.Status, got.Reason)
	require.Equal(t, items, got.Steps[1].Units)
	require.Equal(t, items, got.Steps[1].Done)
	require.Zero(t, got.Reclaims, "no unit ran twice")
	require.JSONEq(t, fmt.Sprintf(`{"mode":"echo","n":%d}`, items), b.output(t, task.ID, "count"))
}

// BenchmarkFanOutPlanned: a fan-out of a C guest planned at run time (in
// planning transactions of 1,000 items), durable, concurrency 16, at 3,000
// and at 100,000 items: the cost of a unit must not grow with the fan-out.
// Reports units/s over the engine's work (submit to the last step's commit,
// the last step reading every output), the process's CPU time per unit, the
// heap in use per item after the run (live heap, after a GC) and the peak
// growth of anonymous resident memory during the run per item, sampled at
// every 1,000th commit and after the last step. The memory figures are the
// engine's in a process that sets no memory limit; `lhengine` sets one
// (cmd/lhengine BenchmarkRunFanOut measures the command).
func BenchmarkFanOutPlanned(b *testing.B) {
	for _, items := range []int{3000, 100_000} {
		b.Run(fmt.Sprint(items), func(b *testing.B) { benchFanOutPlanned(b, items) })
	}
}

func benchFanOutPlanned(b *testing.B, items int) {
	wasm := testwasm.CGuest(b, "pipeline")
	ctx := context.Background()
	e, path := benchEngine(b, wasm, runTimeFanOut(items), false)
	// A small run first: the plugin's compilation, the caches and Badger's
	// first tables are not what a unit costs.
	warm := filepath.Join(filepath.Dir(path), "warm.hcl")
	require.NoError(b, os.WriteFile(warm, []byte(runTimeFanOut(16)), 0o644))
	t, _, err := e.Submit(ctx, warm, engine.SubmitOptions{})
	require.NoError(b, err)
	require.NoError(b, e.Work(ctx, engine.WorkOptions{Task: t.ID, Concurrency: 16, ExitWhenIdle: true}))
	var before runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	rssBefore := rssAnon(b)
	var rssPeak int64
	b.ResetTimer()
	cpu0 := cpuTime(b)
	for range b.N {
		t, _, err := e.Submit(ctx, path, engine.SubmitOptions{})
		require.NoError(b, err)
		// The anonymous RSS is sampled at every thousandth commit: its
		// peak, not only what is left at the end, is what a machine
		// must have for the fan-out.
		n := 0
		require.NoError(b, e.Work(ctx, engine.WorkOptions{Task: t.ID, Concurrency: 16, ExitWhenIdle: true,
			OnCommit: func(*ledger.Task) {
				if n++; n%1000 == 0 {
					rssPeak = max(rssPeak, rssAnon(b))
				}
			}}))
		rssPeak = max(rssPeak, rssAnon(b))
		got, err := e.Task(ctx, t.ID)
		require.NoError(b, err)
		require.Equal(b, ledger.Succeeded, got.Status, got.Reason)
		require.Equal(b, items, got.Steps[1].Done)
		require.JSONEq(b, fmt.Sprintf(`{"mode":"echo","n":%d}`, items), string(got.Output))
	}
	cpu := cpuTime(b) - cpu0
	b.StopTimer()
	var after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&after)
	b.ReportMetric(float64(b.N*items)/b.Elapsed().Seconds(), "units/s")
	b.ReportMetric(float64(cpu.Microseconds())/1e3/float64(b.N*items), "cpu-ms/unit")
	b.ReportMetric(float64(int64(after.HeapInuse)-int64(before.HeapInuse))/float64(b.N*items), "heap-B/item")
	b.ReportMetric(float64(after.Sys)/float64(1<<20), "sys-MiB")
	b.ReportMetric(float64(rssPeak-rssBefore)/float64(items), "peak-rss-B/item")
	b.ReportMetric(0, "ns/op")
}
