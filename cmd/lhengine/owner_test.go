package main

import (
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lhengine/lhengine/internal/testgate"
)

// TestCommandsRightAfterKill9: the home's owner (serve) is killed with
// SIGKILL mid-task and a dozen commands start at once: every one of them
// answers, none names the dead process as the home's holder or fails on
// the socket it left. The follower of the task says its owner died, waits
// for the next one, and ends with the task when a resume works it.
func TestCommandsRightAfterKill9(t *testing.T) {
	t.Parallel()
	b := setupProcs(t)
	g := testgate.New(t)
	srv := b.serve(t, "--concurrency", "2")
	id := submit(t, b, b.task(t, "killed", g, 20, 2))

	follow := b.startWatching(t, "died", "events", "--follow", id)
	g.Release(4)
	seen := 0
	countDone(t, follow, &seen, 4)
	pid := srv.c.Process.Pid
	srv.kill(t)

	type result struct {
		args         []string
		code         int
		out, errText string
	}
	cmds := [][]string{}
	for range 4 {
		cmds = append(cmds, []string{"events", id}, []string{"status", id}, []string{"ls"})
	}
	results := make([]result, len(cmds))
	var wg sync.WaitGroup
	for i, args := range cmds {
		wg.Add(1)
		go func() {
			defer wg.Done()
			code, out, errOut := b.lh(t, args...)
			results[i] = result{args, code, out, errOut}
		}()
	}
	wg.Wait()
	for _, r := range results {
		require.Equal(t, 0, r.code, "%v: %s", r.args, r.errText)
		require.NotContains(t, r.errText, "process "+strconv.Itoa(pid), r.args)
		require.NotContains(t, r.errText, "no such file", r.args)
	}

	// The follower said what happened and waits for the next owner.
	<-follow.stderr.seen
	require.Regexp(t, `process `+strconv.Itoa(pid)+` .*died`, follow.stderr.String())
	resume := b.start(t, "resume", id)
	g.Open()
	require.Equal(t, 0, resume.wait(t), resume.stderr.String())
	require.Equal(t, 0, follow.wait(t), "the follower saw the task through: %s", follow.stderr)
}

// TestResumeOfATaskServeWorks: `resume ID` on a task the home's owner
// already works says so and returns; with --follow it follows the task to
// its end.
func TestResumeOfATaskServeWorks(t *testing.T) {
	t.Parallel()
	b := setupProcs(t)
	g := testgate.New(t)
	srv := b.serve(t, "--concurrency", "2")
	id := submit(t, b, b.task(t, "served", g, 6, 2))
	<-g.Arrived() // serve works it

	resume := b.start(t, "resume", id)
	line := resume.until(t, regexp.MustCompile(`already`))
	require.Regexp(t, `^task `+id+` is already being worked by process \d+ \(.*serve.*\) at 0/6 units; `+
		`follow it with: lhengine events `+id+` --follow$`, line)
	require.Equal(t, 0, resume.wait(t), resume.stderr.String())

	follow := b.start(t, "resume", id, "--follow")
	follow.until(t, regexp.MustCompile(`^task `+id+` resuming at 0/6 units$`))
	g.Open()
	require.Equal(t, 0, follow.wait(t), follow.stderr.String())
	require.Contains(t, lhOK(t, b, "status", id), `"served": succeeded`)
	require.NoError(t, srv.c.Process.Signal(syscall.SIGTERM))
	_ = srv.wait(t)
}

// TestSubmitsAndReadsAtOnceWithoutAnOwner: with no serve, commands started
// together take the home in turn, each owning it for a moment; every
// submit and every read among them succeeds.
func TestSubmitsAndReadsAtOnceWithoutAnOwner(t *testing.T) {
	t.Parallel()
	b := setupProcs(t)
	g := testgate.New(t)
	path := b.task(t, "many", g, 2, 1)
	first := submit(t, b, path)

	var wg sync.WaitGroup
	for i := range 12 {
		args := []string{"submit", path}
		if i%2 == 1 {
			args = []string{"status", first}
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if code, out, errOut := b.lh(t, args...); code != 0 {
				t.Errorf("%v: exit %d: %s%s", args, code, out, errOut)
			}
		}()
	}
	wg.Wait()
	out := lhOK(t, b, "ls")
	require.Equal(t, 1+6, strings.Count(out, " many "), out)
}
