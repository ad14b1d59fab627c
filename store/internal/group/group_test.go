package group

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// until waits for cond, yielding; the deadline is only a safety net.
func until(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		require.True(t, time.Now().Before(deadline), "condition not reached")
		runtime.Gosched()
	}
}

func (q *Queue[T]) queued() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.queue)
}

// TestBatchesGatherWaitingCallers: while a leader runs a batch, callers
// queue; the next batch takes them all (up to Max), each caller gets its
// own outcome, and every batch is completed once.
func TestBatchesGatherWaitingCallers(t *testing.T) {
	t.Parallel()
	gate := make(chan struct{})
	var mu sync.Mutex
	var sizes []int
	completed := 0
	q := &Queue[int]{Max: 3}
	q.Run = func(batch []*Op[int]) bool {
		mu.Lock()
		first := len(sizes) == 0
		sizes = append(sizes, len(batch))
		mu.Unlock()
		if first {
			<-gate
		}
		for _, o := range batch {
			if o.Fn%2 == 1 {
				o.Err = errors.New("odd")
			}
		}
		return true
	}
	q.Complete = func(batch []*Op[int], sync bool) {
		require.True(t, sync)
		mu.Lock()
		completed += len(batch)
		mu.Unlock()
		for _, o := range batch {
			o.Finish()
		}
	}
	errs := make([]error, 6)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); errs[0] = q.Do(0) }()
	until(t, func() bool { mu.Lock(); defer mu.Unlock(); return len(sizes) == 1 })
	for i := 1; i < 6; i++ {
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = q.Do(i) }()
	}
	until(t, func() bool { return q.queued() == 5 })
	close(gate)
	wg.Wait()
	require.Equal(t, []int{1, 3, 2}, sizes, "one alone, then the waiting callers, Max at a time")
	require.Equal(t, 6, completed)
	for i, err := range errs {
		if i%2 == 1 {
			require.EqualError(t, err, "odd")
		} else {
			require.NoError(t, err)
		}
	}
}

// TestEarlyReturnsBeforeComplete: an early caller hears back once its
// batch ran, and its Durability once the batch is complete, with the
// sync's failure.
func TestEarlyReturnsBeforeComplete(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	failed := errors.New("sync failed")
	q := &Queue[string]{Max: 8}
	q.Run = func([]*Op[string]) bool { return true }
	q.Complete = func(batch []*Op[string], _ bool) {
		<-release
		for _, o := range batch {
			if o.Early() {
				o.SyncErr = failed
			}
			o.Finish()
		}
	}
	d, err := q.Early("x")
	require.NoError(t, err)
	select {
	case <-d.Done():
		t.Fatal("done before its batch completed")
	default:
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	require.ErrorIs(t, d.Wait(ctx), context.Canceled)
	close(release)
	require.ErrorIs(t, d.Wait(t.Context()), failed)
	q.Wait()
}

// TestZeroDurability is on disk already.
func TestZeroDurability(t *testing.T) {
	t.Parallel()
	var d Durability[int]
	<-d.Done()
	require.NoError(t, d.Wait(t.Context()))
}

// TestQueuedOpsRunInTheOrderTheyWereQueued: an op's queued callback runs
// once it has its place, before its batch runs; a caller that takes a
// lock before queuing and releases it in the callback has its ops run in
// the order it took the lock, while their batches share transactions.
func TestQueuedOpsRunInTheOrderTheyWereQueued(t *testing.T) {
	t.Parallel()
	gate := make(chan struct{})
	var mu sync.Mutex
	var ran []int
	first := true
	q := &Queue[int]{Max: 4}
	q.Run = func(batch []*Op[int]) bool {
		mu.Lock()
		wait := first
		first = false
		for _, o := range batch {
			ran = append(ran, o.Fn)
		}
		mu.Unlock()
		if wait {
			<-gate
		}
		return false
	}
	q.Complete = func(batch []*Op[int], _ bool) {
		for _, o := range batch {
			o.Finish()
		}
	}
	var order sync.Mutex // the caller's lock: held from before an op is queued until it has its place
	var wg sync.WaitGroup
	const n = 20
	took := make([]int, 0, n)
	for i := range n {
		wg.Go(func() {
			order.Lock()
			took = append(took, i)
			require.NoError(t, q.DoThen(i, order.Unlock))
		})
		if i == 0 {
			until(t, func() bool { mu.Lock(); defer mu.Unlock(); return len(ran) == 1 }) // the first leads, held at the gate
		}
	}
	until(t, func() bool { return q.queued() == n-1 })
	close(gate)
	wg.Wait()
	require.Equal(t, took, ran, "ops ran in the order their callers took the lock")
}
