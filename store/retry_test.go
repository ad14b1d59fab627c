package store

import (
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lhengine/lhengine/fault"
	"github.com/lhengine/lhengine/ledger"
	"github.com/lhengine/lhengine/store/internal/kv"
)

// setupOnDisk is setup with the store in a folder of the test's own.
func setupOnDisk(t *testing.T, plan ledger.Planner) *testBundle {
	t.Helper()
	c := &clock{now: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	s, err := Open(t.TempDir(), Options{Now: c.Now, Planner: plan})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, s.Close()) })
	return &testBundle{s: s, clock: c, ctx: t.Context()}
}

// counted commits l as a success that counted one page.
func (b *testBundle) counted(t *testing.T, l ledger.Lease, out string) *ledger.Task {
	t.Helper()
	task, err := b.s.Commit(b.ctx, ledger.Result{Lease: l, Output: json.RawMessage(out), Counts: map[string]int64{"pages": 1}})
	require.NoError(t, err)
	return task
}

// committedPerItem counts, per item of a step, the attempts that committed
// an output.
func (b *testBundle) committedPerItem(t *testing.T, id string, step int) map[int]int {
	t.Helper()
	per := map[int]int{}
	require.NoError(t, b.s.Read(func(r ledger.Reader) error {
		all, err := r.Attempts(id, step)
		for _, a := range all {
			if a.Output != nil {
				per[a.Item]++
			}
		}
		return err
	}))
	return per
}

func TestRetryKeepsTheUnitsItsStepCommitted(t *testing.T) {
	t.Parallel()
	b := setupOnDisk(t, fanOutPlanner(10))
	task := b.submit(t, []ledger.StepState{{Name: "each", FanOut: true, Limit: 3}, {Name: "report"}})
	var kept []int
	for range 4 {
		l := b.claim1(t, "w")
		kept = append(kept, l.Item)
		b.counted(t, l, `"first run"`)
	}
	inFlight := b.claim1(t, "w")
	failing := b.claim1(t, "w")
	got, err := b.s.Commit(b.ctx, ledger.Result{Lease: failing, Failure: &ledger.Failure{Kind: fault.Trap, Message: "boom"}})
	require.NoError(t, err)
	require.Equal(t, ledger.Failed, got.Status)

	got, err = b.s.Retry(b.ctx, task.ID, -1, "ana")
	require.NoError(t, err)
	require.Equal(t, ledger.Running, got.Status)
	require.Equal(t, 1, got.Steps[0].Pass, "the step it stopped at keeps its pass")
	require.Equal(t, 4, got.Steps[0].Done, "and its committed units")
	require.Equal(t, int64(4), got.Counters["pages"])

	_, err = b.s.Commit(b.ctx, ledger.Result{Lease: inFlight, Output: json.RawMessage(`"late"`)})
	require.ErrorIs(t, err, ledger.ErrLeaseLost, "a lease granted before the retry is dead")

	var ran []int
	for {
		c, err := b.s.Claim(b.ctx, ledger.ClaimRequest{Owner: b.s.Owner("w"), Max: 10, LeaseFor: time.Minute})
		require.NoError(t, err)
		if len(c.Leases) == 0 {
			break
		}
		for _, l := range c.Leases {
			if l.Step == 1 {
				got = b.done(t, l, `"report"`)
				continue
			}
			ran = append(ran, l.Item)
			require.Equal(t, 1, l.Try, "item %d: a retry gives every unit its whole retry budget again", l.Item)
			got = b.counted(t, l, `"second run"`)
		}
	}
	slices.Sort(ran)
	for _, i := range ran {
		require.NotContains(t, kept, i, "item %d was committed before the retry and ran again", i)
	}
	require.Len(t, ran, 6, "only the six items not committed ran")
	require.Equal(t, ledger.Succeeded, got.Status)
	require.Equal(t, int64(10), got.Counters["pages"], "ten items, each counted once")
	for item, n := range b.committedPerItem(t, task.ID, 0) {
		require.Equal(t, 1, n, "item %d committed %d times", item, n)
	}
}

