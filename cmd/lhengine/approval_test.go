package main

import (
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lhengine/lhengine/api"
	"github.com/lhengine/lhengine/ledger"
)

// approvalTaskFile writes a task of a 100-item fan-out of the pipeline
// guest whose item 42 needs an approval, with the approval block's extra
// attributes, and returns its path.
func (b *procBundle) approvalTaskFile(t *testing.T, extra string) string {
	t.Helper()
	return b.pipelineTask(t, "deploy.hcl", `
task "deploy" {
  step "each" {
    plugin      = "step.wasm"
    for_each    = range(100)
    concurrency = 4
    input       = { mode = "echo", n = each.value }
    approval {
      when    = each.value == 42
      prompt  = "Deploy ${each.value}?"
      subject = { item = each.value, env = "prod" }
      `+extra+`
    }
  }
}
`)
}

func (b *procBundle) approvalsJSON(t *testing.T, args ...string) []ledger.Approval {
	t.Helper()
	return lhJSON[[]ledger.Approval](t, b, append([]string{"approvals"}, args...)...)
}

// TestApprovalSurvivesKill9OfServe: under serve, 99 items commit while item
// 42 waits; serve is killed with SIGKILL; the approval is still pending
// (read with no owner alive); a new serve and an approve from another
// process finish the task, every item committed once, and the record says
// who approved, when and why.
func TestApprovalSurvivesKill9OfServe(t *testing.T) {
	t.Parallel()
	b := setupProcs(t)
	path := b.approvalTaskFile(t, `expires_in = "24h"`)
	srv := b.serve(t, "--concurrency", "4")
	id := submit(t, b, path)
	follow := b.start(t, "events", "--follow", id)
	follow.until(t, regexp.MustCompile(`waiting_approval`))
	rep := b.status(t, id)
	require.Equal(t, api.WaitingApproval, rep.Task.Status)
	require.Equal(t, 99, rep.Task.Steps[0].Done, "the other 99 items committed while one waits")

	srv.kill(t)
	as := b.approvalsJSON(t)
	require.Len(t, as, 1, "the pending approval survived the kill")
	require.Equal(t, id, as[0].Task)
	require.Equal(t, 42, as[0].Item)
	require.Equal(t, "Deploy 42?", as[0].Prompt)
	require.JSONEq(t, `{"env":"prod","item":42}`, string(as[0].Subject))
	require.Equal(t, ledger.ApprovalPending, as[0].State)
	require.Contains(t, lhOK(t, b, "approvals"), "Deploy 42?")

	srv = b.serve(t, "--concurrency", "4")
	require.Contains(t, lhOK(t, b, "approve", id, as[0].ID, "--note", "change window open"), "approved by")
	lhOK(t, b, "events", "--follow", id)
	rep = b.status(t, id)
	require.Equal(t, api.Succeeded, rep.Task.Status, rep.Task.Reason)
	require.Equal(t, 100, rep.Task.Attempts, "every item ran once")
	as = b.approvalsJSON(t, id)
	require.Len(t, as, 1)
	require.Equal(t, ledger.ApprovalApproved, as[0].State)
	require.NotEmpty(t, as[0].DecidedBy)
	require.Equal(t, "change window open", as[0].Note)
	require.False(t, as[0].DecidedAt.IsZero())
	code, _, errOut := b.lh(t, "approve", id, as[0].ID)
	require.Equal(t, 1, code, "a decision is taken once")
	require.Contains(t, errOut, "is approved by")
	srv.stop(t)
}

// TestRunReturnsOnApprovalAndRejectFails: run returns with exit code 3 once
// only the approval is left, saying how to continue; a rejection from
// another process, then resume, fails the item with the note.
func TestRunReturnsOnApprovalAndRejectFails(t *testing.T) {
	t.Parallel()
	b := setupProcs(t)
	path := b.approvalTaskFile(t, "")
	code, out, errOut := b.lh(t, "run", path)
	require.Equal(t, 3, code, "%s\n%s", out, errOut)
	require.Contains(t, out, "waiting_approval")
	require.Contains(t, out, "lhengine approvals")
	as := b.approvalsJSON(t)
	require.Len(t, as, 1)
	id := as[0].Task
	out = lhOK(t, b, "reject", id, as[0].ID, "--note", "not on a Friday")
	require.Contains(t, out, "lhengine resume "+id, "nothing works the home: the command says how to continue")
	code, out, errOut = b.lh(t, "resume", id)
	require.Equal(t, 1, code, "%s\n%s", out, errOut)
	rep := b.status(t, id)
	require.Equal(t, api.Failed, rep.Task.Status)
	require.Contains(t, rep.Task.Failure.Message, "not on a Friday")
}

// TestApprovalExpiryPausesUnderServe: with on_expiry = "pause", an
// approval nobody decides expires under serve, pausing the task (reason
// approval_expired); resume asks again.
func TestApprovalExpiryPausesUnderServe(t *testing.T) {
	t.Parallel()
	b := setupProcs(t)
	path := b.approvalTaskFile(t, `expires_in = "1s"
      on_expiry  = "pause"`)
	srv := b.serve(t, "--concurrency", "4")
	id := submit(t, b, path)
	follow := b.start(t, "events", "--follow", id)
	follow.until(t, regexp.MustCompile(`approval_expired`))
	follow.until(t, regexp.MustCompile(`paused`))
	rep := b.status(t, id)
	require.Equal(t, api.Paused, rep.Task.Status)
	require.Equal(t, api.PauseApprovalExpired, rep.Task.Pause.Kind)
	require.Equal(t, "1", rep.Task.Pause.Name)
	as := b.approvalsJSON(t, id)
	require.Equal(t, ledger.ApprovalExpired, as[0].State)
	code, _, errOut := b.lh(t, "approve", id, "1")
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "expired")

	lhOK(t, b, "resume", id)
	follow = b.start(t, "events", "--follow", id)
	follow.until(t, regexp.MustCompile(`approval_requested`)) // the first
	follow.until(t, regexp.MustCompile(`approval_requested`)) // asked again
	as = b.approvalsJSON(t, id)
	require.Len(t, as, 2, "the resume asked again")
	require.Equal(t, ledger.ApprovalPending, as[1].State)
	srv.stop(t)
}
