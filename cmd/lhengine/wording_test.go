package main

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestRmOfAnInterruptedTaskSaysInterrupted: rm refuses a task whose
// process is gone and calls it what status and ls call it, interrupted,
// with both ways on: cancel or resume.
func TestRmOfAnInterruptedTaskSaysInterrupted(t *testing.T) {
	t.Parallel()
	b := setupCLI(t, chainTask)
	id := b.interruptedTask(t)

	code, _, errOut := b.lh(t, "rm", id)
	require.Equal(t, exitFailed, code)
	require.Contains(t, errOut, "is interrupted (no process is working on it), not finished")
	require.NotContains(t, errOut, "running")
	require.Contains(t, errOut, "lhengine cancel "+id)
	require.Contains(t, errOut, "lhengine resume "+id)
}

// TestPoliciesLsOutsideAProjectSaysWhereItLooked: with no policy on the
// search path, policies ls names the folders it searched and how to add
// one, instead of an empty table.
func TestPoliciesLsOutsideAProjectSaysWhereItLooked(t *testing.T) {
	t.Parallel()
	b := setupCLI(t, chainTask)
	out := lhOK(t, b, "policies", "ls", "--task", filepath.Join(b.dir, "task.hcl"))
	require.Contains(t, out, "no policies on the search path:")
	require.Contains(t, out, filepath.Join(b.dir, "policies"))
	require.Contains(t, out, filepath.Join(b.home, "policies"))
	require.Contains(t, out, "--policies DIR")
	require.NotContains(t, out, "NAME\tVERSION")
}

const typoTask = `
task "typo" {
  step "greet" {
    plugin = "step.wasm"
    input  = { mode = "echo", text = "hello" }
  }
  step "shout" {
    plugin = "step.wasm"
    input  = { mode = "echo", text = upper(step.greet.output.txt) }
  }
}
`

// TestRuntimeInputErrorShowsTheSource: an input that fails to evaluate
// when its unit runs (a step output without the attribute named) is shown
// as validate shows a mistake: file and line, the source line, and the
// suggestion, not a bare range.
func TestRuntimeInputErrorShowsTheSource(t *testing.T) {
	t.Parallel()
	b := setupCLI(t, typoTask)
	code, out, errOut := b.lh(t, "run", filepath.Join(b.dir, "task.hcl"))
	require.Equal(t, exitFailed, code, out+errOut)
	id := taskID(out)
	out = lhOK(t, b, "status", id)
	require.Contains(t, out, `Did you mean "text"?`)
	require.Contains(t, out, "task.hcl line 9")
	require.Contains(t, out, "upper(step.greet.output.txt)", "the source line is quoted")
	require.NotRegexp(t, `\d+,\d+-\d+`, out, "no bare HCL range")
}
