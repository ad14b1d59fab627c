package main

import (
	"bufio"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lhengine/lhengine/api"
	"github.com/lhengine/lhengine/internal/testgate"
	"github.com/lhengine/lhengine/internal/testwasm"
	"github.com/lhengine/lhengine/ledger"
)

// procBundle runs the real binary in separate processes on one home.
type procBundle struct {
	bin  string
	dir  string
	home string
}

func setupProcs(t *testing.T) *procBundle {
	t.Helper()
	b := &procBundle{bin: buildBinary(t), dir: t.TempDir()}
	b.home = filepath.Join(b.dir, "home")
	testwasm.Copy(t, testwasm.CGuest(t, "gate"), filepath.Join(b.dir, "gate.wasm"))
	return b
}

// task writes a task file of n gate items fetching from g.
func (b *procBundle) task(t *testing.T, name string, g *testgate.Gate, n, conc int) string {
	t.Helper()
	path := filepath.Join(b.dir, name+".hcl")
	require.NoError(t, os.WriteFile(path, []byte(`task "`+name+`" {`+g.Step("each", "gate.wasm", n, conc)+`}`), 0o644))
	return path
}

// pipelineTask writes the pipeline guest, as step.wasm, and text, as the
// file name, into the bundle's folder, and returns the task file's path.
func (b *procBundle) pipelineTask(t *testing.T, name, text string) string {
	t.Helper()
	testwasm.Copy(t, testwasm.CGuest(t, "pipeline"), filepath.Join(b.dir, "step.wasm"))
	path := filepath.Join(b.dir, name)
	require.NoError(t, os.WriteFile(path, []byte(text), 0o644))
	return path
}

func (b *procBundle) cmd(args ...string) *exec.Cmd {
	return exec.Command(b.bin, append([]string{"--home", b.home, "--log-level", "error"}, args...)...)
}

// lh runs a command to its end and returns its exit code and output.
func (b *procBundle) lh(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	c := b.cmd(args...)
	var out, errb strings.Builder
	c.Stdout, c.Stderr = &out, &errb
	err := c.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else {
		require.NoError(t, err)
	}
	return code, out.String(), errb.String()
}

// proc is a started command whose stdout is read line by line; stderr
// closes its seen channel once it has printed what the test waits for.
type proc struct {
	c      *exec.Cmd
	lines  chan string
	stderr *watchWriter
}

// serve starts serve with no listener (and args) and returns it once it
// serves the home.
func (b *procBundle) serve(t *testing.T, args ...string) *proc {
	t.Helper()
	srv := b.start(t, append([]string{"serve", "--listen", ""}, args...)...)
	srv.until(t, regexp.MustCompile(`^serving home`))
	return srv
}

// startRun starts run (with args) and returns it with the ID of its task
// once it prints it.
func (b *procBundle) startRun(t *testing.T, args ...string) (*proc, string) {
	t.Helper()
	run := b.start(t, append([]string{"run"}, args...)...)
	return run, strings.TrimPrefix(run.until(t, regexp.MustCompile(`^task `)), "task ")
}

func (b *procBundle) start(t *testing.T, args ...string) *proc {
	t.Helper()
	return b.startWatching(t, "\x00never", args...)
}

func (b *procBundle) startWatching(t *testing.T, stderrWant string, args ...string) *proc {
	t.Helper()
	c := b.cmd(args...)
	out, err := c.StdoutPipe()
	require.NoError(t, err)
	p := &proc{c: c, lines: make(chan string, 1<<16), stderr: newWatchWriter(stderrWant)}
	c.Stderr = p.stderr
	require.NoError(t, c.Start())
	go func() {
		defer close(p.lines)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			p.lines <- sc.Text()
		}
		_, _ = io.Copy(io.Discard, out)
	}()
	t.Cleanup(func() {
		if c.ProcessState == nil {
			_ = c.Process.Kill()
			_ = c.Wait()
		}
	})
	return p
}

// until reads lines until one matches re and returns it; the process
// ending first fails the test.
func (p *proc) until(t *testing.T, re *regexp.Regexp) string {
	t.Helper()
	for l := range p.lines {
		if re.MatchString(l) {
			return l
		}
	}
	t.Fatalf("%v ended before a line matching %s; stderr:\n%s", p.c.Args, re, p.stderr)
	return ""
}

// wait waits for the process and returns its exit code.
func (p *proc) wait(t *testing.T) int {
	t.Helper()
	for range p.lines {
	}
	err := p.c.Wait()
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode()
	}
	require.NoError(t, err)
	return 0
}

// attempts reads a task's attempts through the CLI (outputs --attempts).
func (b *procBundle) attempts(t *testing.T, id string) []ledger.Attempt {
	t.Helper()
	return lhJSON[[]ledger.Attempt](t, b, "outputs", "--attempts", id)
}

// stop ends the process with SIGTERM; it must exit 0.
func (p *proc) stop(t *testing.T) {
	t.Helper()
	require.NoError(t, p.c.Process.Signal(syscall.SIGTERM))
	require.Equal(t, 0, p.wait(t), p.stderr.String())
}

// kill ends the process with SIGKILL and waits for it.
func (p *proc) kill(t *testing.T) {
	t.Helper()
	require.NoError(t, p.c.Process.Signal(syscall.SIGKILL))
	_ = p.wait(t)
}

var unitDone = regexp.MustCompile(`unit_done +each\[(\d+)\]`)

// countDone reads the follower's lines until it has seen n unit_done
// events in all, counting from *seen.
func countDone(t *testing.T, p *proc, seen *int, n int) {
	t.Helper()
	for *seen < n {
		p.until(t, unitDone)
		*seen++
	}
}

