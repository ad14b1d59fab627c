package server_test

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lhengine/lhengine/api"
	"github.com/lhengine/lhengine/engine"
	"github.com/lhengine/lhengine/internal/homefiles"
	"github.com/lhengine/lhengine/internal/testwasm"
	"github.com/lhengine/lhengine/server"
)

// serveTask runs task (with the handoff guest as handoff.wasm) to its end
// on an engine whose API is served on 127.0.0.1, and returns a client of
// it and the task's id.
func serveTask(t *testing.T, task string) (*api.Client, string) {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	testwasm.Copy(t, testwasm.GoGuest(t, "handoff"), filepath.Join(dir, "handoff.wasm"))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "task.hcl"), []byte(task), 0o644))
	home := filepath.Join(dir, "home")
	e, err := engine.Open(ctx, engine.Config{Home: home})
	require.NoError(t, err)
	token, err := homefiles.Token(home)
	require.NoError(t, err)
	srv := server.New(e, server.Options{Owner: api.Owner{PID: os.Getpid(), Works: "all"}})
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	sctx, stop := context.WithCancel(ctx)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(sctx, l, server.RequireToken(srv.Handler(), token), 0) }()
	t.Cleanup(func() {
		stop()
		require.NoError(t, <-served)
		require.NoError(t, e.Close(ctx))
	})
	c := api.NewClient("http://"+l.Addr().String(), nil, token)
	sub, _, err := server.SubmitRemote(ctx, c, api.SubmitRequest{Path: filepath.Join(dir, "task.hcl")}, "")
	require.NoError(t, err)
	require.NoError(t, e.Work(ctx, engine.WorkOptions{Task: sub.Task.ID, Concurrency: 4, ExitWhenIdle: true}))
	return c, sub.Task.ID
}

// TestReportProgressAndNotesRoute: a finished 30-page task reports its
// progress (unit and step from the progress block, 30 of 30, no time
// left, the notes by kind) and GET .../notes filters and pages its notes.
func TestReportProgressAndNotesRoute(t *testing.T) {
	t.Parallel()
	c, id := serveTask(t, `task "site-audit" {
  progress {
    unit = "pages"
    step = "pages"
  }
  step "pages" {
    plugin      = "handoff.wasm"
    for_each    = range(30)
    concurrency = 4
    input       = { mode = "page" }
  }
}`)
	ctx := context.Background()
	rep, err := c.Report(ctx, id)
	require.NoError(t, err)
	require.Equal(t, api.Succeeded, rep.Task.Status)
	p := rep.Progress
	require.NotNil(t, p)
	require.Equal(t, "pages", p.Unit)
	require.Equal(t, "pages", p.Step)
	require.Equal(t, 30, p.Done)
	require.Equal(t, 30, *p.Total)
	require.Equal(t, 100.0, *p.Percent)
	require.Nil(t, p.EtaS, "a finished task has no time left to tell")
	require.Greater(t, p.ElapsedS, 0.0)
	require.Len(t, p.Notes, 2)
	require.Equal(t, "decision", p.Notes[0].Kind)
	require.EqualValues(t, 1, p.Notes[0].Count)
	require.Equal(t, "finding", p.Notes[1].Kind)
	require.EqualValues(t, 30, p.Notes[1].Count)
	require.Len(t, p.Notes[1].Newest, 3)
	require.EqualValues(t, 27, p.Notes[1].More)
	require.Len(t, rep.Notes, 31, "the report's notes: the newest, up to 200")
	require.Contains(t, p.Line(), "site-audit · succeeded ")
	require.Contains(t, p.Line(), " · 30 / 30 pages (100%)")

	page, err := c.Notes(ctx, id, api.NotesQuery{Kind: "finding", Grep: "PAGE 1", Limit: 4})
	require.NoError(t, err)
	require.Len(t, page.Notes, 4)
	require.EqualValues(t, 31, page.Total)
	require.NotZero(t, page.Next)
	seen := len(page.Notes)
	for page.Next != 0 {
		page, err = c.Notes(ctx, id, api.NotesQuery{Kind: "finding", Grep: "page 1", Limit: 4, From: page.Next})
		require.NoError(t, err)
		for _, n := range page.Notes {
			require.Equal(t, "finding", n.Kind)
			require.Contains(t, n.Text, "page 1")
		}
		seen += len(page.Notes)
	}
	require.Equal(t, 11, seen, "pages 1 and 10 to 19")

	page, err = c.Notes(ctx, id, api.NotesQuery{Kind: "decision"})
	require.NoError(t, err)
	require.Len(t, page.Notes, 1)
	require.Equal(t, "pages under /old are out of scope", page.Notes[0].Text)
	page, err = c.Notes(ctx, id, api.NotesQuery{Step: "other"})
	require.NoError(t, err)
	require.Empty(t, page.Notes)
}
