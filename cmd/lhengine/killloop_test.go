//go:build unix

package main

import (
	"errors"
	"fmt"
	"math/rand/v2"
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
)

// TestKillsAtRandomMomentsNeverBrickAHome kills real lhengine commands
// (run, resume, status, ls) with SIGKILL at random moments of their first
// 300 ms, which is mostly while the store opens, and after each kill runs
// the next command: it must open the home without --allow-damaged. Two
// homes are killed side by side, at least 100 times each.
// LHENGINE_KILL_SEED=N repeats a run (failures name their seed).
func TestKillsAtRandomMomentsNeverBrickAHome(t *testing.T) {
	t.Parallel()
	bin := buildBinary(t)
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("LHENGINE_KILL_SEED"); s != "" {
		var err error
		seed, err = strconv.ParseUint(s, 10, 64)
		require.NoError(t, err, "LHENGINE_KILL_SEED")
	}
	t.Logf("seed %d (LHENGINE_KILL_SEED=%d repeats it)", seed, seed)

	const lanes, killsPerLane, triesPerLane = 2, 100, 400
	type result struct {
		kills, tries int
		failure      string
	}
	results := make([]result, lanes)
	var wg sync.WaitGroup
	for lane := range lanes {
		b := setupCLI(t, fanOutTask) // long enough that a command working it is still writing when killed
		task := filepath.Join(b.dir, "task.hcl")
		out, killed := runCrashing(t, bin, b.home, "", nil, "submit", task)
		require.False(t, killed)
		id := strings.TrimSpace(out)
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(seed, uint64(lane)))
			r := &results[lane]
			commands := [][]string{{"run", task}, {"resume", id}, {"status", id}, {"ls"}}
			for r.kills < killsPerLane && r.tries < triesPerLane {
				r.tries++
				args := commands[rng.IntN(len(commands))]
				after := time.Duration(rng.Int64N(int64(300 * time.Millisecond)))
				what := fmt.Sprintf("seed %d, home %d, command %d (lhengine %s, killed %v after its start)",
					seed, lane, r.tries, strings.Join(args, " "), after)
				killed, err := killAfter(bin, b.home, after, args...)
				if err != nil {
					r.failure = fmt.Sprintf("%s: %v", what, err)
					return
				}
				if killed {
					r.kills++
				}
				next := exec.Command(bin, "--home", b.home, "--log-level", "off", "ls")
				if out, err := next.CombinedOutput(); err != nil {
					r.failure = fmt.Sprintf("%s: the next command (lhengine ls) failed: %v\n%s", what, err, out)
					return
				}
			}
		}()
	}
	wg.Wait()
	for lane, r := range results {
		require.Empty(t, r.failure)
		require.GreaterOrEqual(t, r.kills, killsPerLane, "seed %d, home %d: %d kills in %d commands (the others ended before their moment)", seed, lane, r.kills, r.tries)
		t.Logf("home %d: %d commands, %d killed", lane, r.tries, r.kills)
	}
}

// killAfter runs lhengine on home and sends it SIGKILL after d, unless it
// ended before. A command that ends on its own must succeed.
func killAfter(bin, home string, d time.Duration, args ...string) (killed bool, err error) {
	cmd := exec.Command(bin, append([]string{"--home", home, "--log-level", "off"}, args...)...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		return false, err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case err = <-done:
		if err != nil && !finishedResume(args, stderr.String()) {
			return false, fmt.Errorf("it failed on its own: %v\n%s", err, stderr.String())
		}
		return false, nil
	case <-timer.C:
		if kerr := cmd.Process.Signal(syscall.SIGKILL); kerr != nil && !errors.Is(kerr, os.ErrProcessDone) {
			return false, kerr
		}
		err = <-done
	}
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL {
		return true, nil
	}
	if err != nil && !finishedResume(args, stderr.String()) {
		return false, fmt.Errorf("it failed on its own: %v\n%s", err, stderr.String())
	}
	return false, nil // it ended just before the kill
}

// finishedResume tells the one refusal the loop expects: the runs and
// resumes that outlived their kills may finish the task, and a resume of
// a finished task is refused.
func finishedResume(args []string, stderr string) bool {
	return len(args) > 0 && args[0] == "resume" && strings.Contains(stderr, "nothing to resume")
}
