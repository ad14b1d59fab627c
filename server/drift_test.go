package server_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lhengine/lhengine/api"
	"github.com/lhengine/lhengine/engine"
	"github.com/lhengine/lhengine/internal/testwasm"
	"github.com/lhengine/lhengine/server"
)

// TestDriftShowsInTheAPIAndTheTaskPage: a fact that changed between submit
// and the first unit is the task's drift in the API's task and a line of
// its dashboard page.
func TestDriftShowsInTheAPIAndTheTaskPage(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	testwasm.Copy(t, testwasm.CGuest(t, "environ"), filepath.Join(dir, "environ.wasm"))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "deploy.yaml"), []byte("replicas: 2\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "task.hcl"), []byte(`task "d" {
  environment {
    fact "config" { file_sha256 = "deploy.yaml" }
    on_drift = "continue"
  }
  step "s" { plugin = "environ.wasm" }
}`), 0o644))
	e, err := engine.Open(ctx, engine.Config{Home: filepath.Join(dir, "home")})
	require.NoError(t, err)
	defer func() { require.NoError(t, e.Close(ctx)) }()
	task, _, err := e.Submit(ctx, filepath.Join(dir, "task.hcl"), engine.SubmitOptions{})
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "deploy.yaml"), []byte("replicas: 3\n"), 0o644))
	require.NoError(t, e.Work(ctx, engine.WorkOptions{Task: task.ID, ExitWhenIdle: true}))

	const token = "a-token"
	srv := server.New(e, server.Options{Dashboard: true, Logger: testLogger(t)})
	hs := httptest.NewServer(server.RequireToken(srv.Handler(), token))
	defer hs.Close()

	got, err := api.NewClient(hs.URL, nil, token).Task(ctx, task.ID)
	require.NoError(t, err)
	require.Equal(t, api.Succeeded, got.Status)
	require.NotNil(t, got.Drift)
	require.Equal(t, "config", got.Drift.Name)
	require.Equal(t, "continue", got.Drift.Action)
	require.NotEqual(t, got.Drift.Old, got.Drift.New)

	req, err := http.NewRequest("GET", hs.URL+"/tasks/"+task.ID, nil)
	require.NoError(t, err)
	req.Header.Set("Cookie", "lhengine_token="+token)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	html, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, string(html), "environment drift: fact config changed from "+got.Drift.Old+" to "+got.Drift.New+" (on_drift continue)")
}
