package main

import (
	"encoding/json"
	"regexp"
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
	srv := b.start(t, "serve", "--listen", "", "--concurrency", "2")
	srv.until(t, regexp.MustCompile(`^serving home`))
	code, out, errOut := b.lh(t, "submit", b.task(t, "gated", g, 10, 2))
	require.Equal(t, 0, code, errOut)
	id := strings.TrimSpace(out)
	follow := b.start(t, "events", "--follow", id)
	g.Release(3)
	seen := 0
	countDone(t, follow, &seen, 3)

	code, out, errOut = b.lh(t, "outputs", id, "each")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "== each (pass 1, running): 3 committed so far, of 10 units")
	require.Equal(t, 3, strings.Count(out, "\nitem "), out)
	code, out, errOut = b.lh(t, "-o", "json", "outputs", id, "each")
	require.Equal(t, 0, code, errOut)
	var c api.Committed
	require.NoError(t, json.Unmarshal([]byte(out), &c))
	require.Equal(t, 3, c.Committed)
	require.Len(t, c.Items, 3)
	g.Open()
	require.NoError(t, srv.c.Process.Signal(syscall.SIGTERM))
	_ = srv.wait(t)
}
