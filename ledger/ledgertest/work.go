package ledgertest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lhengine/lhengine/fault"
	"github.com/lhengine/lhengine/ledger"
)

// The lease protocol: submit, claim, renew, commit, give back.

var _ = register("SubmitIsIdempotentByKey", func(t *testing.T, open Factory) {
	b := newBench(t, open, nil)
	a, created, err := b.s.Submit(b.ctx, ledger.NewTask{Name: "t", Steps: steps("a"), IdempotencyKey: "k1"})
	require.NoError(t, err)
	require.True(t, created)
	require.Equal(t, ledger.Queued, a.Status)
	again, created, err := b.s.Submit(b.ctx, ledger.NewTask{Name: "t", Steps: steps("a"), IdempotencyKey: "k1"})
	require.NoError(t, err)
	require.False(t, created, "a second submit with the key creates nothing")
	require.Equal(t, a.ID, again.ID)
	b.clock.Add(time.Millisecond)
	other, created, err := b.s.Submit(b.ctx, ledger.NewTask{Name: "t", Steps: steps("a"), IdempotencyKey: "k2"})
	require.NoError(t, err)
	require.True(t, created)
	require.NotEqual(t, a.ID, other.ID)
	require.Less(t, a.ID, other.ID, "task ids sort by creation")
})

var _ = register("ReadsFindTasksByIDAndPrefix", func(t *testing.T, open Factory) {
	b := newBench(t, open, nil)
	task := b.submit(steps("a", "b"))
	b.read(func(r ledger.Reader) error {
		got, err := r.FindTask(task.ID[:len(task.ID)-4])
		require.NoError(t, err)
		require.Equal(t, task.ID, got.ID)
		require.Len(t, got.Steps, 2, "a task read has every step")
		_, err = r.Task("no-such-task")
		require.ErrorIs(t, err, ledger.ErrNotFound)
		all, err := r.Tasks()
		require.NoError(t, err)
		require.Len(t, all, 1)
		m, err := r.Manifest(task.ID)
		require.NoError(t, err)
		require.NotNil(t, m)
		return nil
	})
	_, err := b.s.Task(b.ctx, "no-such-task")
	require.ErrorIs(t, err, ledger.ErrNotFound)
})

var _ = register("ClaimTakesEachUnitOnceWithANewEpoch", func(t *testing.T, open Factory) {
	b := newBench(t, open, nil)
	task := b.submit(steps("a"))
	l := b.claim1("w1")
	require.Equal(t, task.ID, l.Task)
	require.Equal(t, 0, l.Step)
	require.Equal(t, 1, l.Attempt)
	require.Equal(t, b.clock.Now().Add(30*time.Second), l.Until)
	require.Positive(t, l.Epoch)
	c := b.claim("w2", 5)
	require.Empty(t, c.Leases, "a leased unit is not claimed again while its lease lasts")
	require.Equal(t, l.Until, c.Wake, "the claimer learns when the lease runs out")
	got := b.task(task.ID)
	require.Equal(t, ledger.Running, got.Status)
	require.Equal(t, 1, got.Leases)
	require.Equal(t, 1, got.Attempts)
})

var _ = register("ClaimsRespectAStepsLimitAndOrderItems", func(t *testing.T, open Factory) {
	b := newBench(t, open, planN(10))
	task := b.submit([]ledger.StepState{{Name: "each", FanOut: true, Limit: 3}})
	c := b.claim("w", 10)
	require.Len(t, c.Leases, 3, "limit 3 bounds the leases of the step")
	for i, l := range c.Leases {
		require.Equal(t, i, l.Item, "units are claimed in item order")
		require.JSONEq(t, fmt.Sprintf(`"item-%d"`, i), string(l.Unit.Value))
	}
	require.Empty(t, b.claim("w", 10).Leases)
	b.done(c.Leases[0], `0`)
	more := b.claim("w", 10)
	require.Len(t, more.Leases, 1, "a commit frees one slot of the limit")
	require.Equal(t, 3, more.Leases[0].Item)
	require.Equal(t, 3, b.task(task.ID).Leases)
})

