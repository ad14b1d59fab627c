package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/lhengine/lhengine/fault"
	"github.com/lhengine/lhengine/internal/testpg"
	"github.com/lhengine/lhengine/ledger"
)

// TestMain stops the PostgreSQL cluster the tests started (testpg) and
// then checks that no goroutine was left behind.
func TestMain(m *testing.M) {
	code := testpg.Main(m)
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// clock is an injected clock that only moves when told.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time      { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) Add(d time.Duration) { c.mu.Lock(); c.now = c.now.Add(d); c.mu.Unlock() }

type testBundle struct {
	s     *Store
	clock *clock
	ctx   context.Context
}

func setup(t *testing.T, plan ...ledger.Planner) *testBundle {
	t.Helper()
	c := &clock{now: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	o := Options{InMemory: true, Now: c.Now}
	if len(plan) > 0 {
		o.Planner = plan[0]
	}
	s, err := Open("", o)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, s.Close()) })
	return &testBundle{s: s, clock: c, ctx: context.Background()}
}

func plainSteps(names ...string) []ledger.StepState {
	out := make([]ledger.StepState, len(names))
	for i, n := range names {
		out[i] = ledger.StepState{Name: n}
	}
	return out
}

func (b *testBundle) submit(t *testing.T, steps []ledger.StepState) *ledger.Task {
	t.Helper()
	task, created, err := b.s.Submit(b.ctx, ledger.NewTask{Name: "t", Steps: steps})
	require.NoError(t, err)
	require.True(t, created)
	return task
}

func (b *testBundle) claim1(t *testing.T, owner string) ledger.Lease {
	t.Helper()
	c, err := b.s.Claim(b.ctx, ledger.ClaimRequest{Owner: b.s.Owner(owner), Max: 1, LeaseFor: 30 * time.Second})
	require.NoError(t, err)
	require.Len(t, c.Leases, 1)
	return c.Leases[0]
}

func (b *testBundle) done(t *testing.T, l ledger.Lease, out string) *ledger.Task {
	t.Helper()
	task, err := b.s.Commit(b.ctx, ledger.Result{Lease: l, Output: json.RawMessage(out)})
	require.NoError(t, err)
	return task
}

func TestExpiredLeaseIsReclaimed(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.submit(t, plainSteps("a"))
	first := b.claim1(t, "worker-a")
	b.clock.Add(31 * time.Second)
	second := b.claim1(t, "worker-b")
	require.Equal(t, first.Step, second.Step)
	require.Greater(t, second.Epoch, first.Epoch, "a reclaim takes a new epoch")
	require.Equal(t, 2, second.Attempt)
	task, err := b.s.Task(b.ctx, first.Task)
	require.NoError(t, err)
	require.Equal(t, 1, task.Reclaims)
	require.Equal(t, 1, task.Leases)
}

func TestUnexpiredLeaseCannotBeStolen(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.submit(t, plainSteps("a"))
	b.claim1(t, "worker-a")
	b.clock.Add(29 * time.Second)
	c, err := b.s.Claim(b.ctx, ledger.ClaimRequest{Owner: b.s.Owner("worker-b"), Max: 1, LeaseFor: 30 * time.Second})
	require.NoError(t, err)
	require.Empty(t, c.Leases)
	require.Equal(t, b.clock.Now().Add(time.Second), c.Wake, "the claimer learns when the lease runs out")
}

func TestOnlyTheOwnerMayHeartbeat(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.submit(t, plainSteps("a"))
	l := b.claim1(t, "worker-a")

	thief := l
	thief.Owner = b.s.Owner("worker-b")
	_, err := b.s.Heartbeat(b.ctx, thief, time.Minute)
	require.ErrorIs(t, err, ledger.ErrLeaseLost)

	b.clock.Add(20 * time.Second)
	until, err := b.s.Heartbeat(b.ctx, l, 30*time.Second)
	require.NoError(t, err)
	require.Equal(t, b.clock.Now().Add(30*time.Second), until)
	b.clock.Add(20 * time.Second) // 40s after the claim, 20s after the renewal
	c, err := b.s.Claim(b.ctx, ledger.ClaimRequest{Owner: b.s.Owner("worker-b"), Max: 1})
	require.NoError(t, err)
	require.Empty(t, c.Leases, "a renewed lease is not reclaimed")
}

