package benchrun

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/dgraph-io/badger/v4"
	"github.com/stretchr/testify/require"

	"github.com/lhengine/lhengine/engine"
	"github.com/lhengine/lhengine/internal/testwasm"
	"github.com/lhengine/lhengine/ledger"
)

// TestFanOutTaskItems: the fan-out task plans exactly the items asked for,
// beyond range()'s limit of 1,024 values too (the default is 3,000).
func TestFanOutTaskItems(t *testing.T) {
	t.Parallel()
	wasm := testwasm.CGuest(t, "pipeline")
	dir := t.TempDir()
	testwasm.Copy(t, wasm, filepath.Join(dir, "step.wasm"))
	ctx := context.Background()
	e, err := engine.Open(ctx, engine.Config{Home: filepath.Join(dir, "home"), NoSync: true})
	require.NoError(t, err)
	defer e.Close(ctx)
	for _, items := range []int{1, 1000, 1001, 3000, 2500} {
		path := filepath.Join(dir, "fanout.hcl")
		require.NoError(t, os.WriteFile(path, []byte(fanOutTask("step.wasm", items, 16)), 0o644))
		task, _, err := e.Submit(ctx, path, engine.SubmitOptions{})
		require.NoError(t, err, items)
		var n int
		require.NoError(t, e.Read(func(r ledger.Reader) error {
			var err error
			units, err := r.Units(task.ID, 0)
			n = len(units)
			return err
		}), items)
		require.Equal(t, items, n)
	}
}

// TestRunClosesEverything: Run with the smallest sizes reports every
// figure, and returns with its Badger, wazero and engine closed (TestMain
// checks that no goroutine is left) and its plugins and tasks beneath Dir.
func TestRunClosesEverything(t *testing.T) {
	t.Parallel()
	wasm := testwasm.CGuest(t, "pipeline")
	dir := t.TempDir()
	rep, err := Run(context.Background(), Config{Dir: dir, Plugin: wasm, Rounds: 2, Steps: 2, Items: 8, Concurrency: 2})
	require.NoError(t, err)
	want := 7
	if runtime.GOOS == "linux" {
		want++ // fan-out-c-cpu
	}
	require.Len(t, rep.Figures, want)
	for _, f := range rep.Figures {
		require.Len(t, f.Samples, 2, f.Name)
		// A figure that measured nothing (a zero or negative sample, a
		// ratio against a missing floor) is not a figure.
		for _, s := range f.Samples {
			require.Positive(t, s, f.Name)
		}
		require.Positive(t, f.Median, f.Name)
		require.LessOrEqual(t, f.Min, f.Median, f.Name)
		require.LessOrEqual(t, f.Median, f.Max, f.Name)
		if f.Unit == "ms/op" || f.Unit == "ms/step" {
			// Timed op by op: every op of both rounds, the p99 among them.
			require.Positive(t, f.Ops, f.Name)
			require.GreaterOrEqual(t, f.P99, f.Min, f.Name)
		} else {
			require.Zero(t, f.Ops, f.Name)
		}
		if f.Floor != "" {
			require.Positive(t, f.FloorMedian, f.Name)
			require.InDelta(t, f.Median/f.FloorMedian, f.Ratio, 1e-9*f.Ratio, f.Name)
		}
	}
	require.FileExists(t, filepath.Join(dir, "tasks", "serial.hcl"))
	byName := map[string]Figure{}
	for _, f := range rep.Figures {
		byName[f.Name] = f
	}
	require.Equal(t, 2*2, byName[FigFsync].Ops, "two fsyncs a round")
	require.Equal(t, 2*8, byName[FigInstance].Ops, "eight instances a round")
	require.Equal(t, 2*2, byName[FigSerial].Ops, "every step, the first from the task's start, a round")
	require.Equal(t, fmt.Sprintf(FigCoalesced, 2), byName[FigFanOutC].Floor)
	if runtime.GOOS == "linux" {
		cpu := byName[fmt.Sprintf(FigCPU, FigFanOutC)]
		require.Equal(t, "cpu-ms/unit", cpu.Unit)
		require.Empty(t, cpu.Floor)
		require.True(t, rep.Load.Known)
		require.GreaterOrEqual(t, rep.Load.OtherCPUsMax, rep.Load.OtherCPUs)
		require.Equal(t, rep.Load.Busy, rep.Load.Warning != "")
	}
}

