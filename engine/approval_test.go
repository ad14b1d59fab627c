package engine_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lhengine/lhengine/engine"
	"github.com/lhengine/lhengine/fault"
	"github.com/lhengine/lhengine/internal/testwasm"
	"github.com/lhengine/lhengine/ledger"
)

// approvalTask fans out over 100 items; item 42 needs an approval whose
// subject is its value.
const approvalTask = `
task "approve" {
  variable "n" {
    type    = number
    default = 42
  }
  step "each" {
    plugin   = "step.wasm"
    for_each = range(100)
    concurrency = 8
    input    = { mode = "echo", n = each.value }
    approval {
      when    = each.value == var.n
      prompt  = "Deploy ${each.value}?"
      subject = { item = each.value }
    }
  }
}
`

func (b *testBundle) approvals(t *testing.T, id string) []ledger.Approval {
	t.Helper()
	var out []ledger.Approval
	require.NoError(t, b.e.Read(func(r ledger.Reader) error {
		var err error
		out, err = r.Approvals(id)
		return err
	}))
	return out
}

// TestApprovalInAFanOutWaitsAlone: the 99 other items commit while item 42
// waits; the task then waits for approval and Work returns; an approval
// from elsewhere lets the task finish, the item running once.
func TestApprovalInAFanOutWaitsAlone(t *testing.T) {
	t.Parallel()
	b := setup(t, approvalTask)
	task := b.submit(t, nil)
	require.NoError(t, b.e.Work(b.ctx, engine.WorkOptions{Task: task.ID, Concurrency: 8, ExitWhenIdle: true}))
	got, err := b.e.Task(b.ctx, task.ID)
	require.NoError(t, err)
	require.Equal(t, ledger.WaitingApproval, got.Status, got.Reason)
	require.Equal(t, 99, got.Steps[0].Done, "every other item committed while one waits")
	as := b.approvals(t, task.ID)
	require.Len(t, as, 1)
	require.Equal(t, 42, as[0].Item)
	require.Equal(t, "Deploy 42?", as[0].Prompt)
	require.JSONEq(t, `{"item":42}`, string(as[0].Subject))

	_, _, err = b.e.Decide(b.ctx, task.ID, as[0].ID, true, "alice", "looks fine")
	require.NoError(t, err)
	require.NoError(t, b.e.Work(b.ctx, engine.WorkOptions{Task: task.ID, Concurrency: 8, ExitWhenIdle: true}))
	got, err = b.e.Task(b.ctx, task.ID)
	require.NoError(t, err)
	require.Equal(t, ledger.Succeeded, got.Status, got.Reason)
	require.Equal(t, 100, got.Attempts, "every item ran once: the wait cost no attempt")
	as = b.approvals(t, task.ID)
	require.Equal(t, ledger.ApprovalApproved, as[0].State)
	require.NotZero(t, as[0].UsedBy)
}

// TestRejectionFailsTheUnitWithTheNote: a rejection fails the item (kind
// rejected, not retried) with the note as its reason.
func TestRejectionFailsTheUnitWithTheNote(t *testing.T) {
	t.Parallel()
	b := setup(t, approvalTask)
	task := b.submit(t, nil)
	require.NoError(t, b.e.Work(b.ctx, engine.WorkOptions{Task: task.ID, Concurrency: 8, ExitWhenIdle: true}))
	_, _, err := b.e.Decide(b.ctx, task.ID, "1", false, "bob", "not on a Friday")
	require.NoError(t, err)
	require.NoError(t, b.e.Work(b.ctx, engine.WorkOptions{Task: task.ID, Concurrency: 8, ExitWhenIdle: true}))
	got, err := b.e.Task(b.ctx, task.ID)
	require.NoError(t, err)
	require.Equal(t, ledger.Failed, got.Status)
	require.Equal(t, fault.Rejected, got.Failure.Kind)
	require.Contains(t, got.Failure.Message, "rejected by bob: not on a Friday")
	require.Equal(t, 42, got.Failure.Item)
}

// TestPluginApprovalAndChangedSubject: a plugin asks through
// approval.request; the unit waits, and once approved the step runs again
// and the call returns the decision. A subject that changed after the
// decision voids it with an event saying why, and asks again.
func TestPluginApprovalAndChangedSubject(t *testing.T) {
	t.Parallel()
	b := setup(t, `
task "one" {
  step "apply" {
    plugin = "approver.wasm"
    input  = { subject_file = "deploy.yaml" }
    mount "cfg" { source = "cfg" }
  }
}
`)
	testwasm.Copy(t, testwasm.GoGuest(t, "approver"), filepath.Join(b.dir, "approver.wasm"))
	require.NoError(t, os.Mkdir(filepath.Join(b.dir, "cfg"), 0o755))
	writeFile(t, filepath.Join(b.dir, "cfg", "deploy.yaml"), "replicas: 2")
	task := b.submit(t, nil)
	work := func() *ledger.Task {
		require.NoError(t, b.e.Work(b.ctx, engine.WorkOptions{Task: task.ID, ExitWhenIdle: true}))
		got, err := b.e.Task(b.ctx, task.ID)
		require.NoError(t, err)
		return got
	}
	got := work()
	require.Equal(t, ledger.WaitingApproval, got.Status, got.Reason)
	require.Zero(t, got.Attempts, "asking costs no attempt")
	as := b.approvals(t, task.ID)
	require.Len(t, as, 1)
	require.Equal(t, ledger.ApprovalFromPlugin, as[0].Source)
	require.JSONEq(t, `"replicas: 2"`, string(as[0].Subject))

	_, _, err := b.e.Decide(b.ctx, task.ID, as[0].ID, true, "alice", "")
	require.NoError(t, err)
	writeFile(t, filepath.Join(b.dir, "cfg", "deploy.yaml"), "replicas: 200")
	got = work()
	require.Equal(t, ledger.WaitingApproval, got.Status, "the approval was for another subject")
	as = b.approvals(t, task.ID)
	require.Len(t, as, 2)
	require.Equal(t, ledger.ApprovalVoided, as[0].State)
	require.Contains(t, as[0].Void, "the subject changed")
	require.JSONEq(t, `"replicas: 200"`, string(as[1].Subject))
	var voided []ledger.Event
	require.NoError(t, b.e.Read(func(r ledger.Reader) error {
		evs, err := r.Events(task.ID, 0, 0)
		for _, e := range evs {
			if e.Type == ledger.EvApprovalVoided {
				voided = append(voided, e)
			}
		}
		return err
	}))
	require.Len(t, voided, 1)
	require.Contains(t, voided[0].Message, "the subject changed")

	_, _, err = b.e.Decide(b.ctx, task.ID, as[1].ID, true, "bob", "ok at 200")
	require.NoError(t, err)
	got = work()
	require.Equal(t, ledger.Succeeded, got.Status, got.Reason)
	require.JSONEq(t, `{"approval":"2","decision":"approved","by":"bob","note":"ok at 200"}`, b.output(t, task.ID, "apply"))
}
