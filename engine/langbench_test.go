package engine_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lhengine/lhengine/engine"
	"github.com/lhengine/lhengine/internal/testwasm"
	"github.com/lhengine/lhengine/ledger"
)

// BenchmarkFanOutLanguages: the per-unit cost of a plugin in each SDK's
// language on the same fan-out: 1,000 items, concurrency 16, fsync on, each
// unit an echo of the conformance guest written with that language's SDK
// (testdata/guests/{c,go,rust,assemblyscript}/conformance), every unit in
// a fresh instance. cpu-ms/unit is the process's CPU time (user + system)
// per unit; the plugin is compiled before the timing.
func BenchmarkFanOutLanguages(b *testing.B) {
	const items = 1000
	task := fmt.Sprintf(`
task "fan" {
  step "each" {
    plugin      = "step.wasm"
    for_each    = range(%d)
    concurrency = 16
    input       = { mode = "echo" }
  }
}
`, items)
	root := testwasm.ModuleRoot(b)
	guests := []struct {
		lang  string
		build func() string
	}{
		{"c", func() string { return testwasm.BuildC(b, filepath.Join(root, "testdata/guests/c/conformance.c")) }},
		{"go", func() string { return testwasm.BuildGo(b, filepath.Join(root, "testdata/guests/go/conformance")) }},
		{"rust", func() string {
			return testwasm.BuildRust(b, filepath.Join(root, "testdata/guests/rust/conformance/main.rs"))
		}},
		{"assemblyscript", func() string {
			return testwasm.BuildAssemblyScript(b, filepath.Join(root, "testdata/guests/assemblyscript/conformance/index.ts"))
		}},
	}
	for _, g := range guests {
		b.Run(g.lang, func(b *testing.B) {
			ctx := context.Background()
			e, path := benchEngine(b, g.build(), task, false)
			one := func() {
				t, _, err := e.Submit(ctx, path, engine.SubmitOptions{})
				require.NoError(b, err)
				require.NoError(b, e.Work(ctx, engine.WorkOptions{Task: t.ID, Concurrency: 16, ExitWhenIdle: true}))
				got, err := e.Task(ctx, t.ID)
				require.NoError(b, err)
				require.Equal(b, ledger.Succeeded, got.Status, got.Reason)
			}
			one() // compile the plugin outside the timing
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
		})
	}
}
