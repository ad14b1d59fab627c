package server_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lhengine/lhengine/api"
	"github.com/lhengine/lhengine/server"
)

// TestSubmitModelReplay: a remote submission reads model_replay, a folder
// of recordings, on the client and uploads it; it becomes the task's
// replay set, and the manifest shows it with the task's models and
// prompts. A relative folder is a bad request, and one without recordings
// is refused before anything is sent.
func TestSubmitModelReplay(t *testing.T) {
	t.Parallel()
	b := setupAPI(t)
	ctx := context.Background()
	c := api.NewClient(b.url, nil, b.token)
	path := filepath.Join(b.dir, "replay.hcl")
	require.NoError(t, os.WriteFile(path, []byte(`task "replayed" {
  model "m" {
    provider = "openai"
    model    = "test-model"
  }
  prompt "system" {
    text    = "Be brief."
    version = "1"
  }
  step "each" {
    plugin = "gate.wasm"
    models = ["m"]
    input  = { system = prompt.system, url = "" }
  }
}`), 0o644))
	rec := filepath.Join(b.dir, "recorded")
	require.NoError(t, os.Mkdir(rec, 0o755))
	sum := strings.Repeat("0a", 32)
	require.NoError(t, os.WriteFile(filepath.Join(rec, sum+".json"),
		[]byte(`{"request_sha256": "`+sum+`", "provider": "openai", "model_id": "test-model", "response": {"text": "hi"}}`), 0o644))

	_, err := c.Submit(ctx, api.SubmitRequest{Bundle: uploadBundle(t, c, "/t.hcl", map[string][]byte{"/t.hcl": []byte(`task "x" {}`)}), ModelReplay: "recorded"})
	require.ErrorContains(t, err, "model_replay must be an absolute path")
	_, _, err = server.SubmitRemote(ctx, c, api.SubmitRequest{Path: path, ModelReplay: b.dir}, "")
	require.ErrorContains(t, err, "holds no recordings")

	// The recordings are read where the client runs, and uploaded.
	r, _, err := server.SubmitRemote(ctx, c, api.SubmitRequest{Path: path, ModelReplay: rec}, "")
	require.NoError(t, err)
	m, err := c.Manifest(ctx, r.ID)
	require.NoError(t, err)
	require.Len(t, m.Summary.Models, 1)
	require.Equal(t, "test-model", m.Summary.Models[0].ID)
	require.Len(t, m.Summary.Prompts, 1)
	require.Equal(t, "1", m.Summary.Prompts[0].Version)
	require.Equal(t, "Be brief.", m.Prompts[0].Text)
	require.NotNil(t, m.Summary.ModelReplay)
	require.Equal(t, rec, m.Summary.ModelReplay.Dir)
	require.Equal(t, 1, m.Summary.ModelReplay.Recordings)
}