var _ = register("ClaimOfOneTaskTakesOnlyItsUnits", func(t *testing.T, open Factory) {
	b := newBench(t, open, nil)
	first := b.submit(steps("a"))
	second := b.submit(steps("a"))
	c, err := b.s.Claim(b.ctx, ledger.ClaimRequest{Owner: b.s.Owner("w"), Max: 5, LeaseFor: time.Minute, Task: second.ID})
	require.NoError(t, err)
	require.Len(t, c.Leases, 1)
	require.Equal(t, second.ID, c.Leases[0].Task)
	require.Equal(t, ledger.Queued, b.task(first.ID).Status)
})

var _ = register("AnExpiredLeaseIsTakenOverAndTheOldOneFenced", func(t *testing.T, open Factory) {
	b := newBench(t, open, nil)
	task := b.submit(steps("a"))
	zombie := b.claim1("w1")
	b.clock.Add(29 * time.Second)
	require.Empty(t, b.claim("w2", 1).Leases, "a live lease cannot be stolen")
	b.clock.Add(2 * time.Second)
	c, err := b.s.Claim(b.ctx, ledger.ClaimRequest{Owner: b.s.Owner("w2"), Max: 1, LeaseFor: 30 * time.Second})
	require.NoError(t, err)
	require.Len(t, c.Leases, 1)
	require.Equal(t, 1, c.Reclaimed, "the claim says it took a lease back")
	fresh := c.Leases[0]
	require.Equal(t, zombie.Step, fresh.Step)
	require.Greater(t, fresh.Epoch, zombie.Epoch, "a takeover takes a new epoch")
	require.Equal(t, 2, fresh.Attempt)

	// The zombie's late calls are refused and change nothing.
	before := b.events(task.ID)
	_, err = b.s.Commit(b.ctx, ledger.Result{Lease: zombie, Output: json.RawMessage(`"late"`)})
	require.ErrorIs(t, err, ledger.ErrLeaseLost)
	_, err = b.s.Heartbeat(b.ctx, zombie, time.Minute)
	require.ErrorIs(t, err, ledger.ErrLeaseLost)
	require.Equal(t, before, b.events(task.ID), "a refused commit writes nothing")

	got := b.done(fresh, `"fresh"`)
	require.Equal(t, ledger.Succeeded, got.Status)
	require.Equal(t, 1, got.Reclaims)
	b.read(func(r ledger.Reader) error {
		out, err := r.StepOutput(task.ID, 0)
		require.NoError(t, err)
		require.JSONEq(t, `"fresh"`, string(out))
		return nil
	})
})

var _ = register("OnlyTheOwnerRenewsALease", func(t *testing.T, open Factory) {
	b := newBench(t, open, nil)
	b.submit(steps("a"))
	l := b.claim1("w1")
	thief := l
	thief.Owner = b.s.Owner("w2")
	_, err := b.s.Heartbeat(b.ctx, thief, time.Minute)
	require.ErrorIs(t, err, ledger.ErrLeaseLost)
	stale := l
	stale.Epoch--
	_, err = b.s.Heartbeat(b.ctx, stale, time.Minute)
	require.ErrorIs(t, err, ledger.ErrLeaseLost, "the epoch is checked, not only the owner")

	b.clock.Add(20 * time.Second)
	until, err := b.s.Heartbeat(b.ctx, l, 30*time.Second)
	require.NoError(t, err)
	require.Equal(t, b.clock.Now().Add(30*time.Second), until)
	b.clock.Add(20 * time.Second) // past the first lease, inside the renewed one
	require.Empty(t, b.claim("w2", 1).Leases, "a renewed lease is not taken over")
	l.Until = until
	require.Equal(t, ledger.Succeeded, b.done(l, `1`).Status)
})

