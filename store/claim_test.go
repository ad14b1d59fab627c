package store

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lhengine/lhengine/fault"
	"github.com/lhengine/lhengine/ledger"
	"github.com/lhengine/lhengine/store/internal/group"
	"github.com/lhengine/lhengine/store/internal/kv"
	"github.com/lhengine/lhengine/store/internal/read"
)

// claimOps runs claims as the operations of one group-commit batch, the way
// concurrent callers of Claim share a transaction.
func claimOps(t *testing.T, s *Store, reqs ...ledger.ClaimRequest) []ledger.Claimed {
	t.Helper()
	out := make([]ledger.Claimed, len(reqs))
	batch := make([]*op, len(reqs))
	for i, req := range reqs {
		i, req := i, req
		batch[i] = group.NewOp(func(t *kv.Tx) error {
			var err error
			out[i], err = s.claim(t, req, nil)
			return err
		})
	}
	_, ok, _ := s.tryBatch(batch)
	require.True(t, ok, "the claims committed as one batch")
	for _, o := range batch {
		require.NoError(t, o.Err)
	}
	return out
}

func TestClaimsInOneBatchNeverShareAnExpiredUnit(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.submit(t, plainSteps("a"))
	first := b.claim1(t, "worker-a")
	b.clock.Add(31 * time.Second)

	req := func(w string) ledger.ClaimRequest {
		return ledger.ClaimRequest{Owner: b.s.Owner(w), Max: 1, LeaseFor: 30 * time.Second}
	}
	got := claimOps(t, b.s, req("worker-b"), req("worker-c"))
	leases := append(got[0].Leases, got[1].Leases...)
	require.Len(t, leases, 1, "one unit, one new lease, whatever shares the transaction")
	require.Greater(t, leases[0].Epoch, first.Epoch)

	task, err := b.s.Task(b.ctx, first.Task)
	require.NoError(t, err)
	require.Equal(t, 1, task.Reclaims)
	require.Equal(t, 1, task.Leases)
	_, err = b.s.Heartbeat(b.ctx, leases[0], time.Minute)
	require.NoError(t, err, "the one lease granted is the unit's lease")
}

func TestClaimsInOneBatchTakeDifferentUnits(t *testing.T) {
	t.Parallel()
	b := setup(t, fanOutPlanner(10))
	b.submit(t, []ledger.StepState{{Name: "each", FanOut: true, Limit: 16}})
	var reqs []ledger.ClaimRequest
	for i := range 4 {
		reqs = append(reqs, ledger.ClaimRequest{Owner: b.s.Owner(fmt.Sprint("w", i)), Max: 1, LeaseFor: time.Minute})
	}
	got := claimOps(t, b.s, reqs...)
	seen := map[int]bool{}
	for i, c := range got {
		require.Len(t, c.Leases, 1, "claim %d of the batch found a unit", i)
		require.False(t, seen[c.Leases[0].Item], "item %d handed out twice", c.Leases[0].Item)
		seen[c.Leases[0].Item] = true
	}
}

func TestRunnableTasksTakeTurns(t *testing.T) {
	t.Parallel()
	b := setup(t, fanOutPlanner(100))
	long := b.submit(t, []ledger.StepState{{Name: "each", FanOut: true, Limit: 16}})
	b.clock.Add(time.Millisecond)
	short := b.submit(t, []ledger.StepState{{Name: "each", FanOut: true, Limit: 16}})

	perTask := map[string]int{}
	for range 10 {
		l := b.claim1(t, "w")
		perTask[l.Task]++
	}
	require.Equal(t, 5, perTask[long.ID])
	require.Equal(t, 5, perTask[short.ID], "a task submitted later is not starved by a long fan-out")

	c, err := b.s.Claim(b.ctx, ledger.ClaimRequest{Owner: b.s.Owner("w"), Max: 8, LeaseFor: time.Minute})
	require.NoError(t, err)
	perTask = map[string]int{}
	for _, l := range c.Leases {
		perTask[l.Task]++
	}
	require.Equal(t, map[string]int{long.ID: 4, short.ID: 4}, perTask, "a claim of several units shares them out")
}

