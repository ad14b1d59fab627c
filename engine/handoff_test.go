package engine_test

import (
	"encoding/json"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lhengine/lhengine/engine/handoff"
	"github.com/lhengine/lhengine/internal/testwasm"
	"github.com/lhengine/lhengine/ledger"
)

const handoffTask = `
task "migrate" {
  objective   = "Rename OldClient to NewClient everywhere"
  constraints = ["never push to main", "keep  the public API", "ask before deploying"]
  step "decide" {
    plugin = "handoff.wasm"
    input  = { mode = "decide", text = "use NewClient.Fetch, not NewClient.Get" }
  }
  step "each" {
    plugin   = "step.wasm"
    for_each = range(4)
    input    = { mode = "echo", n = each.value }
    approval {
      when   = each.value == 2
      prompt = "Deploy 2?"
    }
  }
  step "agent" {
    plugin = "handoff.wasm"
    input  = { mode = "read" }
  }
}
`

// TestHandoffAfterAContextReset: with only the store kept (the engine
// closed and a fresh one opened on the home), the handoff restores the
// objective and constraints verbatim, the completed and pending steps, the
// checkpoint, every decision and the next action exactly; and a fresh
// agent plugin reads the same through handoff.get and its request.
func TestHandoffAfterAContextReset(t *testing.T) {
	t.Parallel()
	b := setup(t, handoffTask)
	testwasm.Copy(t, testwasm.GoGuest(t, "handoff"), filepath.Join(b.dir, "handoff.wasm"))
	task := b.submit(t, nil)
	require.Equal(t, ledger.WaitingApproval, b.work(t, task.ID).Status)

	b.reopen(t) // nothing survives but the store
	var h *handoff.Bundle
	require.NoError(t, b.e.Read(func(r ledger.Reader) error {
		var err error
		h, err = handoff.Build(r, task.ID, time.Now())
		return err
	}))
	require.Equal(t, "Rename OldClient to NewClient everywhere", h.Objective)
	require.Equal(t, []string{"never push to main", "keep  the public API", "ask before deploying"}, h.Constraints)
	require.Equal(t, ledger.WaitingApproval, h.Task.Status)
	require.Len(t, h.Completed, 1)
	require.Equal(t, "decide", h.Completed[0].Name)
	require.Len(t, h.Completed[0].Evidence, 1)
	require.Equal(t, 1, h.Completed[0].Evidence[0].Attempt)
	require.Equal(t, []string{"each", "agent"}, []string{h.Pending[0].Name, h.Pending[1].Name})
	require.Equal(t, handoff.Checkpoint{Step: "each", StepIndex: 1, Pass: 1, Done: 4, Total: 6, Epoch: h.Checkpoint.Epoch,
		LastEvent: h.Checkpoint.LastEvent, Updated: h.Checkpoint.Updated}, h.Checkpoint)
	require.Len(t, h.Decisions, 1)
	require.Equal(t, "use NewClient.Fetch, not NewClient.Get", h.Decisions[0].Text)
	require.Equal(t, 1, h.Findings.Total)
	require.Len(t, h.Waiting.Approvals, 1)
	require.Equal(t, "lhengine approve "+task.ID+" 1 --note TEXT  # or reject: Deploy 2?", h.NextActions[0], "the next action is the decision")

	_, _, err := b.e.Decide(b.ctx, task.ID, "1", true, "alice", "")
	require.NoError(t, err)
	require.Equal(t, ledger.Succeeded, b.work(t, task.ID).Status)
	var v struct {
		Objective      string   `json:"objective"`
		Constraints    []string `json:"constraints"`
		ReqObjective   string   `json:"request_objective"`
		ReqConstraints []string `json:"request_constraints"`
		Completed      []string `json:"completed"`
		Pending        []string `json:"pending"`
		Decisions      []string `json:"decisions"`
		NextActions    []string `json:"next_actions"`
		CheckpointStep string   `json:"checkpoint_step"`
	}
	require.NoError(t, json.Unmarshal([]byte(b.output(t, task.ID, "agent")), &v))
	require.Equal(t, h.Objective, v.Objective)
	require.Equal(t, h.Objective, v.ReqObjective, "the request carries the objective verbatim")
	require.Equal(t, h.Constraints, v.Constraints)
	require.Equal(t, h.Constraints, v.ReqConstraints)
	require.Equal(t, []string{"decide", "each"}, v.Completed)
	require.Equal(t, []string{"agent"}, v.Pending)
	require.Equal(t, "agent", v.CheckpointStep)
	require.Equal(t, []string{"use NewClient.Fetch, not NewClient.Get"}, v.Decisions)
	require.Contains(t, v.NextActions, "lhengine events "+task.ID+" --follow")
}
