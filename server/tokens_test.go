package server_test

import (
	"context"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lhengine/lhengine/api"
	"github.com/lhengine/lhengine/engine"
	"github.com/lhengine/lhengine/internal/homefiles"
	"github.com/lhengine/lhengine/internal/testwasm"
	"github.com/lhengine/lhengine/ledger"
	"github.com/lhengine/lhengine/server"
)

// approvalTask fans out over four items; items 1 and 2 wait for a
// person's approval.
const approvalTask = `
task "approve" {
  budget {
    units = 100
  }
  step "each" {
    plugin   = "step.wasm"
    for_each = range(4)
    input    = { mode = "echo", n = each.value }
    approval {
      when    = each.value == 1 || each.value == 2
      prompt  = "Deploy ${each.value}?"
      subject = { item = each.value, target = "prod <eu>" }
    }
  }
}
`

// submitApprovals submits approvalTask from dir (which gets the pipeline
// guest) and works it until its two approvals wait.
func submitApprovals(t *testing.T, e *engine.Engine, dir string) *ledger.Task {
	t.Helper()
	ctx := context.Background()
	testwasm.Copy(t, testwasm.CGuest(t, "pipeline"), filepath.Join(dir, "step.wasm"))
	file := filepath.Join(dir, "approve.hcl")
	require.NoError(t, os.WriteFile(file, []byte(approvalTask), 0o644))
	task, _, err := e.Submit(ctx, file, engine.SubmitOptions{})
	require.NoError(t, err)
	require.NoError(t, e.Work(ctx, engine.WorkOptions{Task: task.ID, Concurrency: 2, ExitWhenIdle: true}))
	got, err := e.Task(ctx, task.ID)
	require.NoError(t, err)
	require.Equal(t, ledger.WaitingApproval, got.Status, got.Reason)
	return got
}

// TestNamedTokensOverTCP: behind RequireTokens reading the home's tokens,
// over a real TCP listener, a pause and a decision made with alice's
// token are recorded as made by "alice" whatever the body claims; with the
// home's own token, by "owner"; a wrong token gets 401 and changes
// nothing; a token removed is refused from the next request on, and one
// added while the server runs works at once.
func TestNamedTokensOverTCP(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	home := filepath.Join(dir, "home")
	e, err := engine.Open(ctx, engine.Config{Home: home})
	require.NoError(t, err)
	owner, err := homefiles.Token(home)
	require.NoError(t, err)
	alice, err := homefiles.AddToken(home, "alice")
	require.NoError(t, err)
	require.Len(t, alice, 64)
	require.NotEqual(t, owner, alice)

	srv := server.New(e, server.Options{Logger: testLogger(t)})
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	sctx, stop := context.WithCancel(ctx)
	served := make(chan error, 1)
	go func() {
		served <- srv.Serve(sctx, l, server.RequireTokens(srv.Handler(), func() (map[string]string, error) { return homefiles.Tokens(home) }), 0)
	}()
	defer func() {
		stop()
		require.NoError(t, <-served)
		require.NoError(t, e.Close(ctx))
	}()
	base := "http://" + l.Addr().String()
	asAlice, asOwner := api.NewClient(base, nil, alice), api.NewClient(base, nil, owner)
	wrong := api.NewClient(base, nil, strings.Repeat("0", 64))

	task := submitApprovals(t, e, dir)
	as := approvalsOf(t, e, task.ID)
	require.Len(t, as, 2)

	// A wrong token: 401, and nothing changes.
	var ae *api.Error
	_, err = wrong.Decide(ctx, task.ID, as[0].ID, true, api.DecideRequest{By: "mallory"})
	require.ErrorAs(t, err, &ae)
	require.Equal(t, http.StatusUnauthorized, ae.HTTPStatus)
	_, err = wrong.Pause(ctx, task.ID, api.PauseRequest{By: "mallory", Grace: "0s"})
	require.ErrorAs(t, err, &ae)
	require.Equal(t, http.StatusUnauthorized, ae.HTTPStatus)
	require.Equal(t, ledger.ApprovalPending, approvalsOf(t, e, task.ID)[0].State)

	// alice decides one, owner the other; both bodies claim mallory.
	d, err := asAlice.Decide(ctx, task.ID, as[0].ID, true, api.DecideRequest{By: "mallory", Note: "fine"})
	require.NoError(t, err)
	require.Equal(t, "alice", d.Approval.DecidedBy)
	d, err = asOwner.Decide(ctx, task.ID, as[1].ID, false, api.DecideRequest{By: "mallory", Note: "not this one"})
	require.NoError(t, err)
	require.Equal(t, "owner", d.Approval.DecidedBy)
	as = approvalsOf(t, e, task.ID)
	require.Equal(t, ledger.ApprovalApproved, as[0].State)
	require.Equal(t, "alice", as[0].DecidedBy, "the record, not only the answer")
	require.Equal(t, ledger.ApprovalRejected, as[1].State)
	require.Equal(t, "owner", as[1].DecidedBy)

	// Pauses: alice's, then the owner's.
	p, err := asAlice.Pause(ctx, task.ID, api.PauseRequest{Reason: "lunch", By: "mallory", Grace: "0s"})
	require.NoError(t, err)
	require.Equal(t, api.Paused, p.Status)
	require.Equal(t, "alice", p.Pause.By)
	require.Equal(t, "paused by alice: lunch", p.Reason)
	_, err = asOwner.Resume(ctx, task.ID)
	require.NoError(t, err)
	p, err = asOwner.Pause(ctx, task.ID, api.PauseRequest{By: "mallory", Grace: "0s"})
	require.NoError(t, err)
	require.Equal(t, "owner", p.Pause.By)
	stored, err := e.Task(ctx, task.ID)
	require.NoError(t, err)
	require.Equal(t, "owner", stored.Pause.By)

	// Removed: refused at the next request. Added: works at once.
	require.NoError(t, homefiles.RemoveToken(home, "alice"))
	_, err = asAlice.Task(ctx, task.ID)
	require.ErrorAs(t, err, &ae)
	require.Equal(t, http.StatusUnauthorized, ae.HTTPStatus)
	bob, err := homefiles.AddToken(home, "bob")
	require.NoError(t, err)
	_, err = api.NewClient(base, nil, bob).ResumeWith(ctx, task.ID, api.ResumeRequest{Budget: []string{"units=+10"}, By: "mallory"})
	require.NoError(t, err)
	evs, err := asOwner.Events(ctx, task.ID, 0)
	require.NoError(t, err)
	require.Equal(t, 1, raisedBy(t, evs, "bob"))
}

func approvalsOf(t *testing.T, e *engine.Engine, id string) []ledger.Approval {
	t.Helper()
	var out []ledger.Approval
	require.NoError(t, e.Read(func(r ledger.Reader) error {
		var err error
		out, err = r.Approvals(id)
		return err
	}))
	return out
}