// TestStepOutputPersistsAcrossReopen closes the store before reopening it,
// so it shows persistence, not durability (Close flushes everything);
// TestCommitIsInTheLastSyncedImage shows durability.
func TestStepOutputPersistsAcrossReopen(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ctx := context.Background()
	s, err := Open(dir, Options{})
	require.NoError(t, err)
	task, _, err := s.Submit(ctx, ledger.NewTask{Name: "t", Steps: plainSteps("a", "b")})
	require.NoError(t, err)
	c, err := s.Claim(ctx, ledger.ClaimRequest{Owner: s.Owner("w"), Max: 1})
	require.NoError(t, err)
	_, err = s.Commit(ctx, ledger.Result{Lease: c.Leases[0], Output: json.RawMessage(`{"draft":"hello"}`)})
	require.NoError(t, err)
	require.NoError(t, s.Close())

	s, err = Open(dir, Options{})
	require.NoError(t, err)
	defer s.Close()
	require.NoError(t, s.Read(func(r ledger.Reader) error {
		out, err := r.StepOutput(task.ID, 0)
		require.NoError(t, err)
		require.JSONEq(t, `{"draft":"hello"}`, string(out))
		got, err := r.Task(task.ID)
		require.NoError(t, err)
		require.Equal(t, 1, got.Cursor)
		return nil
	}))
}

func TestOneClaimAdvancesExactlyOneUnit(t *testing.T) {
	t.Parallel()
	b := setup(t)
	task := b.submit(t, plainSteps("a", "b", "c"))
	for i := range 3 {
		l := b.claim1(t, "w")
		require.Equal(t, i, l.Step)
		got := b.done(t, l, fmt.Sprint(i))
		done, total := got.Progress()
		require.Equal(t, i+1, done)
		require.Equal(t, 3, total)
	}
	got, err := b.s.Task(b.ctx, task.ID)
	require.NoError(t, err)
	require.Equal(t, ledger.Succeeded, got.Status)
	require.JSONEq(t, `2`, string(got.Output))
}

func TestRepairBudgetStopsEndlessVerifyFailure(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.submit(t, plainSteps("draft", "verify", "finalize"))
	for pass := 0; ; pass++ {
		require.Less(t, pass, 10, "the repair budget must end the loop")
		l := b.claim1(t, "w")
		require.Equal(t, 0, l.Step)
		b.done(t, l, `"draft"`)
		l = b.claim1(t, "w")
		require.Equal(t, 1, l.Step)
		got, err := b.s.Commit(b.ctx, ledger.Result{Lease: l, Repair: &ledger.Repair{RestartFrom: 0, Max: 2, Reason: "missing section"}})
		require.NoError(t, err)
		if got.Status == ledger.Paused {
			require.Equal(t, ledger.PauseRepairs, got.Pause.Kind)
			require.Equal(t, "verify", got.Pause.Name)
			require.Nil(t, got.Failure, "the repair budget pauses the task, never fails it")
			require.Equal(t, 2, pass, "max 2 repairs means a third verify failure pauses the task")
			break
		}
		require.Equal(t, 0, got.Cursor)
		require.Equal(t, pass+1, got.Repairs)
	}
	c, err := b.s.Claim(b.ctx, ledger.ClaimRequest{Owner: b.s.Owner("w"), Max: 10})
	require.NoError(t, err)
	require.Empty(t, c.Leases)
}

func TestRepairRunsLaterStepsWithNewOutputs(t *testing.T) {
	t.Parallel()
	b := setup(t)
	task := b.submit(t, plainSteps("draft", "verify"))
	l := b.claim1(t, "w")
	b.done(t, l, `"v1"`)
	l = b.claim1(t, "w")
	_, err := b.s.Commit(b.ctx, ledger.Result{Lease: l, Repair: &ledger.Repair{RestartFrom: 0, Max: 2, Reason: "too short"}})
	require.NoError(t, err)
	l = b.claim1(t, "w")
	require.Equal(t, 0, l.Step)
	require.Equal(t, 2, l.Attempt, "attempt numbers keep rising across passes")
	b.done(t, l, `"v2"`)
	require.NoError(t, b.s.Read(func(r ledger.Reader) error {
		out, err := r.StepOutput(task.ID, 0)
		require.NoError(t, err)
		require.JSONEq(t, `"v2"`, string(out))
		as, err := r.Attempts(task.ID, 0)
		require.NoError(t, err)
		require.Len(t, as, 2, "the first pass's output is kept")
		return nil
	}))
}

