package main

import (
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"github.com/lhengine/lhengine/internal/testwasm"
)

// runToApproval runs a task of the pipeline guest (step.wasm) and the
// handoff guest (handoff.wasm) until it waits for a person (exit status
// 3), and returns its ID.
func (b *procBundle) runToApproval(t *testing.T, task string) string {
	t.Helper()
	testwasm.Copy(t, testwasm.GoGuest(t, "handoff"), filepath.Join(b.dir, "handoff.wasm"))
	code, out, errOut := b.lh(t, "run", b.pipelineTask(t, "task.hcl", task))
	require.Equal(t, 3, code, out+errOut)
	return taskID(out)
}

// TestHandoffCommand: on a task waiting for an approval, handoff prints
// the objective and constraints verbatim, the steps done and to do, the
// decision and the next action; -o json and -o yaml print the same bundle;
// -o yaml is refused by other commands.
func TestHandoffCommand(t *testing.T) {
	t.Parallel()
	b := setupProcs(t)
	id := b.runToApproval(t, `
task "migrate" {
  objective   = "Rename OldClient to NewClient everywhere"
  constraints = ["never push to main", "ask before deploying"]
  step "decide" {
    plugin = "handoff.wasm"
    input  = { mode = "decide", text = "use NewClient.Fetch" }
  }
  step "deploy" {
    plugin = "step.wasm"
    input  = { mode = "echo", n = 1 }
    approval {
      prompt = "Deploy?"
    }
  }
}
`)

	out := lhOK(t, b, "handoff", id)
	for _, want := range []string{
		"objective:\n  Rename OldClient to NewClient everywhere\n",
		"constraints:\n  - never push to main\n  - ask before deploying\n",
		"completed steps:\n  decide (pass 1): 1 units\n    item 0: attempt 1 by ",
		"pending steps:\n  deploy: 0/1 units done, 0 running, 1 waiting\n",
		"decisions (1, verbatim):\n  - [decide item 0] use NewClient.Fetch\n",
		"waiting for a person:\n  approval 1 (step deploy item 0): Deploy?\n",
		"next actions:\n  lhengine approve " + id + " 1 --note TEXT  # or reject: Deploy?\n",
	} {
		require.Contains(t, out, want)
	}

	out = lhOK(t, b, "-o", "json", "handoff", id)
	var j map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &j))
	out = lhOK(t, b, "-o", "yaml", "handoff", id)
	var y map[string]any
	require.NoError(t, yaml.Unmarshal([]byte(out), &y))
	require.Equal(t, j["objective"], y["objective"])
	require.Equal(t, j["next_actions"], y["next_actions"])
	require.Len(t, y["constraints"], 2)

	code, _, errOut := b.lh(t, "-o", "yaml", "status", id)
	require.Equal(t, 2, code, "a bad command line")
	require.Contains(t, errOut, "-o must be text or json (or yaml, for handoff)")
}
