package store

import (
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lhengine/lhengine/ledger"
	"github.com/lhengine/lhengine/store/internal/kv"
)

// writeEarlierLayout rewrites a task in the layout of stores written before
// step records: every step inside the task record, no step records.
func writeEarlierLayout(t *testing.T, s *Store, id string) *ledger.Task {
	t.Helper()
	var whole *ledger.Task
	require.NoError(t, s.update(t.Context(), func(tx *kv.Tx) error {
		var err error
		if whole, err = tx.LoadTask(id); err != nil {
			return err
		}
		for _, k := range tx.Keys(kv.StepPrefix(id)) {
			if err := tx.Del(k); err != nil {
				return err
			}
		}
		b, err := json.Marshal(whole) // Steps set: the record holds them
		if err != nil {
			return err
		}
		return tx.Put(kv.TaskKey(id), b)
	}))
	return whole
}

func requireEarlierLayout(t *testing.T, s *Store, id string, earlier bool) {
	t.Helper()
	require.NoError(t, s.view(func(tx *kv.Tx) error {
		raw, err := tx.GetRaw(kv.TaskKey(id))
		require.NoError(t, err)
		var rec map[string]json.RawMessage
		require.NoError(t, json.Unmarshal(raw, &rec))
		_, steps := rec["steps"]
		_, count := rec["step_count"]
		require.Equal(t, earlier, steps, "steps in the task record")
		require.Equal(t, !earlier, count, "step_count in the task record")
		require.Equal(t, earlier, len(tx.Keys(kv.StepPrefix(id))) == 0, "step records")
		return nil
	}))
}