func TestFinishedTaskIsNeverClaimed(t *testing.T) {
	t.Parallel()
	for _, end := range []ledger.Status{ledger.Succeeded, ledger.Failed, ledger.Cancelled} {
		t.Run(string(end), func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			task := b.submit(t, plainSteps("a"))
			l := b.claim1(t, "w")
			switch end {
			case ledger.Succeeded:
				b.done(t, l, `1`)
			case ledger.Failed:
				_, err := b.s.Commit(b.ctx, ledger.Result{Lease: l, Failure: &ledger.Failure{Kind: fault.Trap, Message: "boom"}})
				require.NoError(t, err)
			case ledger.Cancelled:
				_, err := b.s.Cancel(b.ctx, task.ID, "")
				require.NoError(t, err)
			}
			got, err := b.s.Task(b.ctx, task.ID)
			require.NoError(t, err)
			require.Equal(t, end, got.Status)
			b.clock.Add(time.Hour)
			c, err := b.s.Claim(b.ctx, ledger.ClaimRequest{Owner: b.s.Owner("w2"), Max: 10})
			require.NoError(t, err)
			require.Empty(t, c.Leases)
		})
	}
}

func TestZombieCommitIsRejected(t *testing.T) {
	t.Parallel()
	b := setup(t)
	task := b.submit(t, plainSteps("a", "b"))
	zombie := b.claim1(t, "worker-a")
	b.clock.Add(time.Minute)
	fresh := b.claim1(t, "worker-b")
	_, err := b.s.Commit(b.ctx, ledger.Result{Lease: zombie, Output: json.RawMessage(`"late"`)})
	require.ErrorIs(t, err, ledger.ErrLeaseLost)
	_, err = b.s.Heartbeat(b.ctx, zombie, time.Minute)
	require.ErrorIs(t, err, ledger.ErrLeaseLost)
	b.done(t, fresh, `"on time"`)
	require.NoError(t, b.s.Read(func(r ledger.Reader) error {
		out, err := r.StepOutput(task.ID, 0)
		require.NoError(t, err)
		require.JSONEq(t, `"on time"`, string(out))
		return nil
	}))
	// Same owner, older epoch: still rejected.
	again := zombie
	again.Owner = fresh.Owner
	_, err = b.s.Commit(b.ctx, ledger.Result{Lease: again, Output: json.RawMessage(`"late"`)})
	require.ErrorIs(t, err, ledger.ErrLeaseLost)
}

func TestLeasesOfAnEarlierSessionAreReclaimedAtOnce(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ctx := context.Background()
	s, err := Open(dir, Options{})
	require.NoError(t, err)
	_, _, err = s.Submit(ctx, ledger.NewTask{Name: "t", Steps: plainSteps("a")})
	require.NoError(t, err)
	c, err := s.Claim(ctx, ledger.ClaimRequest{Owner: s.Owner("w"), Max: 1, LeaseFor: time.Hour})
	require.NoError(t, err)
	require.Len(t, c.Leases, 1)
	require.NoError(t, s.Close())

	s, err = Open(dir, Options{})
	require.NoError(t, err)
	defer s.Close()
	c2, err := s.Claim(ctx, ledger.ClaimRequest{Owner: s.Owner("w"), Max: 1, LeaseFor: time.Hour})
	require.NoError(t, err)
	require.Len(t, c2.Leases, 1, "the directory lock proves the old owner is gone")
	require.Greater(t, c2.Leases[0].Epoch, c.Leases[0].Epoch)
}

func TestStoreDirectoryIsExclusive(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s, err := Open(dir, Options{})
	require.NoError(t, err)
	defer s.Close()
	_, err = Open(dir, Options{})
	require.ErrorIs(t, err, ledger.ErrInUse)
}