func TestStaticFanOutOf40000ItemsIsPlannedInBatches(t *testing.T) {
	t.Parallel()
	b := setup(t, fanOutPlanner(40_000))
	task := b.submit(t, []ledger.StepState{{Name: "each", FanOut: true, Limit: 4}, {Name: "after"}})
	st := task.Steps[0]
	require.True(t, st.Planned)
	require.Equal(t, 40_000, st.Units)
	require.Equal(t, 40_000, st.Written)
	require.Equal(t, ledger.Queued, task.Status)

	c, err := b.s.Claim(b.ctx, ledger.ClaimRequest{Owner: b.s.Owner("w"), Max: 4, LeaseFor: time.Minute})
	require.NoError(t, err)
	require.Len(t, c.Leases, 4)
	var units int
	require.NoError(t, b.s.Read(func(r ledger.Reader) error {
		us, err := r.Units(task.ID, 0)
		units = len(us)
		return err
	}))
	require.Equal(t, 40_000, units)
}

// bigItems plans n items whose values are size bytes each.
func bigItems(n, size int) ledger.Planner {
	return func(context.Context, ledger.Reader, *ledger.Task, int) ([]ledger.Item, error) {
		items := make([]ledger.Item, n)
		v, _ := json.Marshal(strings.Repeat("x", size))
		for i := range items {
			items[i] = ledger.Item{Key: json.RawMessage(fmt.Sprint(i)), Value: v}
		}
		return items, nil
	}
}

func TestFanOutPlannedAtRunTimeAfterACommit(t *testing.T) {
	t.Parallel()
	b := setup(t, bigItems(2_000, 3<<10))
	task := b.submit(t, []ledger.StepState{{Name: "list"}, {Name: "each", FanOut: true, Limit: 2}})
	l := b.claim1(t, "w")
	got, claimed, err := b.s.commitAndClaimSynced(b.ctx, ledger.Result{Lease: l, Output: json.RawMessage(`"listed"`)},
		ledger.ClaimRequest{Owner: b.s.Owner("w"), Max: 1, LeaseFor: time.Minute})
	require.NoError(t, err)
	require.Equal(t, ledger.Running, got.Status)
	require.Equal(t, 1, got.Cursor)
	require.True(t, got.Steps[1].Planned, "the committing caller planned the next step")
	require.Equal(t, 2_000, got.Steps[1].Units)
	require.Len(t, claimed.Leases, 1, "and took its first unit")
	require.Equal(t, 1, claimed.Leases[0].Step)
	require.Equal(t, task.ID, claimed.Leases[0].Task)
}

func TestPlanningOversizedItemFailsTheTask(t *testing.T) {
	t.Parallel()
	b := setup(t, bigItems(1, 2<<20))
	task, _, err := b.s.Submit(b.ctx, ledger.NewTask{Name: "t", Steps: []ledger.StepState{{Name: "each", FanOut: true}}})
	require.NoError(t, err)
	require.Equal(t, ledger.Failed, task.Status)
	require.Equal(t, fault.TooLarge, task.Failure.Kind)
	require.Contains(t, task.Reason, "an item may have at most")
}

func TestCommitTooLargeForATransactionFailsTheUnit(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.submit(t, plainSteps("a"))
	l := b.claim1(t, "w")
	notes := make([]ledger.Note, 60_000)
	for i := range notes {
		notes[i] = ledger.Note{Kind: "finding", Text: fmt.Sprint("note ", i)}
	}
	got, err := b.s.Commit(b.ctx, ledger.Result{Lease: l, Output: json.RawMessage(`1`), Notes: notes})
	require.NoError(t, err, "a commit that can never fit is a failed unit, not an error the worker retries forever")
	require.Equal(t, ledger.Failed, got.Status)
	require.Equal(t, fault.TooLarge, got.Failure.Kind)
	require.Zero(t, got.Leases)
}

func TestPlanningResumesAfterACrash(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	items := 2_500
	planner := func(context.Context, ledger.Reader, *ledger.Task, int) ([]ledger.Item, error) {
		out := make([]ledger.Item, items)
		for i := range out {
			out[i] = ledger.Item{Key: json.RawMessage(fmt.Sprint(i)), Value: json.RawMessage(fmt.Sprintf(`"v%d"`, i))}
		}
		return out, nil
	}
	s, err := Open(dir, Options{Planner: planner})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	batches := 0
	s.planHook = func() {
		batches++
		cancel() // the process stops after the first batch
	}
	task, _, err := s.Submit(ctx, ledger.NewTask{Name: "t", Steps: []ledger.StepState{{Name: "each", FanOut: true, Limit: 8}}})
	require.NoError(t, err)
	require.Equal(t, 1, batches)
	require.False(t, task.Steps[0].Planned)
	require.Equal(t, items, task.Steps[0].Units)
	require.Equal(t, planBatch, task.Steps[0].Written)
	require.NoError(t, s.Close())

	s, err = Open(dir, Options{Planner: planner})
	require.NoError(t, err)
	defer s.Close()
	c, err := s.Claim(context.Background(), ledger.ClaimRequest{Owner: s.Owner("w"), Max: 8, LeaseFor: time.Minute})
	require.NoError(t, err)
	require.Len(t, c.Leases, 8)
	got, err := s.Task(context.Background(), task.ID)
	require.NoError(t, err)
	require.True(t, got.Steps[0].Planned)
	require.Equal(t, items, got.Steps[0].Written)
	require.NoError(t, s.Read(func(r ledger.Reader) error {
		us, err := r.Units(task.ID, 0)
		require.NoError(t, err)
		require.Len(t, us, items)
		for i, u := range us {
			require.Equal(t, i, u.Item)
			require.Equal(t, fmt.Sprintf(`"v%d"`, i), string(u.Value))
		}
		return nil
	}))
}

