package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lhengine/lhengine/internal/testgate"
	"github.com/lhengine/lhengine/internal/testwasm"
)

// liveTask is a task of n gate items (one at a time) counted as pages,
// each counting one "checked", with the labels of its progress block;
// before and after them, steps whose 6 units each log a line at info.
func liveTask(t *testing.T, b *procBundle, g *testgate.Gate, n int) string {
	t.Helper()
	testwasm.Copy(t, testwasm.CGuest(t, "conformance"), filepath.Join(b.dir, "log.wasm"))
	path := filepath.Join(b.dir, "live.hcl")
	logs := func(name string) string {
		return `
  step "` + name + `" {
    plugin      = "log.wasm"
    for_each    = range(6)
    concurrency = 1
    input       = { mode = "log" }
  }
`
	}
	src := fmt.Sprintf(`task "live" {
  progress {
    unit   = "pages"
    step   = "each"
    labels = { checked = "pages checked" }
  }
`+logs("hello")+`
  step "each" {
    plugin      = "gate.wasm"
    for_each    = range(%d)
    concurrency = 1
    input       = { url = %q, count = "checked" }
    http {
      allow = [%q]
    }
  }
`+logs("bye")+`
}
`, n, g.URL(), g.Host())
	require.NoError(t, os.WriteFile(path, []byte(src), 0o644))
	return path
}

// barLine is the live bar's line on a 120-column terminal, whole.
var barLine = regexp.MustCompile(`^live \d+s \[[=>-]+\] (\d+) / 12 pages \((\d+)%\) · (?:[\d.]+ pages/s · )?` +
	`(?:about \S+(?: min)? left|time left unknown|succeeded) · step [23]/3 (?:each|bye)$`)

// TestLiveBarInATerminal runs lhengine run in a real terminal (tmux, 120
// columns) with the engine logging at info, lets the task's 12 units
// through one at a time, and reads the screen after each: the bar's line
// is whole (no log line inside it), its count climbs by one each time to
// the end, and the labelled counter shows beneath it.
func TestLiveBarInATerminal(t *testing.T) {
	t.Parallel()
	tmux, err := exec.LookPath("tmux")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("tmux is not installed (scripts/deps.sh installs it): the live bar cannot be tested")
		}
		t.Skip("tmux is not installed (make deps)")
	}
	b := setupProcs(t)
	g := testgate.New(t)
	path := liveTask(t, b, g, 12)

	// A tmux server of its own, named after the test's unique folder.
	sock := "lhengine-" + filepath.Base(filepath.Dir(b.dir))
	tm := func(args ...string) string {
		t.Helper()
		out, err := exec.Command(tmux, append([]string{"-L", sock, "-f", "/dev/null"}, args...)...).CombinedOutput()
		require.NoError(t, err, "tmux %v: %s", args, out)
		return string(out)
	}
	line := strings.Join([]string{b.bin, "--home", b.home, "--log-level", "info", "run", path}, " ")
	tm("new-session", "-d", "-x", "120", "-y", "30", "-s", "live", line, ";", "set-option", "-t", "live", "remain-on-exit", "on")
	t.Cleanup(func() { _ = exec.Command(tmux, "-L", sock, "kill-server").Run() })

	// screen polls the pane until want holds of it (there is no hook into
	// another process's terminal), failing with the screen after a minute.
	screen := func(what string, want func(string) bool) string {
		t.Helper()
		deadline := time.Now().Add(time.Minute)
		tick := time.NewTicker(25 * time.Millisecond)
		defer tick.Stop()
		for {
			s := tm("capture-pane", "-p", "-J", "-S", "-", "-t", "live")
			if want(s) {
				return s
			}
			if time.Now().After(deadline) {
				t.Fatalf("the screen never showed %s:\n%s", what, s)
			}
			<-tick.C
		}
	}
	// bar finds the bar's line on a screen and its count; every line that
	// mentions the bar's words must be the bar, whole.
	bar := func(s string) (int, bool) {
		done, found := -1, false
		for _, l := range strings.Split(s, "\n") {
			l = strings.TrimRight(l, " ")
			m := barLine.FindStringSubmatch(l)
			if m == nil {
				require.NotContains(t, l, "pages (", "a broken bar line:\n%s", s)
				continue
			}
			require.False(t, found, "two bar lines:\n%s", s)
			done, _ = strconv.Atoi(m[1])
			found = true
		}
		return done, found
	}

	last := -1
	for i := 0; i <= 12; i++ {
		// The bar at i, with the counter beneath it.
		counter := regexp.MustCompile(fmt.Sprintf(`(?m)^live .* pages .*\n  pages checked %d *$`, i))
		s := screen(fmt.Sprintf("%d / 12 pages", i), func(s string) bool {
			n, ok := bar(s)
			return ok && n == i && (i == 0 || counter.MatchString(s))
		})
		n, _ := bar(s)
		require.GreaterOrEqual(t, n, last, "the count never goes back")
		last = n
		if i < 12 {
			g.Release(1)
		}
	}
	s := screen("the run's end", func(s string) bool { return strings.Contains(s, "succeeded: 24/24 units") })
	// The 12 log lines of the log steps, each whole on a line of its own.
	logLine := regexp.MustCompile(`^\S+ \[INFO\] .*hello from guest.*$`)
	logged := 0
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, "hello from guest") {
			require.Regexp(t, logLine, strings.TrimRight(l, " "), "a broken log line:\n%s", s)
			logged++
		}
	}
	require.Equal(t, 12, logged, "the engine's log lines are on the screen:\n%s", s)
	n, ok := bar(s)
	require.True(t, ok, "the bar stays on the screen at the end:\n%s", s)
	require.Equal(t, 12, n)
}

