package main

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lhengine/lhengine/internal/testpg"
	"github.com/lhengine/lhengine/internal/testwasm"
)

// serialTask is a chain of n steps of the pipeline guest, each reading the
// one before.
func serialTask(n int) string {
	var b strings.Builder
	b.WriteString("task \"chain\" {\n")
	for i := range n {
		fmt.Fprintf(&b, "  step \"s%d\" {\n    plugin = \"step.wasm\"\n    input  = { mode = \"echo\", n = %d }\n  }\n", i, i)
	}
	b.WriteString("}\n")
	return b.String()
}

// BenchmarkStores times whole processes: a 2,000-item fan-out and a
// 100-step chain of the C pipeline guest, and a 600-item fan-out of the
// gate guest whose every unit waits 50 ms on a loopback tool (as an
// agent's step waits on a model or a tool), worked by 1, 2 and 3
// `lhengine worker --exit-when-idle` processes (a home each) on a
// PostgreSQL store of a throwaway cluster (synchronous commit on), and by
// one on the embedded store. It reports units/s and ms/step;
// docs/BENCHMARKS.md has the figures.
//
//	go test ./cmd/lhengine -run '^$' -bench BenchmarkStores -benchtime 1x -count 3
func BenchmarkStores(b *testing.B) {
	cluster, err := testpg.Start()
	if err != nil {
		b.Skipf("PostgreSQL: %v", err)
	}
	defer cluster.Stop()
	bin := buildBinary(b)
	wasm := testwasm.CGuest(b, "pipeline")
	const items, steps = 2000, 100
	fan := testwasm.TaskDir(b, wasm, pgFanOut(items))
	chain := testwasm.TaskDir(b, wasm, serialTask(steps))
	const waits, latency = 600, 50 * time.Millisecond
	tool := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select { // the tool's latency: the workload, not a wait of the benchmark's
		case <-time.After(latency):
		case <-r.Context().Done():
		}
		_, _ = w.Write([]byte("ok"))
	}))
	defer tool.Close()
	toolHost := strings.TrimPrefix(tool.URL, "http://")
	tools := testwasm.TaskDir(b, testwasm.CGuest(b, "gate"), fmt.Sprintf(`task "tools" {
  step "each" {
    plugin      = "step.wasm"
    for_each    = range(%d)
    concurrency = 64
    input       = { url = "%s/tool" }
    http {
      allow = ["%s"]
    }
  }
}
`, waits, tool.URL, toolHost))
	db := 0
	run := func(b *testing.B, pg bool, workers, conc int, task string, units int, metric string) {
		for b.Loop() {
			b.StopTimer()
			dir := b.TempDir()
			args := func(home string, a ...string) []string {
				out := []string{"--home", filepath.Join(dir, home), "--log-level", "error"}
				if pg {
					out = append(out, "--store", cluster.URL(fmt.Sprint("bench", db)))
				}
				return append(out, a...)
			}
			if pg {
				db++
				if err := cluster.CreateDB(fmt.Sprint("bench", db)); err != nil {
					b.Fatal(err)
				}
				if out, err := exec.Command(bin, args("client", "store", "migrate")...).CombinedOutput(); err != nil {
					b.Fatalf("migrate: %v\n%s", err, out)
				}
			}
			home := "client"
			if !pg {
				home = "w0"
			}
			if out, err := exec.Command(bin, args(home, "submit", filepath.Join(task, "task.hcl"))...).CombinedOutput(); err != nil {
				b.Fatalf("submit: %v\n%s", err, out)
			}
			b.StartTimer()
			began := time.Now()
			var wg sync.WaitGroup
			errs := make([]error, workers)
			for i := range workers {
				wg.Go(func() {
					out, err := exec.Command(bin, args(fmt.Sprint("w", i), "worker", "--exit-when-idle", "--concurrency", fmt.Sprint(conc))...).CombinedOutput()
					if err != nil {
						errs[i] = fmt.Errorf("worker %d: %v\n%s", i, err, out)
					}
				})
			}
			wg.Wait()
			elapsed := time.Since(began)
			for _, err := range errs {
				if err != nil {
					b.Fatal(err)
				}
			}
			switch metric {
			case "units/s":
				b.ReportMetric(float64(units)/elapsed.Seconds(), metric)
			case "ms/step":
				b.ReportMetric(float64(elapsed.Milliseconds())/float64(units), metric)
			}
		}
	}
	for _, w := range []int{1, 2, 3} {
		b.Run(fmt.Sprintf("fanout/postgres/workers=%d", w), func(b *testing.B) { run(b, true, w, 4, fan, items+2, "units/s") })
	}
	b.Run("fanout/badger/workers=1", func(b *testing.B) { run(b, false, 1, 4, fan, items+2, "units/s") })
	for _, w := range []int{1, 2, 3} {
		b.Run(fmt.Sprintf("serial/postgres/workers=%d", w), func(b *testing.B) { run(b, true, w, 4, chain, steps, "ms/step") })
	}
	b.Run("serial/badger/workers=1", func(b *testing.B) { run(b, false, 1, 4, chain, steps, "ms/step") })
	for _, w := range []int{1, 2, 3} {
		b.Run(fmt.Sprintf("tools/postgres/workers=%d", w), func(b *testing.B) { run(b, true, w, 8, tools, waits, "units/s") })
	}
	b.Run("tools/badger/workers=1", func(b *testing.B) { run(b, false, 1, 8, tools, waits, "units/s") })
}