func TestPlanningResumedWithADifferentListFailsTheTask(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s, err := Open(dir, Options{Planner: fanOutPlanner(2_500)})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	s.planHook = cancel
	task, _, err := s.Submit(ctx, ledger.NewTask{Name: "t", Steps: []ledger.StepState{{Name: "each", FanOut: true}}})
	require.NoError(t, err)
	require.NoError(t, s.Close())

	s, err = Open(dir, Options{Planner: fanOutPlanner(2_400)})
	require.NoError(t, err)
	defer s.Close()
	c, err := s.Claim(context.Background(), ledger.ClaimRequest{Owner: s.Owner("w"), Max: 1, LeaseFor: time.Minute})
	require.NoError(t, err)
	require.Empty(t, c.Leases)
	got, err := s.Task(context.Background(), task.ID)
	require.NoError(t, err)
	require.Equal(t, ledger.Failed, got.Status)
	require.Contains(t, got.Reason, "different list")
}

// The cache of decoded task records never answers with anything but what
// the record holds: compare every read with a fresh decode of the stored
// bytes, through claims, commits, a batch and a failure.
func TestTaskCacheMatchesTheRecords(t *testing.T) {
	t.Parallel()
	b := setup(t, fanOutPlanner(20))
	task := b.submit(t, []ledger.StepState{{Name: "list"}, {Name: "each", FanOut: true, Limit: 4}, {Name: "end"}})
	check := func() {
		t.Helper()
		require.NoError(t, b.s.view(func(tx *kv.Tx) error {
			r := read.New(tx)
			got, err := r.Task(task.ID)
			require.NoError(t, err)
			want := storedTask(t, tx, task.ID)
			require.Equal(t, want, got)
			got.Steps[0].Done = 99 // a reader's copy is its own
			again, err := r.Task(task.ID)
			require.NoError(t, err)
			require.Equal(t, want, again)
			return nil
		}))
	}
	check()
	l := b.claim1(t, "w")
	check()
	b.done(t, l, `"listed"`)
	check()
	var reqs []ledger.ClaimRequest
	for i := range 3 {
		reqs = append(reqs, ledger.ClaimRequest{Owner: b.s.Owner(fmt.Sprint("w", i)), Max: 1, LeaseFor: time.Minute})
	}
	for _, c := range claimOps(t, b.s, reqs...) {
		check()
		_, claimed, err := b.s.commitAndClaimSynced(b.ctx, ledger.Result{Lease: c.Leases[0], Output: json.RawMessage(`1`)},
			ledger.ClaimRequest{Owner: c.Leases[0].Owner, Max: 1, LeaseFor: time.Minute})
		require.NoError(t, err)
		require.NotNil(t, claimed.Leases[0].Snapshot)
		require.Equal(t, task.ID, claimed.Leases[0].Snapshot.ID)
		check()
	}
	l = b.claim1(t, "w9")
	_, err := b.s.Commit(b.ctx, ledger.Result{Lease: l, Failure: &ledger.Failure{Kind: fault.Trap, Message: "boom"}})
	require.NoError(t, err)
	check()
}

// storedTask decodes a task from its stored bytes, without the ledger's
// decoding or cache: the header, then one record per step.
func storedTask(t *testing.T, tx *kv.Tx, id string) *ledger.Task {
	t.Helper()
	raw, err := tx.GetRaw(kv.TaskKey(id))
	require.NoError(t, err)
	want := new(ledger.Task)
	require.NoError(t, json.Unmarshal(raw, want))
	var head struct {
		StepCount int `json:"step_count"`
	}
	require.NoError(t, json.Unmarshal(raw, &head))
	require.Positive(t, head.StepCount)
	require.Empty(t, want.Steps, "the steps are not in the header")
	for i := range head.StepCount {
		raw, err := tx.GetRaw(kv.StepKey(id, i))
		require.NoError(t, err)
		var st ledger.StepState
		require.NoError(t, json.Unmarshal(raw, &st))
		want.Steps = append(want.Steps, st)
	}
	return want
}