// TestCoalescedFloorSharesSyncs: writers whose transactions committed
// while a sync was under way share the next one: with 8 writers there is
// at most one sync a transaction (how many fewer the disk's speed says),
// every transaction is covered by a finished sync, and every one is in
// the database.
func TestCoalescedFloorSharesSyncs(t *testing.T) {
	t.Parallel()
	f, err := newBadgerFloor(t.TempDir(), true)
	require.NoError(t, err)
	defer f.close()
	const n = 400
	rate, err := f.run(context.Background(), 8, n)
	require.NoError(t, err)
	require.Positive(t, rate)
	require.Positive(t, f.syncs)
	require.LessOrEqual(t, f.syncs, n)
	require.Equal(t, uint64(n), f.synced, "every transaction covered by a sync")
	var keys int
	require.NoError(t, f.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.DefaultIteratorOptions)
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			keys++
		}
		return nil
	}))
	require.Equal(t, n, keys)
	t.Logf("%d transactions, %d syncs", n, f.syncs)
}

// TestPercentile: nearest rank, on unsorted input.
func TestPercentile(t *testing.T) {
	t.Parallel()
	xs := []float64{5, 1, 4, 2, 3, 10, 9, 8, 7, 6}
	require.Equal(t, 10.0, percentile(xs, 0.99))
	require.Equal(t, 5.0, percentile(xs, 0.5))
	require.Equal(t, 1.0, percentile(xs, 0))
	require.Equal(t, 7.0, percentile([]float64{7}, 0.99))
	require.Equal(t, []float64{5, 1, 4, 2, 3, 10, 9, 8, 7, 6}, xs, "the input is not sorted in place")
}

// TestRunGoFigures: with the Go plugins, plain and stateless, Run adds
// both Go fan-outs, compared with Badger's transactions sharing syncs.
func TestRunGoFigures(t *testing.T) {
	t.Parallel()
	wasm := testwasm.CGuest(t, "pipeline")
	goWasm := testwasm.GoGuest(t, "conformance")
	goReWasm := testwasm.GoGuest(t, "stateless")
	rep, err := Run(context.Background(), Config{Dir: t.TempDir(), Plugin: wasm, GoPlugin: goWasm, GoReusePlugin: goReWasm,
		Rounds: 1, Steps: 1, Items: 4, Concurrency: 2})
	require.NoError(t, err)
	byName := map[string]Figure{}
	for _, f := range rep.Figures {
		byName[f.Name] = f
	}
	for _, name := range []string{FigFanOutGo, FigFanOutGoRe} {
		f, ok := byName[name]
		require.True(t, ok, name)
		require.Positive(t, f.Median, name)
		require.Equal(t, fmt.Sprintf(FigCoalesced, 2), f.Floor, name)
	}
}

// TestRunRefusesHostImports: a plugin importing more than WASI cannot be
// the plain-wazero floor; Run says so and what to use instead.
func TestRunRefusesHostImports(t *testing.T) {
	t.Parallel()
	wasm := testwasm.CGuest(t, "hostcalls")
	_, err := Run(context.Background(), Config{Dir: t.TempDir(), Plugin: wasm, Rounds: 1, Steps: 1, Items: 1, Concurrency: 1})
	require.ErrorContains(t, err, "imports lhengine_v1.")
	require.ErrorContains(t, err, "testdata/guests/c/pipeline.c")
}

// TestInstanceFloorStopsAPluginThatNeverReturns: the wazero floor is
// bounded in time as well as in count: a plugin that loops forever is
// stopped and named.
func TestInstanceFloorStopsAPluginThatNeverReturns(t *testing.T) {
	t.Parallel()
	wasm := testwasm.CGuest(t, "loop")
	bin, err := os.ReadFile(wasm)
	require.NoError(t, err)
	ctx := context.Background()
	in, err := newInstanceFloor(ctx, bin)
	require.NoError(t, err)
	defer in.close(ctx)
	in.limit = 0 // 10 ms for the one instance
	_, err = in.run(ctx, 1)
	require.ErrorContains(t, err, "1 instances of the plugin took more than 10ms")
}