var _ = register("ACommitAdvancesTheTaskAndTellsTheStory", func(t *testing.T, open Factory) {
	b := newBench(t, open, nil)
	task := b.submit(steps("a", "b"))
	got := b.done(b.claim1("w"), `{"x":1}`)
	require.Equal(t, ledger.Running, got.Status)
	require.Equal(t, 1, got.Cursor)
	l := b.claim1("w")
	require.Equal(t, 1, l.Step)
	require.Len(t, l.Snapshot.Steps, 1, "the lease's snapshot holds the steps before the unit's")
	got = b.done(l, `{"y":2}`)
	require.Equal(t, ledger.Succeeded, got.Status)
	require.True(t, got.Status.Terminal())
	require.Equal(t, []ledger.EventType{ledger.EvSubmitted, ledger.EvStepStarted, ledger.EvStarted, ledger.EvUnitDone,
		ledger.EvStepDone, ledger.EvStepStarted, ledger.EvUnitDone, ledger.EvStepDone, ledger.EvSucceeded}, b.events(task.ID))
	b.read(func(r ledger.Reader) error {
		out, err := r.StepOutput(task.ID, 0)
		require.NoError(t, err)
		require.JSONEq(t, `{"x":1}`, string(out))
		at, err := r.Attempts(task.ID, 1)
		require.NoError(t, err)
		require.Len(t, at, 1)
		from, err := r.Events(task.ID, 3, 2)
		require.NoError(t, err)
		require.Len(t, from, 2)
		require.Equal(t, uint64(3), from[0].Seq)
		return nil
	})
	_, err := b.s.Commit(b.ctx, ledger.Result{Lease: l, Output: json.RawMessage(`1`)})
	require.Error(t, err, "a unit commits once")
})

var _ = register("CommitAndClaimHandsBackTheNextUnitAndItsDurability", func(t *testing.T, open Factory) {
	b := newBench(t, open, planN(3))
	task := b.submit([]ledger.StepState{{Name: "each", FanOut: true, Limit: 1}})
	l := b.claim1("w")
	for i := range 3 {
		require.Equal(t, i, l.Item)
		next := ledger.ClaimRequest{Owner: b.s.Owner("w"), Max: 1, LeaseFor: 30 * time.Second}
		got, c, dur, err := b.s.CommitAndClaim(b.ctx, ledger.Result{Lease: l, Output: json.RawMessage(fmt.Sprint(i))}, next)
		require.NoError(t, err)
		require.NotNil(t, dur)
		require.NoError(t, dur.Wait(b.ctx))
		select {
		case <-dur.Done():
		default:
			t.Fatal("Done is not closed after Wait returned")
		}
		if i < 2 {
			require.Len(t, c.Leases, 1, "the commit freed the slot, and the same transaction took the next unit")
			l = c.Leases[0]
			require.Equal(t, ledger.Running, got.Status)
		} else {
			require.Empty(t, c.Leases)
			require.Equal(t, ledger.Succeeded, got.Status)
		}
	}
	b.read(func(r ledger.Reader) error {
		out, err := r.StepOutput(task.ID, 0)
		require.NoError(t, err)
		require.JSONEq(t, `[0,1,2]`, string(out))
		return nil
	})
})

var _ = register("AFanOutCommittedConcurrentlyKeepsItemOrder", func(t *testing.T, open Factory) {
	b := newBench(t, open, planN(20))
	task := b.submit([]ledger.StepState{{Name: "list"}, {Name: "each", FanOut: true, Limit: 8}, {Name: "sum"}})
	b.done(b.claim1("w"), `"listed"`)
	for {
		c := b.claim("w", 8)
		if len(c.Leases) == 1 && c.Leases[0].Step == 2 {
			break
		}
		require.NotEmpty(t, c.Leases)
		var wg sync.WaitGroup
		errs := make([]error, len(c.Leases))
		for i, l := range c.Leases {
			wg.Go(func() {
				_, errs[i] = b.s.Commit(b.ctx, ledger.Result{Lease: l, Output: json.RawMessage(fmt.Sprintf(`{"n":%d}`, l.Item))})
			})
		}
		wg.Wait()
		for _, err := range errs {
			require.NoError(t, err)
		}
	}
	b.read(func(r ledger.Reader) error {
		out, err := r.StepOutput(task.ID, 1)
		require.NoError(t, err)
		var got []struct{ N int }
		require.NoError(t, json.Unmarshal(out, &got))
		require.Len(t, got, 20)
		for i, g := range got {
			require.Equal(t, i, g.N, "a fan-out's output is in item order, whatever order its units committed in")
		}
		task, err := r.Task(task.ID)
		require.NoError(t, err)
		page, all, err := r.CommittedOutputs(task, 1, 5)
		require.NoError(t, err)
		require.Equal(t, 20, all)
		require.Len(t, page, 5)
		units, err := r.UnitsUpTo(task.ID, 1, 3)
		require.NoError(t, err)
		require.Len(t, units, 3)
		return nil
	})
})

