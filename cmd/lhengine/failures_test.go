package main

import (
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lhengine/lhengine/ledger"
)

const allowFailuresTask = `
task "audit" {
  step "pages" {
    plugin         = "step.wasm"
    for_each       = range(100)
    concurrency    = 8
    allow_failures = 5
    input          = { mode = "fail_until", ok_at = contains([3, 50, 77], each.value) ? 3 : 1, page = each.value }
    retry {
      attempts = 2
      backoff  = "0s"
    }
  }
  step "count" {
    plugin = "step.wasm"
    input  = { mode = "echo", n = length(step.pages.output) }
  }
}
`

// TestFailuresCommand: a 100-item fan-out with 3 failing items and
// allow_failures = 5 succeeds; status says "3 failed (allowed 5)"; a
// separate lhengine process lists the 3 (text and -o json); retry runs
// only them and the step after, and the task ends with 100 outputs.
func TestFailuresCommand(t *testing.T) {
	t.Parallel()
	bin := buildBinary(t)
	b := setupCLI(t, allowFailuresTask)
	code, out, errOut := b.lh(t, "run", filepath.Join(b.dir, "task.hcl"))
	require.Equal(t, 0, code, out+errOut)
	id := taskID(out)
	require.Len(t, id, 26)
	require.JSONEq(t, `{"mode":"echo","n":97}`, string(b.task(t, id).Output))

	out = lhOK(t, b, "status", id)
	require.Contains(t, out, "3 failed (allowed 5)")

	lh := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(bin, append([]string{"--home", b.home}, args...)...)
		got, err := cmd.Output()
		require.NoError(t, err, "%v: %s", args, got)
		return string(got)
	}
	text := lh("failures", id)
	lines := strings.Split(strings.TrimSpace(text), "\n")
	require.Len(t, lines, 4, text)
	require.Regexp(t, `^STEP\s+ITEM\s+INPUT\s+ATTEMPT\s+KIND\s+REASON$`, lines[0])
	for i, item := range []string{"3", "50", "77"} {
		require.Regexp(t, `^pages\s+`+item+`\s+`+item+`\s+2\s+plugin_error\s+plugin step.wasm: attempt 2 fails on purpose$`, lines[i+1])
	}
	var fs []ledger.FailedItem
	require.NoError(t, json.Unmarshal([]byte(lh("-o", "json", "failures", id)), &fs))
	require.Len(t, fs, 3)
	require.Equal(t, 50, fs[1].Item)

	before := b.task(t, id).Attempts
	code, out, errOut = b.lh(t, "retry", id)
	require.Equal(t, 0, code, out+errOut)
	got := b.task(t, id)
	require.Equal(t, ledger.Succeeded, got.Status, got.Reason)
	require.Equal(t, before+3+1, got.Attempts, "only the 3 failed items and the step after them ran")
	require.JSONEq(t, `{"mode":"echo","n":100}`, string(got.Output))
	require.Equal(t, "no failed items\n", lh("failures", id))
	require.Equal(t, "[]\n", lh("-o", "json", "failures", id))
}
