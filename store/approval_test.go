package store

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lhengine/lhengine/ledger"
	"github.com/lhengine/lhengine/store/internal/kv"
)

func (b *testBundle) approvals(t *testing.T, id string) []ledger.Approval {
	t.Helper()
	var out []ledger.Approval
	require.NoError(t, b.s.Read(func(r ledger.Reader) error {
		var err error
		out, err = r.Approvals(id)
		return err
	}))
	return out
}

func (b *testBundle) unit(t *testing.T, id string, step, item int) *ledger.Unit {
	t.Helper()
	u := new(ledger.Unit)
	require.NoError(t, b.s.view(func(tx *kv.Tx) error { return tx.GetJSON(kv.UnitKey(id, step, item), u) }))
	return u
}

// TestApprovalWaitBlocksOnlyItsUnit: in a fan-out of 5 where item 2 asks
// for an approval, the other 4 are claimed and commit while it waits; the
// task is running until they are done, then waiting_approval; an approval
// makes the unit claimable again with the same attempt number.
func TestApprovalWaitBlocksOnlyItsUnit(t *testing.T) {
	t.Parallel()
	b := setup(t, fanOutPlanner(5))
	task := b.submit(t, []ledger.StepState{{Name: "each", FanOut: true, Limit: 5}})
	ls := b.claimN(t, 5)
	require.Len(t, ls, 5)
	var asked ledger.Lease
	for _, l := range ls {
		if l.Item == 2 {
			asked = l
		}
	}
	tk, a, err := b.s.RequestApproval(b.ctx, asked, ledger.Approval{Source: ledger.ApprovalFromStep, Prompt: "deploy 2?", Subject: json.RawMessage(`{"n":2}`)})
	require.NoError(t, err)
	require.Equal(t, "1", a.ID)
	require.Equal(t, ledger.ApprovalPending, a.State)
	require.Equal(t, ledger.SubjectSum([]byte(`{"n":2}`)), a.SubjectSHA256)
	require.Equal(t, ledger.Running, tk.Status, "four units are still in flight")
	require.Equal(t, 1, tk.Waiting)
	u := b.unit(t, task.ID, 0, 2)
	require.Equal(t, ledger.UnitWaiting, u.State)
	require.Equal(t, asked.Attempt-1, u.Attempt, "the attempt is given back, not charged")

	for _, l := range ls {
		if l.Item != 2 {
			tk = b.done(t, l, `1`)
		}
	}
	require.Equal(t, ledger.WaitingApproval, tk.Status, "nothing else can run")
	require.Contains(t, tk.Reason, "lhengine approve "+task.ID+" 1", "the reason says what it waits for and how to decide")
	require.Empty(t, b.claimN(t, 5), "a waiting unit without an expiry is never claimed")
	require.Len(t, b.events(t, task.ID, ledger.EvWaitingApproval), 1)

	got, tk, err := b.s.DecideApproval(b.ctx, task.ID, "1", true, "alice", "go")
	require.NoError(t, err)
	require.Equal(t, ledger.ApprovalApproved, got.State)
	require.Equal(t, "alice", got.DecidedBy)
	require.Equal(t, ledger.Running, tk.Status)
	_, _, err = b.s.DecideApproval(b.ctx, task.ID, "1", false, "bob", "")
	require.ErrorIs(t, err, ledger.ErrApprovalClosed, "a decision is taken once")

	again := b.claimN(t, 5)
	require.Len(t, again, 1)
	require.Equal(t, 2, again[0].Item)
	require.Equal(t, asked.Attempt, again[0].Attempt, "the attempt on the decision has the given-back number")
	require.Equal(t, "1", again[0].Unit.Approval)
	require.NoError(t, b.s.UseApproval(b.ctx, again[0], "1"))
	tk = b.done(t, again[0], `1`)
	require.Equal(t, ledger.Succeeded, tk.Status)
	require.Equal(t, asked.Attempt, b.approvals(t, task.ID)[0].UsedBy)
	ev := b.events(t, task.ID, ledger.EvApprovalDecided)
	require.Len(t, ev, 1)
	require.Equal(t, "alice", ev[0].Owner)
}

