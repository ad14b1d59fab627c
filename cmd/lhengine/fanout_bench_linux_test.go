package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lhengine/lhengine/cmd/lhengine/internal/benchrun"
	"github.com/lhengine/lhengine/internal/testwasm"
)

// fanOutRun is one `lhengine run` of benchrun.PlannedFanOutTask(n, readAll)
// on a new home.
type fanOutRun struct {
	wall    time.Duration
	anon    int64 // peak anonymous resident memory, sampled
	maxRSS  int64 // the kernel's high-water mark of the resident set
	samples int
}

func runFanOut(b *testing.B, bin, wasm string, n int, readAll bool, env ...string) fanOutRun {
	b.Helper()
	dir := b.TempDir()
	require.NoError(b, os.WriteFile(filepath.Join(dir, "step.wasm"), []byte(wasm), 0o644))
	require.NoError(b, os.WriteFile(filepath.Join(dir, "task.hcl"), []byte(benchrun.PlannedFanOutTask(n, readAll)), 0o644))
	cmd := exec.Command(bin, "--home", filepath.Join(dir, "home"), "--log-level", "off", "run", "task.hcl")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	require.NoError(b, cmd.Start())
	// The anonymous resident memory is read from /proc every few
	// milliseconds while the process lives: the kernel keeps a high-water
	// mark only of the whole resident set, file-backed pages included.
	var r fanOutRun
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for {
			if a, ok := procRSSAnon(cmd.Process.Pid); ok {
				r.anon = max(r.anon, a)
				r.samples++
			}
			select {
			case <-done:
				return
			case <-tick.C:
			}
		}
	})
	err := cmd.Wait()
	r.wall = time.Since(start)
	close(done)
	wg.Wait()
	require.NoError(b, err, out.String())
	units := n + 1
	if readAll {
		units++
	}
	require.Contains(b, out.String(), fmt.Sprintf("succeeded: %d/%d units", units, units))
	r.maxRSS = cmd.ProcessState.SysUsage().(*syscall.Rusage).Maxrss << 10
	return r
}

// procRSSAnon reads RssAnon of process pid.
func procRSSAnon(pid int) (int64, bool) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, false
	}
	for line := range strings.SplitSeq(string(raw), "\n") {
		if v, ok := strings.CutPrefix(line, "RssAnon:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10, err == nil
		}
	}
	return 0, false
}

// BenchmarkRunFanOut: `lhengine run` of a fan-out planned at run time, as a
// user runs it: the built command in a process of its own, with its default
// memory limit (LHENGINE_RUN_ENV adds variables, e.g.
// LHENGINE_MEMORY_LIMIT=off; LHENGINE_BENCH_BIN runs another build of the
// command, to compare two). Two tasks: the fan-out alone, and the fan-out
// followed by a step whose input reads every output (read-all). Per task and
// size it reports units/s over the process's whole life (start, planning,
// the fan-out, the last step, exit) and the memory the items cost: the
// growth of the peak anonymous resident memory over that of a 16-item run
// of the same task, per item (anon-B/item), and the same for the kernel's
// high-water mark of the whole resident set, in which Badger's mapped files
// count too (rss-B/item).
func BenchmarkRunFanOut(b *testing.B) {
	bin := os.Getenv("LHENGINE_BENCH_BIN")
	if bin == "" {
		bin = buildBinary(b)
	}
	raw, err := os.ReadFile(testwasm.CGuest(b, "pipeline"))
	require.NoError(b, err)
	wasm := string(raw)
	var env []string
	if e := os.Getenv("LHENGINE_RUN_ENV"); e != "" {
		env = strings.Fields(e)
	}
	for _, readAll := range []bool{false, true} {
		name := "fan-out"
		if readAll {
			name = "read-all"
		}
		base := runFanOut(b, bin, wasm, 16, readAll, env...)
		for _, n := range []int{3000, 100_000} {
			b.Run(fmt.Sprintf("%s/%d", name, n), func(b *testing.B) {
				var wall time.Duration
				var anon, rss int64
				for range b.N {
					r := runFanOut(b, bin, wasm, n, readAll, env...)
					wall += r.wall
					anon = max(anon, r.anon)
					rss = max(rss, r.maxRSS)
				}
				b.ReportMetric(float64(b.N*n)/wall.Seconds(), "units/s")
				b.ReportMetric(float64(anon-base.anon)/float64(n-16), "anon-B/item")
				b.ReportMetric(float64(rss-base.maxRSS)/float64(n-16), "rss-B/item")
				b.ReportMetric(float64(anon)/(1<<20), "peak-anon-MiB")
				b.ReportMetric(0, "ns/op")
			})
		}
	}
}
