package server_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lhengine/lhengine/api"
	"github.com/lhengine/lhengine/engine"
	"github.com/lhengine/lhengine/internal/homefiles"
	"github.com/lhengine/lhengine/internal/testgate"
	"github.com/lhengine/lhengine/internal/testpg"
	"github.com/lhengine/lhengine/internal/testwasm"
	"github.com/lhengine/lhengine/server"
)

// apiBundle is an engine on a temp home, its server on 127.0.0.1 behind a
// token, and a folder with the gate guest.
type apiBundle struct {
	dir   string
	e     *engine.Engine
	srv   *server.Server
	url   string
	token string
	gate  *testgate.Gate
}

func setupAPI(t *testing.T) *apiBundle { t.Helper(); return setupAPIOn(t, "") }

// setupAPIOn is setupAPI with the engine's ledger in store: "" for the
// embedded one, or a PostgreSQL URL.
func setupAPIOn(t *testing.T, store string) *apiBundle {
	t.Helper()
	ctx := context.Background()
	b := &apiBundle{dir: t.TempDir(), gate: testgate.New(t)}
	testwasm.Copy(t, testwasm.CGuest(t, "gate"), filepath.Join(b.dir, "gate.wasm"))
	home := filepath.Join(b.dir, "home")
	var err error
	b.e, err = engine.Open(ctx, engine.Config{Home: home, Store: store, MigrateStore: store != ""})
	require.NoError(t, err)
	b.token, err = homefiles.Token(home)
	require.NoError(t, err)
	b.srv = server.New(b.e, server.Options{Owner: api.Owner{PID: os.Getpid(), Works: "all"}})
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	b.url = "http://" + l.Addr().String()
	sctx, stop := context.WithCancel(ctx)
	served := make(chan error, 1)
	go func() { served <- b.srv.Serve(sctx, l, server.RequireToken(b.srv.Handler(), b.token), 0) }()
	t.Cleanup(func() {
		stop()
		require.NoError(t, <-served)
		require.NoError(t, b.e.Close(ctx))
	})
	return b
}

// submit writes a task of n gate items and submits it through c.
func (b *apiBundle) submit(t *testing.T, c *api.Client, n int) *api.SubmitResponse {
	t.Helper()
	path := filepath.Join(b.dir, "task.hcl")
	require.NoError(t, os.WriteFile(path, []byte(`task "gated" {`+b.gate.Step("each", "gate.wasm", n, 2)+`}`), 0o644))
	r, _, err := server.SubmitRemote(context.Background(), c, api.SubmitRequest{Path: path}, "")
	require.NoError(t, err)
	return r
}

func TestTCPRequiresTheToken(t *testing.T) {
	t.Parallel()
	b := setupAPI(t)
	ctx := context.Background()
	good := api.NewClient(b.url, nil, b.token)
	task := b.submit(t, good, 3)

	for name, c := range map[string]*api.Client{
		"none":  api.NewClient(b.url, nil, ""),
		"wrong": api.NewClient(b.url, nil, strings.Repeat("0", len(b.token))),
	} {
		_, err := c.Tasks(ctx)
		var ae *api.Error
		require.ErrorAs(t, err, &ae, name)
		require.Equal(t, http.StatusUnauthorized, ae.HTTPStatus, name)
		_, err = c.Cancel(ctx, task.ID, "no")
		require.ErrorAs(t, err, &ae, name)
		require.Equal(t, http.StatusUnauthorized, ae.HTTPStatus, name)
	}
	got, err := good.Task(ctx, task.ID)
	require.NoError(t, err)
	require.Equal(t, api.Queued, got.Status, "a refused request touched nothing")

	// A browser's cookie reads, but does not change anything through /v1:
	// only the header does, which another origin cannot make it send.
	req, err := http.NewRequest("POST", b.url+"/v1/tasks/"+task.ID+"/cancel", strings.NewReader(`{}`))
	require.NoError(t, err)
	req.AddCookie(&http.Cookie{Name: "lhengine_token", Value: b.token})
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	req, err = http.NewRequest("GET", b.url+"/v1/tasks/"+task.ID, nil)
	require.NoError(t, err)
	req.AddCookie(&http.Cookie{Name: "lhengine_token", Value: b.token})
	resp, err = http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
}