// TestApprovalExpiryMakesTheUnitClaimable: a waiting unit is claimed at
// its approval's expiry (not before), and a decision after it is refused.
func TestApprovalExpiryMakesTheUnitClaimable(t *testing.T) {
	t.Parallel()
	b := setup(t)
	task := b.submit(t, plainSteps("deploy"))
	l := b.claim1(t, "w")
	exp := b.clock.Now().Add(time.Hour)
	tk, _, err := b.s.RequestApproval(b.ctx, l, ledger.Approval{Prompt: "ok?", Expires: exp, OnExpiry: "reject"})
	require.NoError(t, err)
	require.Equal(t, ledger.WaitingApproval, tk.Status)
	c, err := b.s.Claim(b.ctx, ledger.ClaimRequest{Owner: b.s.Owner("w"), Max: 1})
	require.NoError(t, err)
	require.Empty(t, c.Leases)
	require.Equal(t, exp, c.Wake, "the claim says when to look again")

	b.clock.Add(time.Hour)
	_, _, err = b.s.DecideApproval(b.ctx, task.ID, "1", true, "alice", "")
	require.ErrorIs(t, err, ledger.ErrApprovalClosed)
	require.Contains(t, err.Error(), "expired")
	l2 := b.claim1(t, "w")
	require.Equal(t, "1", l2.Unit.Approval)
	tk, err = b.s.Task(b.ctx, task.ID)
	require.NoError(t, err)
	require.Equal(t, ledger.Running, tk.Status)
	require.Zero(t, tk.Waiting)
	a, err := b.s.CloseApproval(b.ctx, l2, "1", ledger.ApprovalExpired, "")
	require.NoError(t, err)
	require.Equal(t, ledger.ApprovalExpired, a.State)
}

