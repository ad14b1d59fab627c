package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestCommandsFindTheirHome: a task run in a project folder is listed by
// ls from a subfolder, with no --home; lhengine home says which and why.
func TestCommandsFindTheirHome(t *testing.T) {
	t.Parallel()
	bin := buildBinary(t)
	b := setupCLI(t, chainTask)
	env := []string{"XDG_DATA_HOME=" + filepath.Join(b.dir, "data"), "HOME=" + b.dir}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "LHENGINE_HOME=") && !strings.HasPrefix(kv, "XDG_DATA_HOME=") && !strings.HasPrefix(kv, "HOME=") {
			env = append(env, kv)
		}
	}
	lh := func(dir string, args ...string) string {
		t.Helper()
		cmd := exec.Command(bin, args...)
		cmd.Dir, cmd.Env = dir, env
		out, err := cmd.Output()
		require.NoError(t, err, "%v: %s", args, out)
		return string(out)
	}
	lh(b.dir, "--home", ".lhengine", "run", "task.hcl")
	sub := filepath.Join(b.dir, "src", "pkg")
	require.NoError(t, os.MkdirAll(sub, 0o755))
	require.Contains(t, lh(sub, "ls"), "chain")
	var h struct {
		Home, Why string
		Exists    bool
	}
	require.NoError(t, json.Unmarshal([]byte(lh(sub, "-o", "json", "home")), &h))
	require.Equal(t, filepath.Join(b.dir, ".lhengine"), h.Home)
	require.Equal(t, "the nearest .lhengine above the current folder", h.Why)
	require.True(t, h.Exists)

	other := t.TempDir()
	require.NoError(t, json.Unmarshal([]byte(lh(other, "-o", "json", "home")), &h))
	require.Equal(t, filepath.Join(b.dir, "data", "lhengine"), h.Home, "no .lhengine above: the per-user default")
	require.False(t, h.Exists)
}
