package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lhengine/lhengine/internal/testpg"
	"github.com/lhengine/lhengine/ledger"
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
	b.reindex(nil)
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