var _ = register("AnEmptyFanOutCompletesAtOnce", func(t *testing.T, open Factory) {
	b := newBench(t, open, planN(0))
	task := b.submit([]ledger.StepState{{Name: "each", FanOut: true, Limit: 3}, {Name: "after"}})
	require.Equal(t, 1, b.claim1("w").Step)
	b.read(func(r ledger.Reader) error {
		out, err := r.StepOutput(task.ID, 0)
		require.NoError(t, err)
		require.JSONEq(t, `[]`, string(out))
		return nil
	})
})

var _ = register("APlanningFailureFailsTheTask", func(t *testing.T, open Factory) {
	bad := func(context.Context, ledger.Reader, *ledger.Task, int) ([]ledger.Item, error) {
		return nil, errors.New("for_each is a string")
	}
	b := newBench(t, open, bad)
	b.submit([]ledger.StepState{{Name: "a"}, {Name: "each", FanOut: true}})
	got, err := b.s.Commit(b.ctx, ledger.Result{Lease: b.claim1("w"), Output: json.RawMessage(`1`)})
	require.NoError(t, err)
	if got.Status != ledger.Failed {
		got = b.task(got.ID) // planned after the commit returned
	}
	require.Equal(t, ledger.Failed, got.Status)
	require.Equal(t, fault.Input, got.Failure.Kind)
	require.Contains(t, got.Reason, "for_each is a string")
})

var _ = register("AFailureWaitsForItsBackoffThenRetries", func(t *testing.T, open Factory) {
	b := newBench(t, open, nil)
	task := b.submit(steps("a"))
	retryAt := b.clock.Now().Add(5 * time.Second)
	got, err := b.s.Commit(b.ctx, ledger.Result{Lease: b.claim1("w"), Failure: &ledger.Failure{Kind: fault.Timeout, Message: "slow"}, RetryAt: retryAt})
	require.NoError(t, err)
	require.Equal(t, ledger.Running, got.Status)
	require.Equal(t, 1, got.ConsecutiveFailures)
	c := b.claim("w", 1)
	require.Empty(t, c.Leases)
	require.Equal(t, retryAt, c.Wake)
	b.clock.Add(5 * time.Second)
	l := b.claim1("w")
	require.Equal(t, 2, l.Attempt)
	got = b.done(l, `"ok"`)
	require.Equal(t, ledger.Succeeded, got.Status)
	require.Equal(t, 0, got.ConsecutiveFailures)
	require.Equal(t, 1, got.Failures)
	b.read(func(r ledger.Reader) error {
		at, err := r.Attempts(task.ID, 0)
		require.NoError(t, err)
		require.Len(t, at, 2)
		require.NotNil(t, at[0].Failure)
		require.Equal(t, fault.Timeout, at[0].Failure.Kind)
		return nil
	})
})

var _ = register("AFailureWithNoRetryLeftFailsTheTask", func(t *testing.T, open Factory) {
	b := newBench(t, open, nil)
	task := b.submit(steps("a", "b"))
	got, err := b.s.Commit(b.ctx, ledger.Result{Lease: b.claim1("w"), Failure: &ledger.Failure{Kind: fault.Trap, Message: "unreachable"}})
	require.NoError(t, err)
	require.Equal(t, ledger.Failed, got.Status)
	require.Equal(t, fault.Trap, got.Failure.Kind)
	require.Empty(t, b.claim("w", 1).Leases)
	require.Equal(t, ledger.EvFailed, b.events(task.ID)[len(b.events(task.ID))-1])
})

var _ = register("ARepairSendsTheTaskBack", func(t *testing.T, open Factory) {
	b := newBench(t, open, nil)
	task := b.submit(steps("write", "test"))
	b.done(b.claim1("w"), `"v1"`)
	got, err := b.s.Commit(b.ctx, ledger.Result{Lease: b.claim1("w"), Repair: &ledger.Repair{RestartFrom: 0, Max: 2, Reason: "tests fail"}})
	require.NoError(t, err)
	require.Equal(t, 0, got.Cursor)
	require.Equal(t, 1, got.Repairs)
	l := b.claim1("w")
	require.Equal(t, 0, l.Step)
	b.done(l, `"v2"`)
	require.Equal(t, ledger.Succeeded, b.done(b.claim1("w"), `"green"`).Status)
	b.read(func(r ledger.Reader) error {
		out, err := r.StepOutput(task.ID, 0)
		require.NoError(t, err)
		require.JSONEq(t, `"v2"`, string(out), "the repaired step's output replaces the first")
		return nil
	})
})

