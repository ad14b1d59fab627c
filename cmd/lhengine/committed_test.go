package main

import (
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lhengine/lhengine/api"
	"github.com/lhengine/lhengine/internal/testgate"
)

// TestOutputsOfARunningFanOut: outputs ID STEP of a fan-out still running
// shows the units committed so far instead of "no output yet".
func TestOutputsOfARunningFanOut(t *testing.T) {
	t.Parallel()
	b := setupProcs(t)
	g := testgate.New(t)
	srv := b.serve(t, "--concurrency", "2")
	id := submit(t, b, b.task(t, "gated", g, 10, 2))
	follow := b.start(t, "events", "--follow", id)
	g.Release(3)
	seen := 0
	countDone(t, follow, &seen, 3)

	out := lhOK(t, b, "outputs", id, "each")
	require.Contains(t, out, "== each (pass 1, running): 3 committed so far, of 10 units")
	require.Equal(t, 3, strings.Count(out, "\nitem "), out)
	c := lhJSON[api.Committed](t, b, "outputs", id, "each")
	require.Equal(t, 3, c.Committed)
	require.Len(t, c.Items, 3)
	g.Open()
	require.NoError(t, srv.c.Process.Signal(syscall.SIGTERM))
	_ = srv.wait(t)
}
