package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lhengine/lhengine/engine"
	"github.com/lhengine/lhengine/store"
)

// buildBinary builds the real lhengine command once per test binary.
func buildBinary(t *testing.T) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "lhengine")
	cmd := exec.Command("go", "build", "-o", out, ".")
	cmd.Stderr = os.Stderr
	require.NoError(t, cmd.Run(), "go build")
	return out
}

const fanOutTask = `
task "crashy" {
  step "list" {
    plugin = "step.wasm"
    input  = { mode = "echo", n = 200 }
  }
  step "each" {
    plugin      = "step.wasm"
    for_each    = range(step.list.output.n)
    concurrency = 8
    input       = { mode = "item" }
  }
  step "count" {
    plugin = "step.wasm"
    input  = { mode = "echo", units = length(step.each.output) }
  }
}
`

// TestSIGKILLAtRandomPointsLosesAndRepeatsNothing runs a 200-unit fan-out in
// a real lhengine process, kills it with SIGKILL at random moments, resumes
// it each time, and checks by the committed records that every unit ran to
// completion exactly once.
func TestSIGKILLAtRandomPointsLosesAndRepeatsNothing(t *testing.T) {
	t.Parallel()
	bin := buildBinary(t)
	b := setupCLI(t, fanOutTask)
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(uint64(seed), 7))

	// start runs lhengine with args and kills it with SIGKILL once it has
	// printed its first line and a random further delay has passed. It
	// returns the first line and whether the process was killed.
	start := func(args ...string) (string, bool) {
		cmd := exec.Command(bin, append([]string{"--home", b.home, "--log-level", "off"}, args...)...)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		stdout, err := cmd.StdoutPipe()
		require.NoError(t, err)
		require.NoError(t, cmd.Start())
		first, err := bufio.NewReader(stdout).ReadString('\n')
		if err != nil {
			werr := cmd.Wait()
			t.Fatalf("lhengine %v printed no line: %v (exit: %v)\n%s", args, err, werr, stderr.String())
		}
		delay := time.Duration(rng.IntN(400)) * time.Millisecond
		kill := time.AfterFunc(delay, func() { _ = cmd.Process.Signal(syscall.SIGKILL) })
		err = cmd.Wait()
		kill.Stop()
		if err == nil {
			return first, false
		}
		var ee *exec.ExitError
		require.ErrorAs(t, err, &ee)
		ws := ee.Sys().(syscall.WaitStatus)
		require.True(t, ws.Signaled() && ws.Signal() == syscall.SIGKILL, "lhengine failed on its own: %v\n%s", err, stderr.String())
		return first, true
	}

	first, killed := start("run", filepath.Join(b.dir, "task.hcl"))
	id := strings.TrimSpace(strings.TrimPrefix(first, "task "))
	require.Len(t, id, 26, first)
	kills := 0
	if killed {
		kills++
	}
	finished := func() bool {
		code, out, errOut := b.lh(t, "-o", "json", "status", id)
		require.Equal(t, 0, code, errOut)
		return strings.Contains(out, `"status": "succeeded"`)
	}
	for rounds := 0; killed && !finished(); rounds++ {
		require.Less(t, rounds, 200, "the task must finish")
		_, killed = start("resume", id)
		if killed {
			kills++
		}
	}
	t.Logf("killed %d times", kills)

	e, err := engine.Open(context.Background(), engine.Config{Home: b.home})
	require.NoError(t, err)
	defer e.Close(context.Background())
	require.NoError(t, e.Store().Read(func(r *store.Reader) error {
		task, err := r.Task(id)
		require.NoError(t, err)
		require.Equal(t, store.Succeeded, task.Status, task.Reason)
		require.JSONEq(t, `{"mode":"echo","units":200}`, string(task.Output))

		committed := map[int]int{}
		as, err := r.Attempts(id, 1)
		require.NoError(t, err)
		for _, a := range as {
			if a.Output != nil {
				committed[a.Item]++
			}
		}
		require.Len(t, committed, 200)
		for item, n := range committed {
			require.Equal(t, 1, n, "item %d committed %d times", item, n)
		}
		units, err := r.Units(id, 1)
		require.NoError(t, err)
		require.Len(t, units, 200)
		for _, u := range units {
			require.Equal(t, store.UnitDone, u.State)
		}
		out, err := r.StepOutput(id, 1)
		require.NoError(t, err)
		var items []struct {
			Item struct{ Index int } `json:"item"`
		}
		require.NoError(t, json.Unmarshal(out, &items))
		for i, it := range items {
			require.Equal(t, i, it.Item.Index, fmt.Sprintf("output %d out of order", i))
		}
		// Attempts beyond one per unit are exactly the ones a kill abandoned.
		require.GreaterOrEqual(t, task.Attempts, 202)
		return nil
	}))
}
