//go:build linux

package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lhengine/lhengine/api"
	"github.com/lhengine/lhengine/internal/homefiles"
	"github.com/lhengine/lhengine/internal/testpolicy"
	"github.com/lhengine/lhengine/internal/testwasm"
)

// TestRemoteRunFromAnotherMountNamespace: a client in a mount namespace
// of its own (unshare), whose task, plugin and policy are on a tmpfs
// mounted there only, runs the task on serve over TCP: the server, which
// cannot see the files, runs it from what the client uploaded, to
// success, and its manifest names the client's paths. A second run sends
// no plugin again.
func TestRemoteRunFromAnotherMountNamespace(t *testing.T) {
	t.Parallel()
	unshare, err := exec.LookPath("unshare")
	require.NoError(t, err, "the test needs unshare(1), from util-linux")
	b := setupProcs(t)
	srv := b.start(t, "serve", "--listen", "127.0.0.1:0", "--concurrency", "2")
	addr := regexp.MustCompile(`^  dashboard: http://(\S+)/$`).FindStringSubmatch(
		srv.until(t, regexp.MustCompile(`^  dashboard: `)))[1]
	// serve makes the token as its listener starts serving, which may be
	// after it printed the address: take it the way serve does (whoever
	// comes first makes it, the other reads it).
	token, err := homefiles.Token(b.home)
	require.NoError(t, err)
	tokenFile := filepath.Join(t.TempDir(), "token")
	require.NoError(t, os.WriteFile(tokenFile, []byte(token+"\n"), 0o600))

	// What the client copies onto its tmpfs.
	stage := t.TempDir()
	testwasm.Copy(t, testwasm.CGuest(t, "pipeline"), filepath.Join(stage, "step.wasm"))
	require.NoError(t, os.WriteFile(filepath.Join(stage, "task.hcl"), []byte(`task "uploaded" {
  prompt "system" {
    file = "prompt.md"
  }
  step "a" {
    plugin = "step.wasm"
    input  = { mode = "echo", system = prompt.system }
  }
}`), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(stage, "prompt.md"), []byte("be brief"), 0o644))
	require.NoError(t, os.Mkdir(filepath.Join(stage, "policies"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(stage, "policies", "mark.hcl"), []byte(testpolicy.Insert("mark", `    after  = "a"
    plugin = "../step.wasm"
    input  = { mode = "echo" }`)), 0o644))
	mnt := filepath.Join(t.TempDir(), "client") // empty, as the server sees it
	require.NoError(t, os.Mkdir(mnt, 0o755))
	clientHome := filepath.Join(t.TempDir(), "client-home")

	flags := []string{"-m"}
	if os.Geteuid() != 0 {
		flags = []string{"-r", "-m"} // a user namespace of its own, to mount
	}
	run := func() string {
		t.Helper()
		script := `set -e
mount -t tmpfs lhengine-client "$1"
cp -R "$2"/. "$1"/
shift 2
exec "$@"`
		args := append(flags, "sh", "-c", script, "sh", mnt, stage, b.bin, "--home", clientHome, "--log-level", "error",
			"--server", "http://"+addr, "--token-file", tokenFile, "run", "--policy", "mark", filepath.Join(mnt, "task.hcl"))
		c := exec.Command(unshare, args...)
		var out, errb strings.Builder
		c.Stdout, c.Stderr = &out, &errb
		require.NoError(t, c.Run(), "stdout:\n%s\nstderr:\n%s", out.String(), errb.String())
		return out.String()
	}
	id := taskID(run())
	entries, err := os.ReadDir(mnt)
	require.NoError(t, err)
	require.Empty(t, entries, "the client's files were never on the server's side of the mount")

	ctx := context.Background()
	c := api.NewClient("http://"+addr, nil, token)
	defer c.Close()
	task, err := c.Task(ctx, id)
	require.NoError(t, err)
	require.Equal(t, api.Succeeded, task.Status, task.Reason)
	m, err := c.Manifest(ctx, id)
	require.NoError(t, err)
	require.Equal(t, filepath.Join(mnt, "task.hcl"), m.Summary.Filename)
	require.Len(t, m.Summary.Plugins, 2, "the task's step and the one the policy inserts")
	for _, pin := range m.Summary.Plugins {
		require.Equal(t, filepath.Join(mnt, "step.wasm"), pin.Path)
	}
	require.Len(t, m.Policies, 1)
	require.Equal(t, filepath.Join(mnt, "policies", "mark.hcl"), m.Policies[0].Filename)
	require.Equal(t, "be brief", m.Prompts[0].Text)

	// A second run sends nothing: an upload would have replaced the
	// file kept for its content with a new one.
	uploads := filepath.Join(b.home, "uploads")
	entries, err = os.ReadDir(uploads)
	require.NoError(t, err)
	require.Len(t, entries, 4, "the task file, its prompt, plugin and policy")
	kept := map[string]os.FileInfo{}
	for _, e := range entries {
		kept[e.Name()], err = os.Stat(filepath.Join(uploads, e.Name()))
		require.NoError(t, err)
	}
	id2 := taskID(run())
	require.NotEqual(t, id, id2)
	entries, err = os.ReadDir(uploads)
	require.NoError(t, err)
	require.Len(t, entries, 4)
	for name, before := range kept {
		after, err := os.Stat(filepath.Join(uploads, name))
		require.NoError(t, err)
		require.True(t, os.SameFile(before, after), "%s was uploaded again", name)
	}

	srv.stop(t)
}
