package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lhengine/lhengine/api"
	"github.com/lhengine/lhengine/internal/testgate"
	"github.com/lhengine/lhengine/ledger"
)

// within receives from ch, failing the test after a minute.
func within[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(time.Minute):
		t.Fatalf("no %s within a minute", what)
		panic("unreachable")
	}
}

// TestServeStopsGracefully: serve with 8 units of a fan-out in flight,
// each blocked at a gate the test holds, and an API request half sent, is
// stopped with SIGTERM. It claims nothing more, says so, and goes on
// answering: the request completes. 4 units are let through and commit;
// a second SIGTERM stops it at once, and the 4 still blocked are given
// back. Exit status 0; stderr says 4 finished and 4 given back. By the
// store: nothing was charged for the units given back (their attempt
// counts are 0 and no lease expired), and a resume runs every unit to its
// end, each committed once, as its first attempt.
func TestServeStopsGracefully(t *testing.T) {
	t.Parallel()
	b := setupProcs(t)
	g := testgate.New(t)
	srv := b.startWatching(t, "stopping:", "serve", "--listen", "", "--concurrency", "8", "--grace", "10m")
	srv.until(t, regexp.MustCompile(`^serving home`))
	id := submit(t, b, b.task(t, "gated", g, 20, 8))
	for range 8 {
		within(t, g.Arrived(), "unit reaching the gate")
	}
	follow := b.start(t, "events", "--follow", id)

	// A submit whose body is still on its way when the stop begins.
	conn, err := net.Dial("unix", api.SocketPath(b.home))
	require.NoError(t, err)
	defer conn.Close()
	body, err := json.Marshal(api.SubmitRequest{Path: b.task(t, "later", g, 1, 1)})
	require.NoError(t, err)
	_, err = fmt.Fprintf(conn, "POST /v1/tasks HTTP/1.1\r\nHost: lhengine\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s",
		len(body), body[:10])
	require.NoError(t, err)

	require.NoError(t, srv.c.Process.Signal(syscall.SIGTERM))
	within(t, srv.stderr.seen, `"stopping:" on stderr`)
	require.Contains(t, srv.stderr.String(), "8 in flight")

	_, err = conn.Write(body[10:])
	require.NoError(t, err)
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	require.NoError(t, err, "the request in flight at the SIGTERM is answered")
	resp.Body.Close()
	require.Equal(t, http.StatusCreated, resp.StatusCode)

	g.Release(4)
	seen := 0
	countDone(t, follow, &seen, 4)
	require.NoError(t, srv.c.Process.Signal(syscall.SIGTERM))
	require.Equal(t, 0, srv.wait(t), "a stopped serve exits 0: %s", srv.stderr)
	require.Contains(t, srv.stderr.String(), "stopped: 4 units finished, 4 given back")
	// The follower, left without an owner, looks at the home now and then
	// (opening the store for a moment): stop it before the test opens it.
	require.NoError(t, follow.c.Process.Kill())
	follow.wait(t)

	withStore(t, b.home, func(r ledger.Reader) {
		task, err := r.Task(id)
		require.NoError(t, err)
		require.Equal(t, 4, task.Attempts, "only the attempts that finished count")
		units, err := r.Units(id, 0)
		require.NoError(t, err)
		done := 0
		for _, u := range units {
			if u.State == ledger.UnitDone {
				done++
				continue
			}
			require.Equal(t, ledger.UnitReady, u.State, "item %d", u.Item)
			require.Zero(t, u.Attempt, "item %d: no attempt charged", u.Item)
		}
		require.Equal(t, 4, done)
		evs, err := r.Events(id, 0, 0)
		require.NoError(t, err)
		count := map[ledger.EventType]int{}
		for _, e := range evs {
			count[e.Type]++
		}
		require.Equal(t, 4, count[ledger.EvReleased])
		require.Zero(t, count[ledger.EvLeaseExpired])
		ts, err := r.Tasks()
		require.NoError(t, err)
		require.Len(t, ts, 2, "the submit answered during the stop queued its task")
	})

	g.Open()
	require.Contains(t, lhOK(t, b, "resume", id), "succeeded: 20/20 units")
	withStore(t, b.home, func(r ledger.Reader) {
		as, err := r.Attempts(id, 0)
		require.NoError(t, err)
		committed := map[int]int{}
		for _, a := range as {
			require.Equal(t, 1, a.Attempt, "item %d ran as its first attempt", a.Item)
			committed[a.Item]++
		}
		require.Len(t, committed, 20)
		for item, n := range committed {
			require.Equal(t, 1, n, "item %d", item)
		}
	})
}

// TestRunStopsGracefully: `lhengine run` stopped with SIGTERM lets its
// units in flight finish within the grace, commits them, says so, and
// exits 130 with the task to be resumed; nothing is given back.
func TestRunStopsGracefully(t *testing.T) {
	t.Parallel()
	b := setupProcs(t)
	g := testgate.New(t)
	run := b.startWatching(t, "stopping:", "run", "--concurrency", "3", "--grace", "10m", b.task(t, "gated", g, 10, 3))
	id := strings.TrimPrefix(run.until(t, regexp.MustCompile(`^task `)), "task ")
	for range 3 {
		within(t, g.Arrived(), "unit reaching the gate")
	}
	require.NoError(t, run.c.Process.Signal(syscall.SIGTERM))
	within(t, run.stderr.seen, `"stopping:" on stderr`)
	g.Release(3)
	require.Equal(t, exitInterrupted, run.wait(t), "%s", run.stderr)
	require.Contains(t, run.stderr.String(), "stopped: 3 units finished, 0 given back")
	require.Contains(t, run.stderr.String(), "continue with: lhengine resume "+id)

	rep := b.status(t, id)
	done, total := rep.Task.Progress()
	require.Equal(t, 3, done)
	require.Equal(t, 10, total)
	require.Equal(t, 3, rep.Task.Attempts)
}
