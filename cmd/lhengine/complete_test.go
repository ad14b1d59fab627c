package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// complete runs "lhengine __complete ARGS..." (what a shell's completion
// script runs on TAB) and returns the candidates it printed, without the
// directive line.
func (b *cliBundle) complete(t *testing.T, args ...string) []string {
	t.Helper()
	out := lhOK(t, b, append([]string{"__complete"}, args...)...)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.True(t, strings.HasPrefix(lines[len(lines)-1], ":"), "the last line is the directive: %q", out)
	return lines[:len(lines)-1]
}

const approvalTask = `
task "deploy" {
  step "build" {
    plugin = "step.wasm"
    input  = { mode = "echo", n = 1 }
  }
  step "ship" {
    plugin = "step.wasm"
    input  = { mode = "echo", n = 2 }
    approval {
      prompt = "Ship build ${step.build.output.n}?"
    }
  }
}
`

// TestCompletionOfResourceNames: TAB completes task ids (with name and
// status) for every command taking ID, step names for outputs ID and
// retry --from, pending approvals with their prompts, and policy names and
// NAME@VERSION; with no home, it offers nothing and creates none.
func TestCompletionOfResourceNames(t *testing.T) {
	t.Parallel()
	b := setupCLI(t, chainTask)

	// No home yet: nothing offered, nothing created.
	require.Empty(t, b.complete(t, "status", ""))
	_, err := os.Stat(b.home)
	require.ErrorIs(t, err, os.ErrNotExist, "a completion must not create a home")

	out := lhOK(t, b, "run", filepath.Join(b.dir, "task.hcl"))
	done := taskID(out)
	require.NoError(t, os.WriteFile(filepath.Join(b.dir, "deploy.hcl"), []byte(approvalTask), 0o644))
	code, out, errOut := b.lh(t, "run", filepath.Join(b.dir, "deploy.hcl"))
	require.Equal(t, exitPaused, code, out+errOut)
	waiting := taskID(out)

	for _, cmd := range [][]string{{"status"}, {"outputs"}, {"events"}, {"cancel"}, {"resume"}, {"pause"}, {"retry"}, {"rm"}, {"rm", done},
		{"approvals"}, {"approve"}, {"reject"}, {"handoff"}, {"notes"}, {"failures"}, {"artifacts"}, {"effects"}, {"manifest"}} {
		got := b.complete(t, append(cmd, "")...)
		want := []string{waiting + "\tdeploy · waiting_approval", done + "\tchain · succeeded"}
		if len(cmd) == 2 {
			want = want[:1] // rm takes more ids, not the one already named
		}
		require.Equal(t, want, got, "lhengine %s <TAB>", strings.Join(cmd, " "))
	}
	require.Equal(t, []string{done + "\tchain · succeeded"}, b.complete(t, "status", strings.ToLower(done[:20])))

	require.Equal(t, []string{"greet\tstep 1 of 2 · 1 done", "shout\tstep 2 of 2 · 1 done"}, b.complete(t, "outputs", done, ""))
	require.Equal(t, []string{"shout\tstep 2 of 2 · 1 done"}, b.complete(t, "retry", done, "--from", "s"))
	require.Equal(t, []string{"1\tShip build 1?"}, b.complete(t, "approve", waiting, ""))
	require.Equal(t, []string{"1\tShip build 1?"}, b.complete(t, "reject", waiting[:10], ""))
	require.Empty(t, b.complete(t, "approve", done, ""))

	// Policies on the search path: policies/ beside the task file.
	require.NoError(t, os.MkdirAll(filepath.Join(b.dir, "policies"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(b.dir, "policies", "mark.hcl"), []byte(markPolicy("x")), 0o644))
	policies := []string{"mark\ta test fixture", "mark@1\ta test fixture"}
	require.Equal(t, policies, b.complete(t, "policies", "show", "--task", filepath.Join(b.dir, "task.hcl"), ""))
	require.Equal(t, policies, b.complete(t, "run", filepath.Join(b.dir, "task.hcl"), "--policy", ""))
	require.Equal(t, policies[:1], b.complete(t, "validate", filepath.Join(b.dir, "task.hcl"), "--without", "mark"[:2])[:1])
	got := b.complete(t, "policies", "diff", "--task", filepath.Join(b.dir, "task.hcl"), "mark@1", "")
	require.Contains(t, got, "mark@1\ta test fixture")
	require.Contains(t, got, done+"\tchain · succeeded", "diff NAME@A ID compares with what a task pinned")

	out = lhOK(t, b, "completion", "bash")
	require.Contains(t, out, "__complete", "the script asks the binary for candidates")
}
