package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lhengine/lhengine/api"
	"github.com/lhengine/lhengine/internal/crashpoint"
	"github.com/lhengine/lhengine/internal/testpolicy"
)

const policyTask = `
task "pinned" {
  policies = ["mark"]
  step "a" {
    plugin = "step.wasm"
    input  = { mode = "echo", n = 1 }
  }
  step "b" {
    plugin = "step.wasm"
    input  = { mode = "echo", n = step.a.output.n + 1 }
  }
}
`

func markPolicy(mark string) string {
	return testpolicy.Insert("mark", `    after  = "b"
    plugin = "../step.wasm"
    input  = { mode = "echo", mark = "`+mark+`", from = step.anchor.output.n }`)
}

// TestPolicyPinnedAcrossKillAndResume runs a task with a policy in a real
// lhengine process, kills it with SIGKILL after its first commit, edits the
// policy file on disk, runs the task again (the new task applies the new
// text), then resumes the killed task: it finishes with the text pinned when
// it was submitted. lhengine manifest shows each task's policy version and
// hash.
func TestPolicyPinnedAcrossKillAndResume(t *testing.T) {
	t.Parallel()
	bin := buildBinary(t)
	b := setupCLI(t, policyTask)
	policyFile := filepath.Join(b.dir, "policies", "mark.hcl")
	require.NoError(t, os.MkdirAll(filepath.Dir(policyFile), 0o755))
	require.NoError(t, os.WriteFile(policyFile, []byte(markPolicy("old")), 0o644))

	lh := func(crashAt string, args ...string) (string, bool) {
		return runCrashing(t, bin, b.home, crashAt, nil, args...)
	}
	taskFile := filepath.Join(b.dir, "task.hcl")
	out, killed := lh(crashpoint.UnitAfterCommit+"@1", "run", taskFile)
	require.True(t, killed, "the run must die at its first commit:\n%s", out)
	first := taskID(out)
	require.Len(t, first, 26, out)

	require.NoError(t, os.WriteFile(policyFile, []byte(markPolicy("new")), 0o644))
	out, killed = lh("", "-o", "json", "run", taskFile)
	require.False(t, killed)
	var second api.Task
	require.NoError(t, json.Unmarshal([]byte(out[strings.Index(out, "{"):]), &second), out)
	require.JSONEq(t, `{"mode":"echo","mark":"new","from":2}`, string(second.Output))

	require.NoError(t, os.Remove(policyFile))
	out, killed = lh("", "resume", first)
	require.False(t, killed)
	require.Contains(t, out, "succeeded: 3/3 units")
	require.Contains(t, out, `"mark": "old"`)

	manifest := func(id string) api.Manifest {
		out, killed := lh("", "-o", "json", "manifest", id)
		require.False(t, killed)
		var m api.Manifest
		require.NoError(t, json.Unmarshal([]byte(out), &m))
		return m
	}
	m1, m2 := manifest(first), manifest(second.ID)
	require.Len(t, m1.Policies, 1)
	require.Equal(t, "mark@1", m1.Policies[0].Ref())
	require.Contains(t, m1.Policies[0].Text, `mark = "old"`)
	require.Contains(t, m2.Policies[0].Text, `mark = "new"`)
	require.Equal(t, m1.Summary.SourceSHA256, m2.Summary.SourceSHA256)
	require.Contains(t, m1.Summary.Plugins, "mark.mark@b")

	out, killed = lh("", "manifest", first)
	require.False(t, killed)
	for _, want := range []string{"engine", "source sha256", m1.Summary.SourceSHA256, "policies (1)", "mark@1", m1.Policies[0].SHA256, "mark.mark@b"} {
		require.Contains(t, out, want)
	}
	require.NotEqual(t, m1.Policies[0].SHA256, m2.Policies[0].SHA256)
}

// TestRunPolicyFlags selects, re-versions and removes policies from the
// command line, and reports an unknown one as a diagnostic with the exit
// status of a bad task file.
func TestRunPolicyFlags(t *testing.T) {
	t.Parallel()
	b := setupCLI(t, chainTask)
	lib := filepath.Join(b.dir, "lib")
	require.NoError(t, os.MkdirAll(lib, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(lib, "mark.hcl"), []byte(strings.ReplaceAll(
		strings.NewReplacer(`"b"`, `"shout"`, "output.n", "output.text").Replace(markPolicy("flag")), "../step.wasm", filepath.Join(b.dir, "step.wasm"))), 0o644))

	out := lhOK(t, b, "run", filepath.Join(b.dir, "task.hcl"), "--policies", lib, "--policy", "mark@1")
	require.Contains(t, out, "succeeded: 3/3 units")
	require.Contains(t, out, `"mark": "flag"`)

	code, _, errOut := b.lh(t, "run", filepath.Join(b.dir, "task.hcl"), "--policies", lib, "--policy", "mark@2")
	require.NotEqual(t, 0, code)
	require.Contains(t, errOut, "Unknown policy version")

	out = lhOK(t, b, "run", filepath.Join(b.dir, "task.hcl"), "--policies", lib, "--policy", "mark", "--without", "mark")
	require.Contains(t, out, "succeeded: 2/2 units")
}
