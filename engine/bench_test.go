package engine_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lhengine/lhengine/engine"
	"github.com/lhengine/lhengine/internal/testwasm"
	"github.com/lhengine/lhengine/ledger"
)

// benchEngine opens an engine on disk (fsync on every commit unless noSync)
// in a folder holding the plugin and the task source.
func benchEngine(b *testing.B, wasm, task string, noSync bool) (*engine.Engine, string) {
	b.Helper()
	dir := testwasm.TaskDir(b, wasm, task)
	e, err := engine.Open(context.Background(), engine.Config{Home: filepath.Join(dir, "home"), NoSync: noSync})
	require.NoError(b, err)
	b.Cleanup(func() { e.Close(context.Background()) })
	return e, filepath.Join(dir, "task.hcl")
}

// runTask submits the task file at path and works it to its success, conc
// units at once (0: Work's default).
func runTask(b *testing.B, e *engine.Engine, path string, conc int) {
	b.Helper()
	runTaskWatched(b, e, path, conc, nil)
}

// runTaskWatched is runTask calling onCommit after each commit.
func runTaskWatched(b *testing.B, e *engine.Engine, path string, conc int, onCommit func(*ledger.Task)) {
	b.Helper()
	ctx := context.Background()
	t, _, err := e.Submit(ctx, path, engine.SubmitOptions{})
	require.NoError(b, err)
	require.NoError(b, e.Work(ctx, engine.WorkOptions{Task: t.ID, Concurrency: conc, ExitWhenIdle: true, OnCommit: onCommit}))
	got, err := e.Task(ctx, t.ID)
	require.NoError(b, err)
	require.Equal(b, ledger.Succeeded, got.Status, got.Reason)
}

// timeUnits runs one b.N times, timed, and reports the units of work a
// second and the process's CPU time (user + system) a unit, each run
// being items units.
func timeUnits(b *testing.B, items int, one func()) {
	b.ResetTimer()
	cpu0 := cpuTime(b)
	for range b.N {
		one()
	}
	cpu := cpuTime(b) - cpu0
	b.StopTimer()
	b.ReportMetric(float64(b.N*items)/b.Elapsed().Seconds(), "units/s")
	b.ReportMetric(float64(cpu.Microseconds())/1e3/float64(b.N*items), "cpu-ms/unit")
	b.ReportMetric(0, "ns/op")
}

// echoFanOut is a task of one step: a fan-out of n echo units, 16 at once.
func echoFanOut(n int) string {
	return fmt.Sprintf(`
task "fan" {
  step "each" {
    plugin      = "step.wasm"
    for_each    = range(%d)
    concurrency = 16
    input       = { mode = "echo" }
  }
}
`, n)
}

func serialTask(steps int, input string) string {
	var sb strings.Builder
	sb.WriteString("task \"serial\" {\n")
	for i := range steps {
		fmt.Fprintf(&sb, "  step \"s%d\" {\n    plugin = \"step.wasm\"\n    input  = %s\n  }\n", i, input)
	}
	sb.WriteString("}\n")
	return sb.String()
}

// runSerial submits and works one task of `steps` plain steps per iteration
// and reports the cost of one durable step end to end: claim, input
// evaluation, a fresh guest instance, commit with fsync, advance.
func runSerial(b *testing.B, wasm, input string, noSync bool) {
	runSerialN(b, wasm, input, noSync, 50)
}

func runSerialN(b *testing.B, wasm, input string, noSync bool, steps int) {
	e, path := benchEngine(b, wasm, serialTask(steps, input), noSync)
	runTask(b, e, path, 0) // compile the plugin (once per process) outside the timing
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		runTask(b, e, path, 0)
	}
	b.StopTimer()
	per := float64(b.Elapsed().Nanoseconds()) / float64(b.N*steps)
	b.ReportMetric(per/1e6, "ms/step")
	b.ReportMetric(0, "ns/op")
}