func fanOutPlanner(n int) ledger.Planner {
	return func(_ context.Context, _ ledger.Reader, _ *ledger.Task, _ int) ([]ledger.Item, error) {
		items := make([]ledger.Item, n)
		for i := range items {
			items[i] = ledger.Item{Key: json.RawMessage(fmt.Sprint(i)), Value: json.RawMessage(fmt.Sprintf(`"item-%d"`, i))}
		}
		return items, nil
	}
}

func TestFanOutRespectsConcurrencyAndOrdersOutputs(t *testing.T) {
	t.Parallel()
	b := setup(t, fanOutPlanner(10))
	task := b.submit(t, []ledger.StepState{{Name: "list"}, {Name: "each", FanOut: true, Limit: 3}, {Name: "sum"}})
	l := b.claim1(t, "w")
	b.done(t, l, `"listed"`)

	c, err := b.s.Claim(b.ctx, ledger.ClaimRequest{Owner: b.s.Owner("w"), Max: 10})
	require.NoError(t, err)
	require.Len(t, c.Leases, 3, "concurrency 3 bounds the leases of the step")
	require.JSONEq(t, `"item-0"`, string(c.Leases[0].Unit.Value))

	// Commit all units concurrently, in any order, through the group committer.
	var wg sync.WaitGroup
	pending := c.Leases
	for len(pending) > 0 {
		errs := make([]error, len(pending))
		for i, l := range pending {
			wg.Add(1)
			go func(i int, l ledger.Lease) {
				defer wg.Done()
				_, errs[i] = b.s.Commit(b.ctx, ledger.Result{Lease: l, Output: json.RawMessage(fmt.Sprintf(`{"n":%d}`, l.Item))})
			}(i, l)
		}
		wg.Wait()
		for _, err := range errs {
			require.NoError(t, err)
		}
		c, err = b.s.Claim(b.ctx, ledger.ClaimRequest{Owner: b.s.Owner("w"), Max: 10})
		require.NoError(t, err)
		require.LessOrEqual(t, len(c.Leases), 3)
		pending = c.Leases
		if len(pending) == 1 && pending[0].Step == 2 {
			break
		}
	}
	require.NoError(t, b.s.Read(func(r ledger.Reader) error {
		out, err := r.StepOutput(task.ID, 1)
		require.NoError(t, err)
		require.JSONEq(t, `[{"n":0},{"n":1},{"n":2},{"n":3},{"n":4},{"n":5},{"n":6},{"n":7},{"n":8},{"n":9}]`, string(out))
		return nil
	}))
}

func TestEmptyFanOutCompletesAtOnce(t *testing.T) {
	t.Parallel()
	b := setup(t, fanOutPlanner(0))
	task := b.submit(t, []ledger.StepState{{Name: "each", FanOut: true, Limit: 3}, {Name: "after"}})
	l := b.claim1(t, "w")
	require.Equal(t, 1, l.Step)
	require.NoError(t, b.s.Read(func(r ledger.Reader) error {
		out, err := r.StepOutput(task.ID, 0)
		require.NoError(t, err)
		require.JSONEq(t, `[]`, string(out))
		return nil
	}))
}

func TestPlanningFailureFailsTheTask(t *testing.T) {
	t.Parallel()
	bad := func(context.Context, ledger.Reader, *ledger.Task, int) ([]ledger.Item, error) {
		return nil, errors.New("for_each is a string")
	}
	b := setup(t, bad)
	b.submit(t, []ledger.StepState{{Name: "a"}, {Name: "each", FanOut: true}})
	l := b.claim1(t, "w")
	got, err := b.s.Commit(b.ctx, ledger.Result{Lease: l, Output: json.RawMessage(`1`)})
	require.NoError(t, err)
	require.Equal(t, ledger.Failed, got.Status)
	require.Equal(t, fault.Input, got.Failure.Kind)
	require.Contains(t, got.Reason, "for_each is a string")
}

func TestRetryWaitsForBackoff(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.submit(t, plainSteps("a"))
	l := b.claim1(t, "w")
	retryAt := b.clock.Now().Add(5 * time.Second)
	got, err := b.s.Commit(b.ctx, ledger.Result{Lease: l, Failure: &ledger.Failure{Kind: fault.Timeout, Message: "slow"}, RetryAt: retryAt})
	require.NoError(t, err)
	require.Equal(t, ledger.Running, got.Status)
	require.Equal(t, 1, got.ConsecutiveFailures)
	c, err := b.s.Claim(b.ctx, ledger.ClaimRequest{Owner: b.s.Owner("w"), Max: 1})
	require.NoError(t, err)
	require.Empty(t, c.Leases)
	require.Equal(t, retryAt, c.Wake)
	b.clock.Add(5 * time.Second)
	l2 := b.claim1(t, "w")
	require.Equal(t, 2, l2.Attempt)
	got = b.done(t, l2, `"ok"`)
	require.Equal(t, ledger.Succeeded, got.Status)
	require.Equal(t, 0, got.ConsecutiveFailures)
}

