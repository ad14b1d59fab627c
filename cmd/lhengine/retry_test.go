package main

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

// Step c fails its first attempt (and has no retries), so the task fails at
// step 3 of 4; the pipeline guest passes from attempt 2 on.
const failAtThirdTask = `
task "four" {
  step "a" {
    plugin = "step.wasm"
    input  = { mode = "echo", n = 1 }
  }
  step "b" {
    plugin = "step.wasm"
    input  = { mode = "echo", n = step.a.output.n + 1 }
  }
  step "c" {
    plugin = "step.wasm"
    input  = { mode = "fail_until", ok_at = 2, n = step.b.output.n + 1 }
    retry {
      attempts = 1
    }
  }
  step "d" {
    plugin = "step.wasm"
    input  = { mode = "echo", n = step.c.output.n + 1 }
  }
}
`

func TestRetryRerunsOnlyTheFailedStepAndAfter(t *testing.T) {
	t.Parallel()
	b := setupCLI(t, failAtThirdTask)
	code, out, _ := b.lh(t, "-o", "json", "run", b.dir+"/task.hcl")
	require.Equal(t, exitFailed, code)
	var failed struct {
		ID     string `json:"id"`
		Status string `json:"status"`
		Cursor int    `json:"cursor"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &failed))
	require.Equal(t, "failed", failed.Status)
	require.Equal(t, 2, failed.Cursor)

	code, _, errOut := b.lh(t, "events", "--follow", failed.ID)
	require.Equal(t, exitFailed, code, "following a failed task ends with 1")
	require.Contains(t, errOut, "failed")

	code, _, errOut = b.lh(t, "retry", failed.ID, "--from", "d")
	require.Equal(t, exitFailed, code)
	require.Contains(t, errOut, "not from step 4")

	code, out, errOut = b.lh(t, "retry", failed.ID)
	require.Equal(t, exitOK, code, errOut)
	require.Contains(t, out, `retried from step "c"`)
	require.Contains(t, out, "succeeded: 4/4 units")

	code, out, _ = b.lh(t, "-o", "json", "outputs", failed.ID, "--attempts")
	require.Equal(t, exitOK, code)
	var attempts []struct {
		Step    int `json:"step"`
		Attempt int `json:"attempt"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &attempts), out)
	per := map[int]int{}
	for _, a := range attempts {
		per[a.Step]++
	}
	require.Equal(t, map[int]int{0: 1, 1: 1, 2: 2, 3: 1}, per, "only c ran again (and d, for the first time)")

	code, out, _ = b.lh(t, "events", failed.ID)
	require.Equal(t, exitOK, code)
	require.Contains(t, out, "retried")

	// c's second attempt is the first try of its budget after the retry.
	code, out, _ = b.lh(t, "outputs", failed.ID, "c", "--attempts")
	require.Equal(t, exitOK, code)
	require.Contains(t, out, "== c item 0 attempt 1 (pass 1 try 1, epoch")
	require.Contains(t, out, "== c item 0 attempt 2 (pass 1 try 1, epoch")
	code, out, _ = b.lh(t, "status", failed.ID)
	require.Equal(t, exitOK, code)
	require.Contains(t, out, "· retried once")
}