func TestAPIErrorsHaveCodes(t *testing.T) {
	t.Parallel()
	b := setupAPI(t)
	ctx := context.Background()
	c := api.NewClient(b.url, nil, b.token)

	_, err := c.Report(ctx, "01NOSUCHTASK0000000000000")
	require.True(t, errors.Is(err, api.ErrNotFound), "%v", err)

	// A bundle whose task file does not validate: the diagnostics quote
	// what was uploaded, with file:line:col.
	bad := "/client/bad.hcl"
	src := []byte("task \"x\" {\n  step \"a\" {\n    plugin = \"gate.wasm\"\n    input = var.nope\n  }\n}\n")
	_, err = c.Submit(ctx, api.SubmitRequest{Bundle: uploadBundle(t, c, bad, map[string][]byte{bad: src})})
	var ae *api.Error
	require.ErrorAs(t, err, &ae)
	require.Equal(t, api.CodeInvalidTask, ae.Code)
	require.Contains(t, ae.Diagnostics, "bad.hcl:4:", "diagnostics point at file:line:col")

	// Over TCP a client names no file on the owner's disk at all.
	secret := filepath.Join(b.dir, "secret.hcl")
	require.NoError(t, os.WriteFile(secret, []byte("root:SECRET-LINE\n"), 0o600))
	for _, path := range []string{secret, "relative/task.hcl"} {
		_, err = c.Submit(ctx, api.SubmitRequest{Path: path})
		require.ErrorAs(t, err, &ae)
		require.Equal(t, api.CodeInvalid, ae.Code)
		require.Contains(t, ae.Message, "upload")
		require.NotContains(t, ae.Message+ae.Diagnostics, "SECRET-LINE")
	}

	task := b.submit(t, c, 1)
	_, err = c.Cancel(ctx, task.ID, "first")
	require.NoError(t, err)
	_, err = c.Cancel(ctx, task.ID, "second")
	require.True(t, errors.Is(err, api.ErrConflict), "%v", err)
	_, err = c.Resume(ctx, task.ID)
	require.ErrorAs(t, err, &ae)
	require.Equal(t, api.CodeConflict, ae.Code)
	require.Contains(t, ae.Message, "lhengine retry")

	_, err = c.Retry(ctx, task.ID, api.RetryRequest{From: "nope"})
	require.ErrorAs(t, err, &ae)
	require.Equal(t, api.CodeInvalid, ae.Code)

	resp, err := http.Get(b.url + "/v1/nothing-here")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode, "unknown routes are behind the token too")
}

// TestFollowSeesEveryCommitAndEnds: a follower gets each unit's events as
// the gate lets it commit, task updates in between, and the end.
func TestFollowSeesEveryCommitAndEnds(t *testing.T) {
	t.Parallel()
	followEveryCommit(t, setupAPI(t))
}

// TestAPIOnPostgres: the API answers the same with the ledger in
// PostgreSQL: a submission uploaded over TCP, a follower that sees every
// commit and the end, the task list and the task.
func TestAPIOnPostgres(t *testing.T) {
	t.Parallel()
	b := setupAPIOn(t, testpg.DB(t))
	id := followEveryCommit(t, b)
	c := api.NewClient(b.url, nil, b.token)
	list, err := c.Tasks(context.Background())
	require.NoError(t, err)
	require.Len(t, list, 1)
	require.Equal(t, id, list[0].ID)
	got, err := c.Task(context.Background(), id)
	require.NoError(t, err)
	require.Equal(t, api.Succeeded, got.Status)
}

// followEveryCommit submits a task of 4 gated items over b's API, works
// it, follows it unit by unit to its end, and returns its id.
func followEveryCommit(t *testing.T, b *apiBundle) string {
	t.Helper()
	ctx := context.Background()
	c := api.NewClient(b.url, nil, b.token)
	task := b.submit(t, c, 4)

	wctx, stop := context.WithCancel(ctx)
	worked := make(chan error, 1)
	go func() { worked <- b.e.Work(wctx, engine.WorkOptions{Concurrency: 2}) }()
	defer func() {
		stop()
		require.ErrorIs(t, <-worked, context.Canceled)
	}()

	items := make(chan api.StreamItem, 1000)
	followed := make(chan error, 1)
	go func() {
		followed <- c.Follow(ctx, task.ID, 0, func(it api.StreamItem) error { items <- it; return nil })
	}()
	done := 0
	for done < 4 {
		b.gate.Release(1)
		// Wait for this unit's commit to reach the follower.
		for it := range items {
			if it.Type == api.StreamEvent && it.Event.Type == api.EvUnitDone {
				done++
				break
			}
		}
	}
	var last api.StreamItem
	for it := range items {
		last = it
		if it.Type == api.StreamEnd {
			break
		}
	}
	require.NoError(t, <-followed)
	require.Equal(t, api.Succeeded, last.Task.Status)
	require.Equal(t, "succeeded", last.Task.ShownStatus)
	return task.ID
}
