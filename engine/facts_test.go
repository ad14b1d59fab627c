package engine_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lhengine/lhengine/engine"
	"github.com/lhengine/lhengine/internal/testwasm"
	"github.com/lhengine/lhengine/ledger"
)

// TestPluginFact: a fact read by a plugin is its output, read at submit
// and before the unit, carried in the step's request and recorded with its
// attempt; a fact plugin that cannot be loaded refuses the submission with
// a diagnostic on its path.
func TestPluginFact(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	testwasm.Copy(t, testwasm.CGuest(t, "environ"), filepath.Join(dir, "environ.wasm"))
	task := func(probe string) string {
		return `task "probed" {
  environment {
    fact "probe" { plugin = "` + probe + `" }
    on_drift = "pause"
  }
  step "s" {
    plugin = "environ.wasm"
    input  = "x"
  }
}`
	}
	require.NoError(t, os.WriteFile(filepath.Join(dir, "task.hcl"), []byte(task("environ.wasm")), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "bad.hcl"), []byte(task("missing.wasm")), 0o644))

	e, err := engine.Open(ctx, engine.Config{Home: filepath.Join(dir, "home")})
	require.NoError(t, err)
	defer func() { require.NoError(t, e.Close(ctx)) }()

	_, _, err = e.Submit(ctx, filepath.Join(dir, "bad.hcl"), engine.SubmitOptions{})
	var inv *engine.InvalidTaskError
	require.ErrorAs(t, err, &inv)
	require.ErrorContains(t, err, `Fact "probe": missing.wasm`)

	tk, _, err := e.Submit(ctx, filepath.Join(dir, "task.hcl"), engine.SubmitOptions{})
	require.NoError(t, err)
	require.NoError(t, e.Work(ctx, engine.WorkOptions{Task: tk.ID, ExitWhenIdle: true}))
	// The fact plugin's output: its request has no environment and a null input.
	const probe = `{"environment":null,"input":null}`
	require.NoError(t, e.Read(func(r ledger.Reader) error {
		got, err := r.Task(tk.ID)
		require.NoError(t, err)
		require.Equal(t, ledger.Succeeded, got.Status, got.Reason)
		require.Nil(t, got.Drift, "the same plugin gives the same value")
		facts, err := r.Facts(tk.ID)
		require.NoError(t, err)
		require.Equal(t, map[string]string{"probe": probe}, facts.Values, "recorded at submit")
		as, err := r.Attempts(tk.ID, 0)
		require.NoError(t, err)
		require.Len(t, as, 1)
		require.Equal(t, map[string]string{"probe": probe}, as[0].Environment)
		var out struct{ Environment map[string]string }
		require.NoError(t, json.Unmarshal(as[0].Output, &out))
		require.Equal(t, map[string]string{"probe": probe}, out.Environment, "the step's request carries it")
		return nil
	}))
}