// startUntil starts c with its stdout in out and returns its stderr once
// it has printed want (failing the test after a minute). The process is
// killed if the test ends first.
func startUntil(t *testing.T, c *exec.Cmd, out *strings.Builder, want string) *watchWriter {
	t.Helper()
	errb := newWatchWriter(want)
	c.Stdout, c.Stderr = out, errb
	require.NoError(t, c.Start())
	t.Cleanup(func() {
		if c.ProcessState == nil {
			_ = c.Process.Kill()
			_ = c.Wait()
		}
	})
	select {
	case <-errb.seen:
	case <-time.After(time.Minute):
		t.Fatalf("no %q on stderr within a minute:\n%s", want, errb)
	}
	return errb
}

// TestLiveProgressOffATerminal runs lhengine run with its output to pipes:
// the progress is plain lines, no bar and no terminal codes: one when the
// run is seen at the gated step (it waits there until that line is out),
// and a last one with the counters.
func TestLiveProgressOffATerminal(t *testing.T) {
	t.Parallel()
	b := setupProcs(t)
	g := testgate.New(t)
	path := liveTask(t, b, g, 12)
	c := exec.Command(b.bin, "--home", b.home, "--log-level", "info", "run", path)
	var out strings.Builder
	errb := startUntil(t, c, &out, "0 / 12 pages (0%) · time left unknown · step 2/3 each")
	g.Open()
	require.NoError(t, c.Wait(), errb.String())
	require.Contains(t, out.String(), "succeeded: 24/24 units")

	stderr := errb.String()
	require.NotContains(t, stderr, "\033", "no terminal codes off a terminal")
	require.NotContains(t, stderr, "\r")
	var progress []string
	for _, l := range strings.Split(stderr, "\n") {
		if strings.HasPrefix(l, "live · ") {
			progress = append(progress, l)
		}
	}
	require.Regexp(t, `^live · running \S+ · 0 / 12 pages \(0%\) · time left unknown · step 2/3 each$`,
		progress[slices.IndexFunc(progress, func(l string) bool { return strings.Contains(l, "step 2/3") })])
	require.Regexp(t, `^live · succeeded \S+ · 12 / 12 pages \(100%\) · step 3/3 bye · pages checked 12$`, progress[len(progress)-1])
}

// TestSubmitFollowShowsTheProgress: submit --follow to a home that serve
// owns follows the task to its end with the live progress (plain lines
// here, stderr being a pipe) and run's outcome and exit status; with no
// owner that works tasks it is refused before anything is queued.
func TestSubmitFollowShowsTheProgress(t *testing.T) {
	t.Parallel()
	b := setupProcs(t)
	g := testgate.New(t)
	path := b.task(t, "followed", g, 5, 1)

	code, _, errOut := b.lh(t, "submit", "--follow", path)
	require.Equal(t, exitUsage, code, errOut)
	require.Contains(t, errOut, "--follow: nothing works the tasks of home")
	require.Contains(t, errOut, "lhengine run "+path)
	out := lhOK(t, b, "ls")
	require.NotContains(t, out, "followed", "nothing was queued")

	b.serve(t, "--concurrency", "2")
	c := b.cmd("submit", "--follow", path)
	var stdout strings.Builder
	stderr := startUntil(t, c, &stdout, "followed · running")
	g.Open()
	require.NoError(t, c.Wait(), stderr.String())
	require.Regexp(t, `^task \S+\n`, stdout.String())
	require.Contains(t, stdout.String(), "succeeded: 5/5 units")
	require.Regexp(t, `(?m)^followed · running \S+ · 0 / 5 units \(0%\) · time left unknown · step 1/1 each$`, stderr.String())
	require.Regexp(t, `(?m)^followed · succeeded \S+ · 5 / 5 units \(100%\) · step 1/1 each$`, stderr.String())
}