var _ = register("ReleaseGivesAUnitBackUncharged", func(t *testing.T, open Factory) {
	b := newBench(t, open, nil)
	task := b.submit(steps("a"))
	l := b.claim1("w")
	require.NoError(t, b.s.Release(b.ctx, l))
	require.ErrorIs(t, b.s.Release(b.ctx, l), ledger.ErrLeaseLost)
	got := b.task(task.ID)
	require.Equal(t, 0, got.Leases)
	require.Equal(t, 0, got.Attempts, "a released attempt is not charged")
	again := b.claim1("w2")
	require.Equal(t, l.Attempt, again.Attempt, "the next claim runs the same attempt number")
	require.Greater(t, again.Epoch, l.Epoch)
	require.Contains(t, b.events(task.ID), ledger.EvReleased)
})

var _ = register("ChangedIsClosedByTheNextCommit", func(t *testing.T, open Factory) {
	b := newBench(t, open, nil)
	ch := b.s.Changed()
	select {
	case <-ch:
		t.Fatal("closed before anything committed")
	default:
	}
	b.submit(steps("a"))
	<-ch // a submission wakes the watcher
	next := b.s.Changed()
	l := b.claim1("w")
	<-next
	last := b.s.Changed()
	select {
	case <-last:
		t.Fatal("closed before the next commit")
	default:
	}
	b.done(l, `{}`)
	<-last
})

// ReadSynced answers once what it shows is on disk; a store's own tests
// hold its sync to show that (store/synced_test.go).
var _ = register("ReadSyncedSeesEveryCommitBeforeIt", func(t *testing.T, open Factory) {
	b := newBench(t, open, nil)
	task := b.submit(steps("a"))
	_, _, dur, err := b.s.CommitAndClaim(b.ctx, ledger.Result{Lease: b.claim1("w"), Output: json.RawMessage(`1`)}, ledger.ClaimRequest{})
	require.NoError(t, err)
	require.NotNil(t, dur)
	require.NoError(t, b.s.ReadSynced(func(r ledger.Reader) error {
		got, err := r.Task(task.ID)
		require.NoError(t, err)
		require.Equal(t, ledger.Succeeded, got.Status)
		return nil
	}))
})

var _ = register("CommitsSurviveAReopen", func(t *testing.T, open Factory) {
	b := newBench(t, open, nil)
	if b.in.Reopen == nil {
		t.Fatal("the implementation cannot reopen its store: a ledger must keep its commits across a restart")
	}
	task := b.submit(steps("a", "b"))
	l := b.done(b.claim1("w"), `{"kept":true}`)
	require.Equal(t, 1, l.Cursor)
	leased := b.claim1("w")
	b.s = b.in.Reopen(t)
	got := b.task(task.ID)
	require.Equal(t, 1, got.Cursor)
	b.read(func(r ledger.Reader) error {
		out, err := r.StepOutput(task.ID, 0)
		require.NoError(t, err)
		require.JSONEq(t, `{"kept":true}`, string(out))
		return nil
	})
	// The lease granted before the restart is fenced: the store hands the
	// unit to the reopened process's workers with a new epoch, at once or
	// once the lease expires.
	c := b.claim("w", 1)
	if len(c.Leases) == 0 {
		b.clock.Add(31 * time.Second)
		c = b.claim("w", 1)
	}
	require.Len(t, c.Leases, 1)
	require.Greater(t, c.Leases[0].Epoch, leased.Epoch)
	_, err := b.s.Commit(b.ctx, ledger.Result{Lease: leased, Output: json.RawMessage(`1`)})
	require.ErrorIs(t, err, ledger.ErrLeaseLost)
	require.Equal(t, ledger.Succeeded, b.done(c.Leases[0], `2`).Status)
})