func TestCancelRejectsInFlightCommit(t *testing.T) {
	t.Parallel()
	b := setup(t)
	task := b.submit(t, plainSteps("a"))
	l := b.claim1(t, "w")
	_, err := b.s.Cancel(b.ctx, task.ID, "changed my mind")
	require.NoError(t, err)
	_, err = b.s.Commit(b.ctx, ledger.Result{Lease: l, Output: json.RawMessage(`1`)})
	require.ErrorIs(t, err, ledger.ErrLeaseLost)
	_, err = b.s.Cancel(b.ctx, task.ID, "")
	require.ErrorIs(t, err, ledger.ErrTerminal)
}

func TestSubmitDedupesByIdempotencyKey(t *testing.T) {
	t.Parallel()
	b := setup(t)
	a, created, err := b.s.Submit(b.ctx, ledger.NewTask{Name: "t", Steps: plainSteps("a"), IdempotencyKey: "k1"})
	require.NoError(t, err)
	require.True(t, created)
	again, created, err := b.s.Submit(b.ctx, ledger.NewTask{Name: "t", Steps: plainSteps("a"), IdempotencyKey: "k1"})
	require.NoError(t, err)
	require.False(t, created)
	require.Equal(t, a.ID, again.ID)
}

func TestEventsTellTheStory(t *testing.T) {
	t.Parallel()
	b := setup(t)
	task := b.submit(t, plainSteps("a"))
	b.done(t, b.claim1(t, "w"), `1`)
	var types []ledger.EventType
	require.NoError(t, b.s.Read(func(r ledger.Reader) error {
		evs, err := r.Events(task.ID, 0, 0)
		for i, e := range evs {
			require.Equal(t, uint64(i), e.Seq)
			types = append(types, e.Type)
		}
		return err
	}))
	require.Equal(t, []ledger.EventType{ledger.EvSubmitted, ledger.EvStepStarted, ledger.EvStarted, ledger.EvUnitDone, ledger.EvStepDone, ledger.EvSucceeded}, types)
}

func TestTaskIDsSortByCreation(t *testing.T) {
	t.Parallel()
	a := newTaskID(time.UnixMilli(1000))
	b := newTaskID(time.UnixMilli(1001))
	require.Len(t, a, 26)
	require.Less(t, a, b)
}

func TestCommitAndClaimTakesTheNextUnitButNotABackingOffRetry(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.submit(t, plainSteps("a", "b"))
	l := b.claim1(t, "w")
	next := ledger.ClaimRequest{Owner: b.s.Owner("w"), Max: 1}
	// A failure with a retry later: the same transaction must not lease it,
	// and must not forget it either.
	retryAt := b.clock.Now().Add(time.Second)
	_, c, err := b.s.commitAndClaimSynced(b.ctx, ledger.Result{Lease: l, Failure: &ledger.Failure{Kind: fault.Trap, Message: "x"}, RetryAt: retryAt}, next)
	require.NoError(t, err)
	require.Empty(t, c.Leases)
	require.Equal(t, retryAt, c.Wake)
	b.clock.Add(time.Second)
	l = b.claim1(t, "w")
	require.Equal(t, 2, l.Attempt)
	// Success: the next step's unit comes back with the commit.
	got, c, err := b.s.commitAndClaimSynced(b.ctx, ledger.Result{Lease: l, Output: json.RawMessage(`1`)}, next)
	require.NoError(t, err)
	require.Len(t, c.Leases, 1)
	require.Equal(t, 1, c.Leases[0].Step)
	require.Equal(t, 1, got.Leases, "the commit's task record counts the new lease")
	got = b.done(t, c.Leases[0], `2`)
	require.Equal(t, ledger.Succeeded, got.Status)
}
