package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/lhengine/lhengine/internal/testpg"
	"github.com/lhengine/lhengine/ledger"
	"github.com/lhengine/lhengine/store/internal/index"
	"github.com/lhengine/lhengine/store/internal/kv"
	"github.com/lhengine/lhengine/store/internal/pgkv"
)

// openShared opens n stores, as n processes would, on one PostgreSQL
// database.
func openShared(t *testing.T, n int, o PostgresOptions) []*Store {
	t.Helper()
	url := testpg.DB(t)
	out := make([]*Store, n)
	for i := range out {
		o := o
		o.Migrate = i == 0
		s, err := OpenPostgres(t.Context(), url, o)
		require.NoError(t, err)
		t.Cleanup(func() { require.NoError(t, s.Close()) })
		out[i] = s
	}
	return out
}

// TestPostgresProcessesShareTheWork: two stores on one database work one
// fan-out at once; each learns of the units the other's commits made
// ready, and every unit is committed exactly once. The first works 50
// units alone, then the second 50 alone (it learned of the planned
// fan-out only through the first's notices), then both at once to the
// end.
func TestPostgresProcessesShareTheWork(t *testing.T) {
	t.Parallel()
	const items = 300
	ss := openShared(t, 2, PostgresOptions{Options: Options{Planner: fanOutPlanner(items)}})
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	task, _, err := ss[0].Submit(ctx, ledger.NewTask{Name: "t", Steps: []ledger.StepState{{Name: "list"}, {Name: "each", FanOut: true}, {Name: "sum"}}})
	require.NoError(t, err)

	var mu sync.Mutex
	committed := map[[2]int]string{} // step, item -> the store that committed it
	by := map[string]int{}
	work := func(name string, s *Store, limit int) error {
		for n := 0; n < limit; {
			changed := s.Changed()
			var cur *ledger.Task
			if err := s.Read(func(r ledger.Reader) (err error) { cur, err = r.Task(task.ID); return err }); err != nil {
				return err
			}
			if cur.Status.Terminal() {
				return nil
			}
			c, err := s.Claim(ctx, ledger.ClaimRequest{Owner: s.Owner(name), Max: 4, LeaseFor: time.Minute})
			if err != nil {
				return err
			}
			if len(c.Leases) == 0 {
				select {
				case <-changed:
				case <-ctx.Done():
					return ctx.Err()
				}
				continue
			}
			for _, l := range c.Leases {
				if _, err := s.Commit(ctx, ledger.Result{Lease: l, Output: json.RawMessage(fmt.Sprintf(`"%s"`, name))}); err != nil {
					return fmt.Errorf("%s: commit of step %d item %d: %w", name, l.Step, l.Item, err)
				}
				mu.Lock()
				k := [2]int{l.Step, l.Item}
				if prev, ok := committed[k]; ok {
					mu.Unlock()
					return fmt.Errorf("step %d item %d committed twice, by %s and %s", l.Step, l.Item, prev, name)
				}
				committed[k] = name
				by[name]++
				mu.Unlock()
				n++
			}
		}
		return nil
	}
	require.NoError(t, work("p0", ss[0], 50))
	require.NoError(t, work("p1", ss[1], 50))
	var wg sync.WaitGroup
	errs := make([]error, len(ss))
	for i, s := range ss {
		wg.Go(func() { errs[i] = work(fmt.Sprintf("p%d", i), s, items+2) })
	}
	wg.Wait()
	require.NoError(t, errors.Join(errs...))
	require.Len(t, committed, items+2)
	require.GreaterOrEqual(t, by["p0"], 50, "%v", by)
	require.GreaterOrEqual(t, by["p1"], 50, "%v", by)

	var got *ledger.Task
	require.NoError(t, ss[1].Read(func(r ledger.Reader) (err error) { got, err = r.Task(task.ID); return err }))
	require.Equal(t, ledger.Succeeded, got.Status)
	require.Equal(t, items+2, got.Attempts, "no unit ran twice")
}