// BenchmarkSerialStepsC: (a) serial trivial steps of a C guest, durable.
func BenchmarkSerialStepsC(b *testing.B) {
	wasm := testwasm.CGuest(b, "pipeline")
	b.Run("fsync", func(b *testing.B) { runSerial(b, wasm, `{ mode = "echo" }`, false) })
	b.Run("nosync", func(b *testing.B) { runSerial(b, wasm, `{ mode = "echo" }`, true) })
}

// BenchmarkSerialStepsLength: the cost of a durable serial step as the
// pipeline grows (the task record holds every step's state).
func BenchmarkSerialStepsLength(b *testing.B) {
	wasm := testwasm.CGuest(b, "pipeline")
	for _, n := range []int{50, 400, 1000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) { runSerialN(b, wasm, `{ mode = "echo" }`, false, n) })
	}
}

// BenchmarkSerialStepsGo: (b) the same with a Go (wasip1) guest using the SDK.
func BenchmarkSerialStepsGo(b *testing.B) {
	wasm := testwasm.GoGuest(b, "conformance")
	b.Run("fsync", func(b *testing.B) { runSerial(b, wasm, `{ mode = "echo" }`, false) })
}

// BenchmarkFanOutC: (c) a 10,000-item fan-out of a C guest, concurrency 16,
// every unit's commit fsynced (group commits share one sync). cpu-ms/unit
// is the process's CPU time (user + system) per unit: on a shared machine
// it moves less with the load than units/s.
func BenchmarkFanOutC(b *testing.B) {
	wasm := testwasm.CGuest(b, "pipeline")
	const items = 10000
	task := fmt.Sprintf(`
task "fan" {
  step "each" {
    plugin      = "step.wasm"
    for_each    = flatten([for i in range(%d) : range(1000)])
    concurrency = 16
    input       = { mode = "item" }
  }
}
`, items/1000)
	for _, noSync := range []bool{false, true} {
		name := "fsync"
		if noSync {
			name = "nosync"
		}
		b.Run(name, func(b *testing.B) {
			e, path := benchEngine(b, wasm, task, noSync)
			timeUnits(b, items, func() { runTask(b, e, path, 16) })
			if syncs, ops := engine.StoreOf(e).SyncStats(); syncs > 0 {
				b.ReportMetric(float64(ops)/float64(syncs), "ops/sync")
			}
		})
	}
}

// BenchmarkFanOutGo: a 1,000-item fan-out of the Go-SDK conformance guest,
// concurrency 16, fsync on: "fresh" is the plain plugin (a fresh instance
// per unit, the Go runtime starting each time), "reuse" the same handler
// declared stateless (testdata/guests/go/stateless), whose instances serve
// many units each. cpu-ms/unit is the process's CPU time (user + system)
// per unit; peak-mem-MiB the most memory the process held (anonymous and
// shared, not its files: /proc/self/status RssAnon + RssShmem, sampled
// every 50 commits), which the instances' memories and their images are.
// Run each alone (-bench 'FanOutGo/reuse'): the peak is the process's.
func BenchmarkFanOutGo(b *testing.B) {
	const items = 1000
	task := echoFanOut(items)
	for _, g := range []struct{ name, guest string }{{"fresh", "conformance"}, {"reuse", "stateless"}} {
		b.Run(g.name, func(b *testing.B) {
			wasm := testwasm.GoGuest(b, g.guest)
			e, path := benchEngine(b, wasm, task, false)
			runTask(b, e, path, 16) // compile the plugin outside the timing
			var mu sync.Mutex       // commits end in the workers' goroutines
			var peak int64
			n := 0
			sample := func(*ledger.Task) {
				mu.Lock()
				defer mu.Unlock()
				if n++; n%50 == 0 {
					peak = max(peak, rssField(b, "RssAnon:")+rssField(b, "RssShmem:"))
				}
			}
			timeUnits(b, items, func() { runTaskWatched(b, e, path, 16, sample) })
			b.ReportMetric(float64(peak)/(1<<20), "peak-mem-MiB")
		})
	}
}
