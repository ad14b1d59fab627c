package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/tetratelabs/wazero"

	"github.com/lhengine/lhengine/cmd/lhengine/internal/benchrun"
	"github.com/lhengine/lhengine/internal/testpg"
	"github.com/lhengine/lhengine/internal/testwasm"
)

func TestMain(m *testing.M) {
	// One wazero runtime before the parallel tests: wazero caches its
	// version string without a lock when the first runtime is built, and
	// bench builds one of its own beside the engines of other tests.
	ctx := context.Background()
	if err := wazero.NewRuntime(ctx).Close(ctx); err != nil {
		panic(err)
	}
	// The tests' commands, and the processes they start, share a
	// compilation cache of their own, not the user's.
	cache, err := os.MkdirTemp("", "lhengine-test-cache")
	if err != nil {
		panic(err)
	}
	os.Setenv("LHENGINE_CACHE", cache)
	code := testpg.Main(m) // stops the PostgreSQL cluster the tests started, if any
	os.RemoveAll(cache)
	os.Exit(code)
}

// benchArgs are the smallest sizes that still run every figure.
var benchArgs = []string{"bench", "--rounds", "1", "--items", "40", "--steps", "5", "--concurrency", "4"}

// TestBenchTable: `lhengine bench` prints one row per figure, the engine's
// rows with what they are compared with and a ratio, and leaves nothing
// behind in --home. Timings are not checked. Any plugin answering echo
// serves for the --go-plugin row: the C one is passed, since compiling a Go
// guest under the race detector takes half a minute on a small machine.
func TestBenchTable(t *testing.T) {
	t.Parallel()
	wasm := testwasm.CGuest(t, "pipeline")
	home := filepath.Join(t.TempDir(), "home")
	var out, errb bytes.Buffer
	code := run(context.Background(), append([]string{"--home", home}, append(benchArgs, "--plugin", wasm, "--go-plugin", wasm)...), &out, &errb)
	require.Equal(t, exitOK, code, errb.String())

	rows := map[string]string{}
	for _, line := range strings.Split(out.String(), "\n") {
		if f := strings.Fields(line); len(f) > 0 {
			rows[f[0]] = line
		}
	}
	for _, name := range []string{"fsync", "badger-sync-writes-4", "badger-sync-writes-8", "badger-coalesced-sync-4", "wazero-instance"} {
		require.Contains(t, rows, name, out.String())
	}
	require.Contains(t, rows, "serial-steps", out.String())
	require.Contains(t, rows["serial-steps"], "fsync + wazero-instance", out.String())
	require.Regexp(t, `\d+\.\d\dx`, rows["serial-steps"])
	require.Contains(t, rows, "fan-out-c", out.String())
	require.Contains(t, rows["fan-out-c"], "badger-coalesced-sync-4", out.String())
	require.Contains(t, rows, "fan-out-go", out.String())
	require.Contains(t, rows["fan-out-go"], "badger-coalesced-sync-4", out.String())
	require.Contains(t, out.String(), "WARNING: 1 round(s)")
	if runtime.GOOS == "linux" {
		require.Regexp(t, `load: [\d.]+ [\d.]+ [\d.]+ before, [\d.]+ [\d.]+ [\d.]+ after; other processes kept [\d.]+ CPUs busy`, out.String())
	}
	require.Contains(t, errb.String(), "round 1/1: serial-steps")

	ents, err := os.ReadDir(home)
	require.NoError(t, err)
	require.Empty(t, ents, "bench left its directory in --home")
}

// TestBenchJSON: with -o json the report parses, has every figure with one
// sample per round and a positive median, and compares the engine's
// figures with their floors; without --go-plugin there is no Go fan-out.
func TestBenchJSON(t *testing.T) {
	t.Parallel()
	wasm := testwasm.CGuest(t, "pipeline")
	home := filepath.Join(t.TempDir(), "home")
	var out, errb bytes.Buffer
	args := append([]string{"--home", home, "-o", "json"}, append(benchArgs, "--plugin", wasm)...)
	code := run(context.Background(), args, &out, &errb)
	require.Equal(t, exitOK, code, errb.String())
	require.Empty(t, errb.String(), "no progress lines with -o json")

	var rep benchrun.Report
	require.NoError(t, json.Unmarshal(out.Bytes(), &rep), out.String())
	require.Equal(t, 1, rep.Rounds)
	require.Equal(t, 40, rep.Items)
	var names []string
	for _, f := range rep.Figures {
		names = append(names, f.Name)
		require.Len(t, f.Samples, 1, f.Name)
		require.Positive(t, f.Median, f.Name)
		switch f.Name {
		case "serial-steps", "fan-out-c":
			require.NotEmpty(t, f.Floor, f.Name)
			require.Positive(t, f.Ratio, f.Name)
		default:
			require.Empty(t, f.Floor, f.Name)
		}
	}
	want := []string{"fsync", "badger-sync-writes-4", "badger-sync-writes-8", "badger-coalesced-sync-4", "wazero-instance",
		"serial-steps", "fan-out-c"}
	if runtime.GOOS == "linux" {
		want = append(want, "fan-out-c-cpu") // the process's CPU time, known on Linux
	}
	require.Equal(t, want, names)
	require.Equal(t, runtime.GOOS == "linux", rep.Load.Known, "load is read on Linux")
	require.NoDirExists(t, rep.Dir)
}

// TestBenchUsage: bench without a plugin, or with a count out of range, is
// a usage error that says what to pass, and creates nothing.
func TestBenchUsage(t *testing.T) {
	t.Parallel()
	home := filepath.Join(t.TempDir(), "home")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"bench"}, "pass --plugin X.wasm"},
		{[]string{"bench", "--plugin", "x.wasm", "--rounds", "0"}, "--rounds 0: want 1 to 100"},
		{[]string{"bench", "--plugin", "x.wasm", "--items", "0"}, "--items 0: want 1 to 1000000"},
		{[]string{"bench", "--plugin", "x.wasm", "--steps", "-1"}, "--steps -1"},
	} {
		var out, errb bytes.Buffer
		code := run(context.Background(), append([]string{"--home", home}, tc.args...), &out, &errb)
		require.Equal(t, exitUsage, code, "%v: %s", tc.args, errb.String())
		require.Contains(t, errb.String(), tc.want, tc.args)
		require.NoDirExists(t, home, tc.args)
	}
}