// TestPostgresStoppedProcessLosesItsLeases: a process the others see
// stopped has its lease taken back at once, long before it expires, with
// a new epoch, and its late commit is refused by the record.
func TestPostgresStoppedProcessLosesItsLeases(t *testing.T) {
	t.Parallel()
	ss := openShared(t, 2, PostgresOptions{})
	a, b := ss[0], ss[1]
	ctx := t.Context()
	task, _, err := a.Submit(ctx, ledger.NewTask{Name: "t", Steps: []ledger.StepState{{Name: "only"}}})
	require.NoError(t, err)
	ca, err := a.Claim(ctx, ledger.ClaimRequest{Owner: a.Owner("w"), Max: 1, LeaseFor: time.Hour})
	require.NoError(t, err)
	require.Len(t, ca.Leases, 1)

	// b cannot take a live lease.
	b.reindex(true, nil)
	cb, err := b.Claim(ctx, ledger.ClaimRequest{Owner: b.Owner("w"), Max: 1, LeaseFor: time.Hour})
	require.NoError(t, err)
	require.Empty(t, cb.Leases)

	// a is cut off: the others see it as stopped.
	require.NoError(t, b.pg.Stopped(ctx, a.Session(), b.now()))
	require.NoError(t, b.peers.refresh(ctx))
	workers, err := b.Workers(ctx)
	require.NoError(t, err)
	require.Len(t, workers, 2)
	for _, w := range workers {
		require.Equal(t, w.Session != a.Session(), w.Alive, "%+v", w)
		require.Equal(t, w.Session == b.Session(), w.This)
	}
	cb, err = b.Claim(ctx, ledger.ClaimRequest{Owner: b.Owner("w"), Max: 1, LeaseFor: time.Hour})
	require.NoError(t, err)
	require.Len(t, cb.Leases, 1, "the lease of a stopped process goes back before it expires")
	require.Greater(t, cb.Leases[0].Epoch, ca.Leases[0].Epoch)

	_, err = a.Commit(ctx, ledger.Result{Lease: ca.Leases[0], Output: json.RawMessage(`"late"`)})
	require.ErrorIs(t, err, ledger.ErrLeaseLost)
	_, err = b.Commit(ctx, ledger.Result{Lease: cb.Leases[0], Output: json.RawMessage(`"taken over"`)})
	require.NoError(t, err)
	require.NoError(t, a.Read(func(r ledger.Reader) error {
		out, err := r.StepOutput(task.ID, 0)
		require.NoError(t, err)
		require.JSONEq(t, `"taken over"`, string(out))
		return nil
	}))
}

// TestPostgresNoticesReadOnlyTheUnitsNamed: a process that hears of
// another's claims and commits on a task whose shape it knows reads only
// the units the notice names into its index, not the whole task; a
// change of shape (here a cancel) reads the task whole.
func TestPostgresNoticesReadOnlyTheUnitsNamed(t *testing.T) {
	t.Parallel()
	const items = 20
	ss := openShared(t, 2, PostgresOptions{Options: Options{Planner: fanOutPlanner(items)}})
	a, b := ss[0], ss[1]
	b.stopPeers() // b reads changes only when the test says
	b.peersDone.Wait()
	ctx := t.Context()
	task, _, err := a.Submit(ctx, ledger.NewTask{Name: "t", Steps: []ledger.StepState{{Name: "list"}, {Name: "each", FanOut: true, Limit: items}, {Name: "sum"}}})
	require.NoError(t, err)
	var held []ledger.Lease
	for len(held) < 3 {
		changed := a.Changed()
		c, err := a.Claim(ctx, ledger.ClaimRequest{Owner: a.Owner("w"), Max: 3 - len(held), LeaseFor: time.Hour})
		require.NoError(t, err)
		if len(c.Leases) == 0 {
			<-changed // the fan-out is being planned
			continue
		}
		for _, l := range c.Leases {
			if l.Step == 0 {
				_, err := a.Commit(ctx, ledger.Result{Lease: l, Output: json.RawMessage(`"list"`)})
				require.NoError(t, err)
				continue
			}
			held = append(held, l)
		}
	}
	b.reindex(true, nil)
	wholes := b.wholes
	ready := func() map[index.Ref]bool {
		b.idx.Mu.Lock()
		defer b.idx.Mu.Unlock()
		refs, _ := b.idx.Candidates(task.ID, time.Now(), items+1, func(index.Ref) bool { return false })
		out := map[index.Ref]bool{}
		for _, r := range refs {
			out[r] = true
		}
		return out
	}
	require.Len(t, ready(), items-3)

	// a commits one unit and gives another back: b reads those two.
	_, err = a.Commit(ctx, ledger.Result{Lease: held[0], Output: json.RawMessage(`"done"`)})
	require.NoError(t, err)
	require.NoError(t, a.Release(ctx, held[1]))
	ref := func(l ledger.Lease) index.Ref { return index.Ref{Task: task.ID, Step: l.Step, Item: l.Item} }
	b.reindex(false, []*pgkv.Change{{Task: task.ID, Units: []pgkv.Unit{{Step: held[0].Step, Item: held[0].Item}, {Step: held[1].Step, Item: held[1].Item}}}})
	require.Equal(t, wholes, b.wholes, "the task's shape is unchanged: only the units named are read")
	got := ready()
	require.Len(t, got, items-3+1)
	require.True(t, got[ref(held[1])], "the unit given back is ready again")
	require.False(t, got[ref(held[0])], "the unit committed is not")
	b.idx.Mu.Lock()
	_, leased := b.idx.Leases[ref(held[2])]
	_, gone := b.idx.Leases[ref(held[0])]
	b.idx.Mu.Unlock()
	require.True(t, leased, "a lease still held stays known")
	require.False(t, gone)

	// A cancel changes the task's shape: it is read whole, and leaves the index.
	_, err = a.Cancel(ctx, task.ID, "enough")
	require.NoError(t, err)
	b.reindex(false, []*pgkv.Change{{Task: task.ID}})
	require.Equal(t, wholes+1, b.wholes)
	require.Empty(t, ready())
	b.idx.Mu.Lock()
	require.NotContains(t, b.idx.Active, task.ID)
	b.idx.Mu.Unlock()
}

