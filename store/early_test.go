package store

import (
	"context"
	"encoding/json"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lhengine/lhengine/ledger"
)

// TestEarlyCommitReturnsBeforeItsSync: CommitAndClaim hands back the
// next unit once the transaction committed, while the sync is held; the
// commit is visible at once, and its Durability is done only once the sync
// is.
func TestEarlyCommitReturnsBeforeItsSync(t *testing.T) {
	t.Parallel()
	f := newDiskFixture(t)
	var hold atomic.Bool
	entered := make(chan struct{}, 1)
	release := make(chan struct{})
	s := f.mustOpen(t, Options{syncFn: func(sync func() error) error {
		if hold.Load() {
			entered <- struct{}{}
			<-release
		}
		return sync()
	}})
	defer s.Close()
	task, _, err := s.Submit(f.ctx, ledger.NewTask{Name: "t", Steps: plainSteps("a", "b")})
	require.NoError(t, err)
	c, err := s.Claim(f.ctx, ledger.ClaimRequest{Owner: s.Owner("w"), Max: 1})
	require.NoError(t, err)
	require.Len(t, c.Leases, 1)

	hold.Store(true)
	_, next, dur, err := s.CommitAndClaim(f.ctx, ledger.Result{Lease: c.Leases[0], Output: json.RawMessage(`1`)},
		ledger.ClaimRequest{Owner: s.Owner("w"), Max: 1})
	require.NoError(t, err)
	require.Len(t, next.Leases, 1, "the next unit, handed back in the same transaction")
	require.Equal(t, 1, next.Leases[0].Step)
	<-entered // the sync started, and is held
	select {
	case <-dur.Done():
		t.Fatal("the commit's durability is done while its sync is held")
	default:
	}
	got, err := s.Task(f.ctx, task.ID)
	require.NoError(t, err)
	require.Equal(t, 1, got.Cursor, "what committed is visible before the sync")

	hold.Store(false)
	close(release)
	require.NoError(t, dur.Wait(f.ctx))
	require.NoError(t, (durability{}).Wait(f.ctx), "the zero durability is on disk")
}

// TestEarlyCommitLearnsOfAFailedSync: the sync of an early commit fails;
// the commit's caller has heard back already, its Durability reports the
// failure, and the store refuses writes.
func TestEarlyCommitLearnsOfAFailedSync(t *testing.T) {
	t.Parallel()
	f := newDiskFixture(t)
	var fail atomic.Bool
	s := f.mustOpen(t, Options{syncFn: func(sync func() error) error {
		if fail.Load() {
			return errors.New("disk on fire")
		}
		return sync()
	}})
	defer s.Close()
	_, _, err := s.Submit(f.ctx, ledger.NewTask{Name: "t", Steps: plainSteps("a", "b")})
	require.NoError(t, err)
	c, err := s.Claim(f.ctx, ledger.ClaimRequest{Owner: s.Owner("w"), Max: 1})
	require.NoError(t, err)
	fail.Store(true)
	_, _, dur, err := s.CommitAndClaim(f.ctx, ledger.Result{Lease: c.Leases[0], Output: json.RawMessage(`1`)}, ledger.ClaimRequest{})
	require.NoError(t, err, "the transaction committed")
	require.ErrorIs(t, dur.Wait(context.Background()), ledger.ErrStoreFailed)
	_, _, err = s.Submit(f.ctx, ledger.NewTask{Name: "t", Steps: plainSteps("a")})
	require.ErrorIs(t, err, ledger.ErrStoreFailed)
}