// TestWaitingSurvivesReopen: the waiting unit, its approval and the
// expiry's place in the queue survive closing and opening the store.
func TestWaitingSurvivesReopen(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	c := &clock{now: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	s, err := Open(dir, Options{Now: c.Now})
	require.NoError(t, err)
	b := &testBundle{s: s, clock: c, ctx: t.Context()}
	task := b.submit(t, plainSteps("deploy"))
	l := b.claim1(t, "w")
	_, _, err = s.RequestApproval(b.ctx, l, ledger.Approval{Prompt: "ok?", Expires: c.Now().Add(time.Minute), OnExpiry: "pause"})
	require.NoError(t, err)
	require.NoError(t, s.Close())

	s, err = Open(dir, Options{Now: c.Now})
	require.NoError(t, err)
	defer func() { require.NoError(t, s.Close()) }()
	b.s = s
	require.Empty(t, b.claimN(t, 1))
	tk, err := s.Task(b.ctx, task.ID)
	require.NoError(t, err)
	require.Equal(t, ledger.WaitingApproval, tk.Status)
	c.Add(time.Minute)
	require.Len(t, b.claimN(t, 1), 1, "claimed at the expiry after a restart")
}

// TestRepairVoidsPendingApprovals: a repair that enters the step again
// voids the approvals its earlier pass waited for; a late decision is
// refused and wakes nothing.
func TestRepairVoidsPendingApprovals(t *testing.T) {
	t.Parallel()
	b := setup(t, fanOutPlanner(2))
	task := b.submit(t, []ledger.StepState{{Name: "each", FanOut: true, Limit: 2}})
	ls := b.claimN(t, 2)
	_, _, err := b.s.RequestApproval(b.ctx, ls[0], ledger.Approval{Prompt: "?"})
	require.NoError(t, err)
	_, err = b.s.Commit(b.ctx, ledger.Result{Lease: ls[1], Repair: &ledger.Repair{RestartFrom: 0, Max: 3, Reason: "again"}})
	require.NoError(t, err)
	as := b.approvals(t, task.ID)
	require.Len(t, as, 1)
	require.Equal(t, ledger.ApprovalVoided, as[0].State)
	_, _, err = b.s.DecideApproval(b.ctx, task.ID, "1", true, "alice", "")
	require.ErrorIs(t, err, ledger.ErrApprovalClosed)
	tk, err := b.s.Task(b.ctx, task.ID)
	require.NoError(t, err)
	require.Zero(t, tk.Waiting)
	require.Len(t, b.claimN(t, 2), 2, "the new pass runs both items")
}

// TestEffectWaitHoldsOnlyItsUnit: a unit whose effect's outcome is unknown
// waits alone: the other items are claimed and commit; then, with nothing
// else to run, the task pauses with the unit's reason; settling the effect
// makes the unit ready and the task running, and it finishes.
func TestEffectWaitHoldsOnlyItsUnit(t *testing.T) {
	t.Parallel()
	b := setup(t, fanOutPlanner(3))
	task := b.submit(t, []ledger.StepState{{Name: "send", FanOut: true, Limit: 3}})
	ls := b.claimN(t, 3)
	require.Len(t, ls, 3)
	require.NoError(t, b.s.RecordEffect(b.ctx, ls[1], &ledger.Effect{Task: task.ID, Step: 0, StepName: "send", Item: 1, Key: "mail-1",
		Kind: "http", State: ledger.EffectIntent, Mode: "manual"}))
	tk, err := b.s.WaitEffect(b.ctx, ls[1], "mail-1", "effect mail-1: outcome unknown; confirm with `lhengine effect confirm x`")
	require.NoError(t, err)
	require.Equal(t, ledger.Running, tk.Status, "the other units are still in flight")
	b.done(t, ls[0], `0`)
	tk = b.done(t, ls[2], `2`)
	require.Equal(t, ledger.Paused, tk.Status, "nothing else can run")
	require.Equal(t, ledger.PauseEffect, tk.Pause.Kind)
	require.Contains(t, tk.Reason, "lhengine effect confirm x")
	require.Empty(t, b.claimN(t, 3))

	_, err = b.s.ResolveEffect(b.ctx, task.ID, 0, 1, "mail-1", true, "seen")
	require.NoError(t, err)
	tk, err = b.s.Task(b.ctx, task.ID)
	require.NoError(t, err)
	require.Equal(t, ledger.Running, tk.Status)
	again := b.claimN(t, 3)
	require.Len(t, again, 1)
	require.Equal(t, 1, again[0].Item)
	require.Equal(t, ls[1].Attempt, again[0].Attempt, "the wait cost no attempt")
	require.Equal(t, ledger.Succeeded, b.done(t, again[0], `1`).Status)
}

// TestCompactNotesRefusesProtectedAndReplaced: a summary replaces findings
// and summaries only, once each, and OpenNotes lists only what it may
// replace.
func TestCompactNotesRefusesProtectedAndReplaced(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.submit(t, plainSteps("a", "b"))
	l := b.claim1(t, "w")
	_, err := b.s.Commit(b.ctx, ledger.Result{Lease: l, Output: []byte(`1`), Notes: []ledger.Note{
		{Kind: ledger.NoteFinding, Text: "f0"}, {Kind: ledger.NoteDecision, Text: "d1"}, {Kind: ledger.NoteBlocker, Text: "b2"}, {Kind: ledger.NoteFinding, Text: "f3"}}})
	require.NoError(t, err)
	l = b.claim1(t, "w")
	var open []ledger.Note
	require.NoError(t, b.s.Read(func(r ledger.Reader) error {
		var err error
		open, err = r.OpenNotes(l.Task, -1, 10)
		return err
	}))
	require.Len(t, open, 2)
	_, err = b.s.CompactNotes(b.ctx, l, []uint64{0, 1}, "x")
	require.ErrorIs(t, err, ledger.ErrProtected)
	_, err = b.s.CompactNotes(b.ctx, l, []uint64{2}, "x")
	require.ErrorIs(t, err, ledger.ErrProtected)
	seq, err := b.s.CompactNotes(b.ctx, l, []uint64{0, 3}, "two findings")
	require.NoError(t, err)
	require.Equal(t, uint64(4), seq)
	_, err = b.s.CompactNotes(b.ctx, l, []uint64{3}, "again")
	require.ErrorIs(t, err, ledger.ErrNotFound, "a note is replaced once")
	require.NoError(t, b.s.Read(func(r ledger.Reader) error {
		var err error
		open, err = r.OpenNotes(l.Task, -1, 10)
		return err
	}))
	require.Len(t, open, 1)
	require.Equal(t, []uint64{0, 3}, open[0].Replaces)
}