func TestRetryOfACancelledStepStillBeingPlannedPlansTheRest(t *testing.T) {
	t.Parallel()
	b := setupOnDisk(t, fanOutPlanner(1_200))
	task := b.submit(t, []ledger.StepState{{Name: "each", FanOut: true, Limit: 4}})
	// Cancelled with the first planning batch written and the rest not.
	require.NoError(t, b.s.update(b.ctx, func(x *kv.Tx) error {
		cur, err := x.LoadTask(task.ID)
		if err != nil {
			return err
		}
		st := x.Step(cur, 0)
		require.Equal(t, 1_200, st.Written, "Submit planned the step")
		st.Planned, st.Written = false, planBatch
		for i := planBatch; i < st.Units; i++ {
			if err := x.Del(kv.UnitKey(task.ID, 0, i)); err != nil {
				return err
			}
		}
		return x.SaveTask(cur)
	}))
	l := b.claim1(t, "w")
	b.counted(t, l, `1`)
	_, err := b.s.Cancel(b.ctx, task.ID, "")
	require.NoError(t, err)

	got, err := b.s.Retry(b.ctx, task.ID, -1, "")
	require.NoError(t, err)
	require.True(t, got.Steps[0].Planned, "the retry planned the items that were not written")
	require.Equal(t, 1_200, got.Steps[0].Units)
	require.Equal(t, 1, got.Steps[0].Done)
	n := 0
	for {
		c, err := b.s.Claim(b.ctx, ledger.ClaimRequest{Owner: b.s.Owner("w"), Max: 4, LeaseFor: time.Minute})
		require.NoError(t, err)
		if len(c.Leases) == 0 {
			break
		}
		for _, l := range c.Leases {
			require.NotEqual(t, 0, l.Item, "item 0 was committed before the cancel")
			got = b.counted(t, l, `1`)
			n++
		}
	}
	require.Equal(t, 1_199, n)
	require.Equal(t, ledger.Succeeded, got.Status)
	require.Equal(t, int64(1_200), got.Counters["pages"])
}

func TestRetryFromAStepRunsItAgainAndItsCountsReplaceTheOld(t *testing.T) {
	t.Parallel()
	b := setupOnDisk(t, fanOutPlanner(3))
	task := b.submit(t, []ledger.StepState{{Name: "each", FanOut: true, Limit: 3}, {Name: "report"}})
	for range 3 {
		b.counted(t, b.claim1(t, "w"), `1`)
	}
	l := b.claim1(t, "w")
	got, err := b.s.Commit(b.ctx, ledger.Result{Lease: l, Failure: &ledger.Failure{Kind: fault.Trap, Message: "boom"}})
	require.NoError(t, err)
	require.Equal(t, ledger.Failed, got.Status)
	require.Equal(t, int64(3), got.Counters["pages"])

	got, err = b.s.Retry(b.ctx, task.ID, 0, "")
	require.NoError(t, err)
	require.Equal(t, 2, got.Steps[0].Pass, "--from runs committed work again")
	require.Zero(t, got.Counters["pages"], "what the step's earlier pass counted is withdrawn")
	for range 3 {
		got = b.counted(t, b.claim1(t, "w"), `2`)
	}
	require.Equal(t, int64(3), got.Counters["pages"], "the units that ran again replace their counts")
	require.Equal(t, map[string]int64{"pages": 3}, *got.Steps[0].Counters)
	got = b.done(t, b.claim1(t, "w"), `"report"`)
	require.Equal(t, ledger.Succeeded, got.Status)
	require.Equal(t, int64(3), got.Counters["pages"])
}

func TestARepairReplacesWhatTheStepsItRunsAgainCounted(t *testing.T) {
	t.Parallel()
	b := setupOnDisk(t, nil)
	b.submit(t, plainSteps("draft", "verify"))
	words := func(n int64) {
		_, err := b.s.Commit(b.ctx, ledger.Result{Lease: b.claim1(t, "w"), Output: json.RawMessage(`"draft"`), Counts: map[string]int64{"words": n}})
		require.NoError(t, err)
	}
	words(5)
	got, err := b.s.Commit(b.ctx, ledger.Result{Lease: b.claim1(t, "w"), Repair: &ledger.Repair{RestartFrom: 0, Max: 2, Reason: "too short"}})
	require.NoError(t, err)
	require.Zero(t, got.Counters["words"])
	words(7)
	got = b.done(t, b.claim1(t, "w"), `"ok"`)
	require.Equal(t, ledger.Succeeded, got.Status)
	require.Equal(t, map[string]int64{"words": 7}, got.Counters, "the second draft's count replaces the first's")
}

