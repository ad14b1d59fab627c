package engine_test

import (
	"path/filepath"
	"testing"

	"github.com/lhengine/lhengine/internal/testwasm"
)

// BenchmarkFanOutLanguages: the per-unit cost of a plugin in each SDK's
// language on the same fan-out: 1,000 items, concurrency 16, fsync on, each
// unit an echo of the conformance guest written with that language's SDK
// (testdata/guests/{c,go,rust,assemblyscript}/conformance), every unit in
// a fresh instance. cpu-ms/unit is the process's CPU time (user + system)
// per unit; the plugin is compiled before the timing.
func BenchmarkFanOutLanguages(b *testing.B) {
	const items = 1000
	task := echoFanOut(items)
	root := testwasm.ModuleRoot(b)
	guests := []struct {
		lang  string
		build func() string
	}{
		{"c", func() string { return testwasm.CGuest(b, "conformance") }},
		{"go", func() string { return testwasm.GoGuest(b, "conformance") }},
		{"rust", func() string {
			return testwasm.BuildRust(b, filepath.Join(root, "testdata/guests/rust/conformance/main.rs"))
		}},
		{"assemblyscript", func() string {
			return testwasm.BuildAssemblyScript(b, filepath.Join(root, "testdata/guests/assemblyscript/conformance/index.ts"))
		}},
	}
	for _, g := range guests {
		b.Run(g.lang, func(b *testing.B) {
			e, path := benchEngine(b, g.build(), task, false)
			runTask(b, e, path, 16) // compile the plugin outside the timing
			timeUnits(b, items, func() { runTask(b, e, path, 16) })
		})
	}
}