// TestPostgresOthersChangedWakesOnAnotherProcessCommit: OthersChanged,
// taken before another process submits a task, is closed once this one
// has read it, and the task is then pending here: an idle worker claims
// it at once, not at its next poll.
func TestPostgresOthersChangedWakesOnAnotherProcessCommit(t *testing.T) {
	t.Parallel()
	ss := openShared(t, 2, PostgresOptions{})
	a, b := ss[0], ss[1]
	ctx := t.Context()
	deadline := time.After(time.Minute)
	for heard := false; !heard; {
		woken := b.OthersChanged()
		// b may not listen yet when a commits: submit until it hears.
		_, _, err := a.Submit(ctx, ledger.NewTask{Name: "t", Steps: []ledger.StepState{{Name: "only"}}})
		require.NoError(t, err)
		select {
		case <-woken:
			heard = true
			require.True(t, b.Pending(), "woken once the task is in b's index")
		case <-time.After(100 * time.Millisecond):
		case <-deadline:
			t.Fatal("OthersChanged was never closed")
		}
	}
	c, err := b.Claim(ctx, ledger.ClaimRequest{Owner: b.Owner("w"), Max: 1, LeaseFor: time.Minute})
	require.NoError(t, err)
	require.Len(t, c.Leases, 1, "the task another process submitted is claimed here")
}

// TestPostgresLongPipelineWalkSeesEveryStep: on PostgreSQL the steps of
// a task are read in one walk once there are walkSteps of them to read
// (kv.Tx.Fill for a whole task, the lease snapshot's steps before the
// cursor). A 12-step pipeline worked one unit at a time takes those paths
// from step 8 on: every lease shows the steps before it as committed, and
// the finished task every step done. (It checks what the walks read; that
// they are single walks shows in the statement counts, docs/BENCHMARKS.md.)
func TestPostgresLongPipelineWalkSeesEveryStep(t *testing.T) {
	t.Parallel()
	const n = 12
	ss := openShared(t, 1, PostgresOptions{})
	s := ss[0]
	ctx := t.Context()
	steps := make([]ledger.StepState, n)
	for i := range steps {
		steps[i] = ledger.StepState{Name: fmt.Sprintf("s%d", i)}
	}
	task, _, err := s.Submit(ctx, ledger.NewTask{Name: "long", Steps: steps})
	require.NoError(t, err)
	for i := range n {
		c, err := s.Claim(ctx, ledger.ClaimRequest{Owner: s.Owner("w"), Max: 1, LeaseFor: time.Minute})
		require.NoError(t, err)
		require.Len(t, c.Leases, 1)
		l := c.Leases[0]
		require.Equal(t, i, l.Step)
		require.Len(t, l.Snapshot.Steps, i, "the lease's snapshot holds the steps before its own")
		for j, st := range l.Snapshot.Steps {
			require.Equal(t, fmt.Sprintf("s%d", j), st.Name)
			require.Equal(t, 1, st.Done, "step %d before step %d", j, i)
		}
		_, err = s.Commit(ctx, ledger.Result{Lease: l, Output: json.RawMessage(fmt.Sprintf(`"out-%d"`, i))})
		require.NoError(t, err)
	}
	got, err := s.Task(ctx, task.ID)
	require.NoError(t, err)
	require.Equal(t, ledger.Succeeded, got.Status)
	require.Len(t, got.Steps, n)
	for i, st := range got.Steps {
		require.Equal(t, fmt.Sprintf("s%d", i), st.Name)
		require.Equal(t, 1, st.Done)
	}
	require.JSONEq(t, fmt.Sprintf(`"out-%d"`, n-1), string(got.Output))
}