func TestTheRetryBudgetCountsTriesPerPass(t *testing.T) {
	t.Parallel()
	b := setupOnDisk(t, nil)
	task := b.submit(t, plainSteps("a", "check"))
	b.done(t, b.claim1(t, "w"), `"A"`)
	l := b.claim1(t, "w")
	require.Equal(t, 1, l.Try)
	_, err := b.s.Commit(b.ctx, ledger.Result{Lease: l, Failure: &ledger.Failure{Kind: fault.Trap, Message: "x"}, RetryAt: b.clock.Now()})
	require.NoError(t, err)
	l = b.claim1(t, "w")
	require.Equal(t, 2, l.Attempt)
	require.Equal(t, 2, l.Try)

	// A repair enters the steps again: their units start counting again.
	_, err = b.s.Commit(b.ctx, ledger.Result{Lease: l, Repair: &ledger.Repair{RestartFrom: 0, Max: 2, Reason: "again"}})
	require.NoError(t, err)
	b.done(t, b.claim1(t, "w"), `"A2"`)
	l = b.claim1(t, "w")
	require.Equal(t, 3, l.Attempt, "attempt numbers go on: they name the records")
	require.Equal(t, 1, l.Try, "tries count from the pass")
	got, err := b.s.Commit(b.ctx, ledger.Result{Lease: l, Failure: &ledger.Failure{Kind: fault.Trap, Message: "y"}})
	require.NoError(t, err)
	require.Equal(t, ledger.Failed, got.Status)

	// So does a retry, which keeps the pass.
	got, err = b.s.Retry(b.ctx, task.ID, -1, "")
	require.NoError(t, err)
	require.Equal(t, 1, got.Retries)
	l = b.claim1(t, "w")
	require.Equal(t, 4, l.Attempt)
	require.Equal(t, 1, l.Try)
	b.done(t, l, `"C"`)
	require.NoError(t, b.s.Read(func(r ledger.Reader) error {
		all, err := r.Attempts(task.ID, 1)
		require.NoError(t, err)
		var tries, passes []int
		for _, a := range all {
			tries, passes = append(tries, a.Try), append(passes, a.Pass)
		}
		require.Equal(t, []int{1, 2, 1, 1}, tries)
		require.Equal(t, []int{1, 1, 2, 2}, passes)
		return nil
	}))
}

func TestADueRetryIsClaimedBeforeTheQueuedUnits(t *testing.T) {
	t.Parallel()
	b := setupOnDisk(t, fanOutPlanner(7))
	b.submit(t, []ledger.StepState{{Name: "each", FanOut: true, Limit: 2}})
	failing := b.claim1(t, "w")
	require.Equal(t, 0, failing.Item)
	l := b.claim1(t, "w")
	require.Equal(t, 1, l.Item)
	b.done(t, l, `1`)
	retryAt := b.clock.Now().Add(time.Second)
	_, err := b.s.Commit(b.ctx, ledger.Result{Lease: failing, Failure: &ledger.Failure{Kind: fault.Timeout, Message: "slow"}, RetryAt: retryAt})
	require.NoError(t, err)

	l = b.claim1(t, "w")
	require.Equal(t, 2, l.Item, "while item 0 waits out its backoff, the queue goes on")
	b.done(t, l, `1`)
	b.clock.Add(time.Second)
	l = b.claim1(t, "w")
	require.Equal(t, 0, l.Item, "once its backoff has passed, the retried unit goes before the units still queued")
	require.Equal(t, 2, l.Attempt)
	b.done(t, l, `0`)
	var order []int
	for range 4 {
		l := b.claim1(t, "w")
		order = append(order, l.Item)
		b.done(t, l, `1`)
	}
	require.Equal(t, []int{3, 4, 5, 6}, order, "the rest in the order they became ready")
}

func TestDueRetriesGoInTheOrderOfTheirBackoff(t *testing.T) {
	t.Parallel()
	b := setupOnDisk(t, fanOutPlanner(7))
	b.submit(t, []ledger.StepState{{Name: "each", FanOut: true, Limit: 4}})
	c, err := b.s.Claim(b.ctx, ledger.ClaimRequest{Owner: b.s.Owner("w"), Max: 3, LeaseFor: time.Minute})
	require.NoError(t, err)
	require.Len(t, c.Leases, 3)
	b.done(t, b.claim1(t, "w"), `3`)
	// Item 0 waits 3s, item 1 1s, item 2 2s.
	for i, wait := range []time.Duration{3 * time.Second, time.Second, 2 * time.Second} {
		_, err := b.s.Commit(b.ctx, ledger.Result{Lease: c.Leases[i], Failure: &ledger.Failure{Kind: fault.Timeout, Message: "slow"},
			RetryAt: b.clock.Now().Add(wait)})
		require.NoError(t, err)
	}
	b.clock.Add(2 * time.Second)
	c, err = b.s.Claim(b.ctx, ledger.ClaimRequest{Owner: b.s.Owner("w"), Max: 3, LeaseFor: time.Minute})
	require.NoError(t, err)
	var items []int
	for _, l := range c.Leases {
		items = append(items, l.Item)
	}
	require.Equal(t, []int{1, 2, 4}, items, "the two due retries, earliest first, then the queue")
	require.Equal(t, b.clock.Now().Add(time.Second), c.Wake, "item 0 is due in a second")
}

func TestAPauseSpendsNoRetryBudget(t *testing.T) {
	t.Parallel()
	b := setupOnDisk(t, nil)
	task := b.submit(t, plainSteps("send"))
	l := b.claim1(t, "w")
	require.Equal(t, 1, l.Try)
	_, err := b.s.Pause(b.ctx, l, "an effect waits for a person")
	require.NoError(t, err)
	_, err = b.s.Resume(b.ctx, task.ID)
	require.NoError(t, err)
	l = b.claim1(t, "w")
	require.Equal(t, 2, l.Attempt, "the next lease is the next attempt")
	require.Equal(t, 1, l.Try, "but still the first try of the budget")
}