// A store written before step records opens and runs: a task of that layout
// is read as it is, runs on (its first save writes step records), a finished
// one stays readable and can be removed, and Verify finds nothing wrong.
func TestTasksOfTheEarlierLayoutReadAndRun(t *testing.T) {
	t.Parallel()
	f := newDiskFixture(t)
	clk := &clock{now: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	s := f.mustOpen(t, Options{Planner: fanOutPlanner(3), Now: clk.Now})
	steps := []ledger.StepState{{Name: "a"}, {Name: "each", FanOut: true, Limit: 2}, {Name: "c"}}
	running, _, err := s.Submit(f.ctx, ledger.NewTask{Name: "running", Steps: steps})
	require.NoError(t, err)
	finished, _, err := s.Submit(f.ctx, ledger.NewTask{Name: "finished", Steps: plainSteps("x", "y")})
	require.NoError(t, err)
	commit := func(s *Store, id string) *ledger.Task {
		t.Helper()
		c, err := s.Claim(f.ctx, ledger.ClaimRequest{Owner: s.Owner("w"), Max: 1, LeaseFor: time.Minute, Task: id})
		require.NoError(t, err)
		require.Len(t, c.Leases, 1)
		task, err := s.Commit(f.ctx, ledger.Result{Lease: c.Leases[0], Output: json.RawMessage(`1`)})
		require.NoError(t, err)
		return task
	}
	commit(s, finished.ID)
	require.Equal(t, ledger.Succeeded, commit(s, finished.ID).Status)
	commit(s, running.ID)
	// A unit of the fan-out step is leased when the process goes away.
	c, err := s.Claim(f.ctx, ledger.ClaimRequest{Owner: s.Owner("w"), Max: 1, LeaseFor: time.Minute, Task: running.ID})
	require.NoError(t, err)
	require.Len(t, c.Leases, 1)
	wantRunning := writeEarlierLayout(t, s, running.ID)
	wantFinished := writeEarlierLayout(t, s, finished.ID)
	require.Equal(t, 1, wantRunning.Steps[1].Leased)
	requireEarlierLayout(t, s, running.ID, true)
	require.NoError(t, s.Close())

	rep, err := Verify(f.dir, nil)
	require.NoError(t, err)
	require.Empty(t, rep.Findings)

	s = f.mustOpen(t, Options{Planner: fanOutPlanner(3), Now: clk.Now})
	defer func() { require.NoError(t, s.Close()) }()
	for _, want := range []*ledger.Task{wantRunning, wantFinished} {
		got, err := s.Task(f.ctx, want.ID)
		require.NoError(t, err)
		require.Equal(t, want, got)
	}
	require.NoError(t, s.Read(func(r ledger.Reader) error {
		all, err := r.Tasks()
		require.NoError(t, err)
		require.ElementsMatch(t, []*ledger.Task{wantRunning, wantFinished}, all)
		out, err := r.StepOutput(finished.ID, 1)
		require.NoError(t, err)
		require.JSONEq(t, `1`, string(out))
		return nil
	}))

	// The leased unit of the earlier session is taken back; the task runs
	// to its end, and is stored in the new layout from its first save on.
	for range 3 {
		commit(s, running.ID)
		requireEarlierLayout(t, s, running.ID, false)
	}
	got := commit(s, running.ID)
	require.Equal(t, ledger.Succeeded, got.Status, got.Reason)
	require.Equal(t, 1, got.Reclaims)
	require.Equal(t, 3, got.Steps[1].Done)
	require.Zero(t, got.Steps[1].Leased)
	require.Zero(t, got.Leases)
	require.NoError(t, s.view(func(tx *kv.Tx) error {
		require.Equal(t, got, storedTask(t, tx, running.ID))
		return nil
	}))

	requireEarlierLayout(t, s, finished.ID, true)
	require.NoError(t, s.Remove(f.ctx, finished.ID))
	require.NoError(t, s.Remove(f.ctx, running.ID))
	require.NoError(t, s.view(func(tx *kv.Tx) error {
		require.Empty(t, tx.Keys([]byte("s/")))
		require.Empty(t, tx.Keys([]byte("t/")))
		return nil
	}))
}

// A lease's snapshot holds the steps before its own, as stored; a repair
// that sends the task back over them shows in later snapshots and changes
// none taken before.
func TestSnapshotsHoldTheStepsBeforeTheLeasedOne(t *testing.T) {
	t.Parallel()
	b := setup(t)
	task := b.submit(t, plainSteps("a", "b", "c", "d"))
	check := func(l ledger.Lease) {
		t.Helper()
		whole, err := b.s.Task(b.ctx, task.ID)
		require.NoError(t, err)
		require.NotNil(t, l.Snapshot)
		if l.Step == 0 {
			require.Empty(t, l.Snapshot.Steps)
		} else {
			require.Equal(t, whole.Steps[:l.Step], l.Snapshot.Steps)
		}
		require.Equal(t, whole.ID, l.Snapshot.ID)
		require.Equal(t, whole.Cursor, l.Snapshot.Cursor)
	}
	var kept []ledger.Lease
	var keptSteps [][]ledger.StepState
	for range 3 {
		l := b.claim1(t, "w")
		check(l)
		kept, keptSteps = append(kept, l), append(keptSteps, append([]ledger.StepState(nil), l.Snapshot.Steps...))
		b.done(t, l, `1`)
	}
	l := b.claim1(t, "w")
	require.Equal(t, 3, l.Step)
	check(l)
	_, err := b.s.Commit(b.ctx, ledger.Result{Lease: l, Repair: &ledger.Repair{RestartFrom: 1, Max: 3, Reason: "again"}})
	require.NoError(t, err)
	for step := 1; step < 4; step++ {
		l := b.claim1(t, "w")
		require.Equal(t, step, l.Step)
		check(l)
		for _, st := range l.Snapshot.Steps[1:] {
			require.Equal(t, 2, st.Pass)
		}
		b.done(t, l, `2`)
	}
	for i, l := range kept {
		require.Equal(t, keptSteps[i], l.Snapshot.Steps, "a snapshot taken before never changes")
	}
	got, err := b.s.Task(b.ctx, task.ID)
	require.NoError(t, err)
	require.Equal(t, ledger.Succeeded, got.Status)
}

// A commit writes the task header and the steps it changed, not every step.
func TestACommitWritesOnlyTheStepsItChanges(t *testing.T) {
	t.Parallel()
	b := setup(t)
	names := make([]string, 200)
	for i := range names {
		names[i] = "s"
	}
	task := b.submit(t, plainSteps(names...))
	versions := func() map[string]uint64 {
		out := map[string]uint64{}
		require.NoError(t, b.s.db.View(func(txn *badger.Txn) error {
			for _, k := range b.s.kv.Tx(txn, false, nil).Keys(kv.StepPrefix(task.ID)) {
				item, err := txn.Get(k)
				require.NoError(t, err)
				out[string(k)] = item.Version()
			}
			return nil
		}))
		return out
	}
	l := b.claim1(t, "w")
	before := versions()
	require.Len(t, before, 200)
	_, claimed, err := b.s.commitAndClaimSynced(b.ctx, ledger.Result{Lease: l, Output: json.RawMessage(`1`), HeaderOnly: true},
		ledger.ClaimRequest{Owner: b.s.Owner("w"), Max: 1, LeaseFor: time.Minute})
	require.NoError(t, err)
	require.Len(t, claimed.Leases, 1)
	after := versions()
	var changed []string
	for k, v := range after {
		if before[k] != v {
			changed = append(changed, k)
		}
	}
	require.ElementsMatch(t, []string{string(kv.StepKey(task.ID, 0)), string(kv.StepKey(task.ID, 1))}, changed)
}

// Verify reports a task whose step records are not all there.
func TestVerifyFindsAMissingStepRecord(t *testing.T) {
	t.Parallel()
	f := newDiskFixture(t)
	s := f.mustOpen(t, Options{})
	task, _, err := s.Submit(f.ctx, ledger.NewTask{Name: "t", Steps: plainSteps("a", "b", "c")})
	require.NoError(t, err)
	require.NoError(t, s.update(f.ctx, func(tx *kv.Tx) error { return tx.Del(kv.StepKey(task.ID, 1)) }))
	require.NoError(t, s.Close())
	rep, err := Verify(f.dir, nil)
	require.NoError(t, err)
	require.Len(t, rep.Findings, 1)
	require.Contains(t, rep.Findings[0].Detail, "3 steps but 2 step records")
}

// The task a commit returns whole (for a progress display) is what is
// stored, whether its steps were read from their records or from the
// mirror kept for such callers: through commits, concurrent commits that
// share transactions, a repair and a cancel.
func TestCommittedTasksMatchTheRecords(t *testing.T) {
	t.Parallel()
	b := setup(t, fanOutPlanner(12))
	task := b.submit(t, []ledger.StepState{{Name: "list"}, {Name: "each", FanOut: true, Limit: 4}, {Name: "end"}, {Name: "last"}})
	check := func(got *ledger.Task) {
		t.Helper()
		require.NoError(t, b.s.view(func(tx *kv.Tx) error {
			require.Equal(t, storedTask(t, tx, task.ID), got)
			return nil
		}))
	}
	next := func(w string) ledger.ClaimRequest {
		return ledger.ClaimRequest{Owner: b.s.Owner(w), Max: 1, LeaseFor: time.Minute, Task: task.ID}
	}
	l := b.claim1(t, "w")
	// (The task returned here is read before the claim that follows planning.)
	_, c, err := b.s.commitAndClaimSynced(b.ctx, ledger.Result{Lease: l, Output: json.RawMessage(`1`)}, next("w0"))
	require.NoError(t, err)
	leases := c.Leases
	for i := 1; i < 4; i++ {
		more, err := b.s.Claim(b.ctx, next(fmt.Sprint("w", i)))
		require.NoError(t, err)
		leases = append(leases, more.Leases...)
	}
	require.Len(t, leases, 4)
	var wg sync.WaitGroup
	after := make(chan ledger.Lease, len(leases)) // a lease of the next step, taken with a commit
	for _, l := range leases {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				_, c, err := b.s.commitAndClaimSynced(b.ctx, ledger.Result{Lease: l, Output: json.RawMessage(`2`)}, next(l.Owner[len(b.s.Session())+1:]))
				if !assert.NoError(t, err) || len(c.Leases) == 0 {
					return
				}
				if c.Leases[0].Step != 1 {
					after <- c.Leases[0]
					return
				}
				l = c.Leases[0]
			}
		}()
	}
	wg.Wait()
	got, err := b.s.Task(b.ctx, task.ID)
	require.NoError(t, err)
	require.Equal(t, 2, got.Cursor)
	select {
	case l = <-after:
	default:
		l = b.claim1(t, "w")
	}
	got, err = b.s.Commit(b.ctx, ledger.Result{Lease: l, Output: json.RawMessage(`3`)})
	require.NoError(t, err)
	check(got)
	l = b.claim1(t, "w")
	got, err = b.s.Commit(b.ctx, ledger.Result{Lease: l, Repair: &ledger.Repair{RestartFrom: 2, Max: 2, Reason: "again"}})
	require.NoError(t, err)
	check(got)
	require.Equal(t, 2, got.Steps[2].Pass)
	l = b.claim1(t, "w")
	got, err = b.s.Commit(b.ctx, ledger.Result{Lease: l, Output: json.RawMessage(`4`)})
	require.NoError(t, err)
	check(got)
	got, err = b.s.Cancel(b.ctx, task.ID, "enough")
	require.NoError(t, err)
	check(got)
}