func TestRetryReopensAFailedTaskKeepingEarlierOutputs(t *testing.T) {
	t.Parallel()
	b := setup(t, fanOutPlanner(3))
	task := b.submit(t, []ledger.StepState{{Name: "a"}, {Name: "b"}, {Name: "each", FanOut: true, Limit: 4}, {Name: "d"}})
	for _, out := range []string{`"A"`, `"B"`} {
		b.done(t, b.claim1(t, "w"), out)
	}
	l := b.claim1(t, "w")
	require.Equal(t, 2, l.Step)
	failed, err := b.s.Commit(b.ctx, ledger.Result{Lease: l, Failure: &ledger.Failure{Kind: fault.Trap, Message: "boom"}})
	require.NoError(t, err)
	require.Equal(t, ledger.Failed, failed.Status)

	_, err = b.s.Retry(b.ctx, task.ID, 3, "ana")
	require.ErrorContains(t, err, "not from step 4", "a retry cannot skip ahead of where the task stopped")

	got, err := b.s.Retry(b.ctx, task.ID, -1, "ana")
	require.NoError(t, err)
	require.Equal(t, ledger.Running, got.Status)
	require.Equal(t, 2, got.Cursor)
	require.Nil(t, got.Failure)
	require.Equal(t, 3, got.Steps[2].Units)
	require.Equal(t, 1, got.Steps[2].Pass, "the failed step goes on in its pass: none of its units committed, all three run")
	require.Equal(t, 1, got.Steps[1].Pass, "steps before it keep their outputs")
	require.Equal(t, 1, got.Failures, "totals are kept")

	seen := map[int]bool{}
	for range 3 {
		l := b.claim1(t, "w")
		require.Equal(t, 2, l.Step)
		seen[l.Item] = true
		b.done(t, l, `1`)
	}
	require.Len(t, seen, 3)
	done := b.done(t, b.claim1(t, "w"), `"D"`)
	require.Equal(t, ledger.Succeeded, done.Status)
	require.NoError(t, b.s.Read(func(r ledger.Reader) error {
		out, err := r.StepOutput(task.ID, 1)
		require.NoError(t, err)
		require.JSONEq(t, `"B"`, string(out))
		evs, err := r.Events(task.ID, 0, 0)
		require.NoError(t, err)
		var retried []ledger.Event
		for _, e := range evs {
			if e.Type == ledger.EvRetried {
				retried = append(retried, e)
			}
		}
		require.Len(t, retried, 1)
		require.Contains(t, retried[0].Message, "by ana")
		return nil
	}))

	_, err = b.s.Retry(b.ctx, task.ID, -1, "")
	require.ErrorContains(t, err, "only a failed or cancelled task")
}

func TestRetryFromAnEarlierStepOfACancelledTask(t *testing.T) {
	t.Parallel()
	b := setup(t)
	task := b.submit(t, plainSteps("a", "b", "c"))
	b.done(t, b.claim1(t, "w"), `"A1"`)
	b.claim1(t, "w") // b is leased when the task is cancelled
	_, err := b.s.Cancel(b.ctx, task.ID, "")
	require.NoError(t, err)
	got, err := b.s.Retry(b.ctx, task.ID, 0, "")
	require.NoError(t, err)
	require.Equal(t, 0, got.Cursor)
	l := b.claim1(t, "w")
	require.Equal(t, 0, l.Step)
	b.done(t, l, `"A2"`)
	l = b.claim1(t, "w")
	require.Equal(t, 1, l.Step)
	require.Equal(t, 2, l.Attempt, "attempt numbers go on across passes")
}

func TestATaskBeingRemovedIsNeverRetried(t *testing.T) {
	t.Parallel()
	b := setup(t)
	task := b.submit(t, plainSteps("a", "b"))
	b.done(t, b.claim1(t, "w"), `"A"`)
	_, err := b.s.Cancel(b.ctx, task.ID, "")
	require.NoError(t, err)
	// A removal cut short (or still going) after its first transaction.
	require.NoError(t, b.s.retention.MarkRemoving(b.ctx, task.ID))
	_, err = b.s.Retry(b.ctx, task.ID, -1, "")
	require.ErrorContains(t, err, "being removed")
	require.NoError(t, b.s.Remove(b.ctx, task.ID))
	_, err = b.s.Task(b.ctx, task.ID)
	require.ErrorIs(t, err, ledger.ErrNotFound)
}