// TestPostgresOneProcessDeliversANotification: of two processes sharing
// a store, the one whose intent names it delivers a notification; the
// other's intent is refused (ErrDelivering) while that process lives,
// and taken over once it is seen stopped; after the outcome, neither
// sends it again.
func TestPostgresOneProcessDeliversANotification(t *testing.T) {
	t.Parallel()
	ss := openShared(t, 2, PostgresOptions{})
	a, b := ss[0], ss[1]
	ctx := t.Context()
	spec := &ledger.NotifySpec{URL: "http://127.0.0.1:8025/hook", Events: []ledger.EventType{ledger.EvSucceeded}}
	_, _, err := a.Submit(ctx, ledger.NewTask{Name: "notified", Steps: []ledger.StepState{{Name: "only"}}, Notify: spec})
	require.NoError(t, err)
	c, err := a.Claim(ctx, ledger.ClaimRequest{Owner: a.Owner("w"), Max: 1, LeaseFor: time.Minute})
	require.NoError(t, err)
	require.Len(t, c.Leases, 1)
	_, err = a.Commit(ctx, ledger.Result{Lease: c.Leases[0], Output: json.RawMessage(`"done"`)})
	require.NoError(t, err)
	pending, err := b.PendingNotifications(10, func(string) bool { return false })
	require.NoError(t, err)
	require.Len(t, pending, 1)
	n := &pending[0]

	e, err := a.NotifyIntent(ctx, n)
	require.NoError(t, err)
	require.Equal(t, a.Session(), e.Sender)
	_, err = b.NotifyIntent(ctx, n)
	require.ErrorIs(t, err, ledger.ErrDelivering, "a lives and sends it")
	again, err := a.NotifyIntent(ctx, n)
	require.NoError(t, err, "its sender may send it again (a retry)")
	require.Equal(t, a.Session(), again.Sender)

	// a is seen stopped: b takes the delivery over, under the same key.
	require.NoError(t, b.pg.Stopped(ctx, a.Session(), b.now()))
	require.NoError(t, b.peers.refresh(ctx))
	e, err = b.NotifyIntent(ctx, n)
	require.NoError(t, err)
	require.Equal(t, b.Session(), e.Sender)
	require.Equal(t, n.IdempotencyKey(), e.IdempotencyKey)
	require.NoError(t, b.NotifyOutcome(ctx, n, json.RawMessage(`{"status":200}`), "delivered"))
	_, err = a.NotifyIntent(ctx, n)
	require.ErrorIs(t, err, ledger.ErrNotFound, "delivered: never sent again")
}

// TestPostgresClaimLooksPastUnitsAnotherTransactionHolds: while another
// transaction holds the records of a fan-out's first two units locked (a
// claim or commit of another process in flight), a claim skips them
// without waiting and leases the next ones; once they are free it leases
// them too.
func TestPostgresClaimLooksPastUnitsAnotherTransactionHolds(t *testing.T) {
	t.Parallel()
	url := testpg.DB(t)
	ctx := t.Context()
	s, err := OpenPostgres(ctx, url, PostgresOptions{Options: Options{Planner: fanOutPlanner(6)}, Migrate: true})
	require.NoError(t, err)
	defer s.Close()
	task, _, err := s.Submit(ctx, ledger.NewTask{Name: "t", Steps: []ledger.StepState{{Name: "each", FanOut: true, Limit: 8}}})
	require.NoError(t, err)

	conn, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	defer conn.Close(context.Background())
	tx, err := conn.Begin(ctx)
	require.NoError(t, err)
	var locked int
	require.NoError(t, tx.QueryRow(ctx, `SELECT count(*) FROM (SELECT 1 FROM lhengine_kv WHERE k = ANY($1) FOR UPDATE) AS l`,
		[][]byte{kv.UnitKey(task.ID, 0, 0), kv.UnitKey(task.ID, 0, 1)}).Scan(&locked))
	require.Equal(t, 2, locked)

	items := func(c ledger.Claimed) (out []int) {
		for _, l := range c.Leases {
			out = append(out, l.Item)
		}
		return out
	}
	c, err := s.Claim(ctx, ledger.ClaimRequest{Owner: s.Owner("w"), Max: 2, LeaseFor: time.Minute})
	require.NoError(t, err)
	require.Equal(t, []int{2, 3}, items(c), "the locked units are skipped, not waited for")

	require.NoError(t, tx.Rollback(ctx))
	c, err = s.Claim(ctx, ledger.ClaimRequest{Owner: s.Owner("w"), Max: 8, LeaseFor: time.Minute})
	require.NoError(t, err)
	require.ElementsMatch(t, []int{0, 1, 4, 5}, items(c))
}