// TestOtherProcessesWatchAndCancelARun: while `lhengine run` works a
// 200-unit task, status, ls, outputs and events --follow from other
// processes succeed, the follower sees each commit, and a cancel from
// another process stops the run, which exits 1.
func TestOtherProcessesWatchAndCancelARun(t *testing.T) {
	t.Parallel()
	b := setupProcs(t)
	g := testgate.New(t)
	run, id := b.startRun(t, b.task(t, "gated", g, 200, 8))
	<-g.Arrived() // the run is working

	// The socket is the owner's alone.
	fi, err := os.Stat(api.SocketPath(b.home))
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
	di, err := os.Stat(filepath.Dir(api.SocketPath(b.home)))
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o700), di.Mode().Perm(), "other users cannot even reach the socket")

	g.Release(20)
	follow := b.start(t, "events", "--follow", id)
	seen := 0
	countDone(t, follow, &seen, 20)
	g.Release(5)
	countDone(t, follow, &seen, 25) // each commit reaches the follower

	out := lhOK(t, b, "status", id)
	require.Contains(t, out, `"gated": running`)
	require.Regexp(t, `progress: +2[5-9]/200 units`, out)
	require.Regexp(t, id+` +gated +running`, lhOK(t, b, "ls"))
	lhJSON[map[string]json.RawMessage](t, b, "outputs", id)

	start := time.Now()
	lhOK(t, b, "cancel", id, "--reason", "seen enough")
	require.Equal(t, 1, run.wait(t), "a cancelled run exits 1: %s", run.stderr)
	t.Logf("the run exited %s after the cancel command returned", time.Since(start).Round(time.Millisecond))
	require.Equal(t, 1, follow.wait(t), "the follower ends with the task, 1 as it did not succeed")
	require.Contains(t, follow.stderr.String(), "cancelled")

	require.Equal(t, api.Cancelled, b.status(t, id).Task.Status)
	_, err = os.Stat(api.SocketPath(b.home))
	require.ErrorIs(t, err, os.ErrNotExist, "the owner removed its socket on the way out")
}

// TestServeSurvivesKill9: two clients submit to serve, one follows; serve
// is killed with SIGKILL mid-task and started again; both tasks finish,
// the follower sees it through, and no unit committed before the kill
// runs again.
func TestServeSurvivesKill9(t *testing.T) {
	t.Parallel()
	b := setupProcs(t)
	gates := []*testgate.Gate{testgate.New(t), testgate.New(t)}
	srv := b.serve(t, "--concurrency", "4")

	ids := make([]string, 2)
	var wg sync.WaitGroup
	for i, name := range []string{"first", "second"} {
		path := b.task(t, name, gates[i], 30, 2)
		wg.Add(1)
		go func() {
			defer wg.Done()
			code, out, errOut := b.lh(t, "submit", path)
			if code == 0 {
				ids[i] = strings.TrimSpace(out)
			} else {
				t.Errorf("submit %s: exit %d: %s", name, code, errOut)
			}
		}()
	}
	wg.Wait()
	require.False(t, t.Failed())

	follow := b.start(t, "events", "--follow", ids[0])
	gates[0].Release(10)
	gates[1].Release(5)
	seen := 0
	countDone(t, follow, &seen, 10)
	<-gates[0].Arrived() // let the first batch through, then note who is waiting
	srv.kill(t)

	// Units committed before the kill, by the records.
	committed := func(id string) map[string]bool {
		m := map[string]bool{}
		for _, a := range b.attempts(t, id) {
			if a.Failure == nil && a.Repair == "" {
				key := strconv.Itoa(a.Item)
				require.False(t, m[key], "item %d committed twice", a.Item)
				m[key] = true
			}
		}
		return m
	}
	before := []map[string]bool{committed(ids[0]), committed(ids[1])}
	require.GreaterOrEqual(t, len(before[0]), 10)

	// Drain what reached the gates before the kill; after the restart no
	// committed item may arrive again.
	for _, g := range gates {
	drain:
		for {
			select {
			case <-g.Arrived():
			default:
				break drain
			}
		}
	}
	srv = b.serve(t, "--concurrency", "4")
	for _, g := range gates {
		g.Open()
	}
	require.Equal(t, 0, follow.wait(t), "the follower waited for the new owner and saw the task succeed: %s", follow.stderr)
	for i, id := range ids {
		var rep api.Report
		for {
			if rep = b.status(t, id); rep.Task.Status.Terminal() {
				break
			}
			// Not finished yet: follow it to its end.
			lhOK(t, b, "events", "--follow", id)
		}
		require.Equal(t, api.Succeeded, rep.Task.Status, "task %d", i)
		after := committed(id)
		require.Len(t, after, 30)
	again:
		for {
			select {
			case item := <-gates[i].Arrived():
				require.False(t, before[i][item], "item %s of task %d was committed before the kill and ran again", item, i)
			default:
				break again
			}
		}
	}
	srv.stop(t)
}

// TestFollowWaitsForAWorkerAndCtrlCIs130: events --follow on a task nobody
// works says so and waits without holding the home (a submit beside it
// works), and Ctrl-C ends it with 130.
func TestFollowWaitsForAWorkerAndCtrlCIs130(t *testing.T) {
	t.Parallel()
	b := setupProcs(t)
	g := testgate.New(t)
	path := b.task(t, "queued", g, 3, 1)
	id := submit(t, b, path)

	follow := b.startWatching(t, "waiting for one", "events", "--follow", id)
	follow.until(t, regexp.MustCompile(`submitted`))
	<-follow.stderr.seen
	// A second submit proves the follower does not hold the home while it
	// waits.
	submit(t, b, path)
	require.NoError(t, follow.c.Process.Signal(os.Interrupt))
	require.Equal(t, 130, follow.wait(t), follow.stderr.String())
	require.Contains(t, follow.stderr.String(), "no process is working on it")
}
