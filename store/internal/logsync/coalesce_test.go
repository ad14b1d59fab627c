package logsync

import (
	"errors"
	"runtime"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestSyncerCoalescesConcurrentSyncs(t *testing.T) {
	t.Parallel()
	var y Coalescer
	release := make(chan struct{})
	entered := make(chan struct{}, 1)
	calls := 0
	fn := func() error {
		calls++
		if calls == 1 {
			entered <- struct{}{}
			<-release
		}
		return nil
	}
	var wg sync.WaitGroup
	const waiters = 8
	errs := make(chan error, waiters+1)
	wg.Add(1)
	go func() { defer wg.Done(); errs <- y.Sync(fn) }()
	<-entered // the first sync is running: everyone arriving now shares the next one
	for range waiters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- y.Sync(fn)
		}()
	}
	for { // until every waiter is parked behind the running sync
		if y.Waiting() == waiters {
			break
		}
		runtime.Gosched()
	}
	close(release)
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	require.Equal(t, 2, calls, "eight callers that arrived during one sync share the next")
}

func TestSyncerFailureIsFinalAndEachCallerGetsItsOwnSync(t *testing.T) {
	t.Parallel()
	var y Coalescer
	boom := errors.New("boom")
	ran := 0
	ok := func() error { ran++; return nil }
	require.NoError(t, y.Sync(ok))
	require.ErrorIs(t, y.Sync(func() error { return boom }), boom)
	require.ErrorIs(t, y.Sync(ok), boom, "a sync after a failed one does not run")
	require.Equal(t, 1, ran)

	// A caller whose own sync succeeded hears success even if a later
	// sync fails before it wakes up.
	var z Coalescer
	release := make(chan error)
	inFirst := make(chan struct{})
	first := make(chan error, 1)
	go func() {
		first <- z.Sync(func() error { close(inFirst); return <-release })
	}()
	<-inFirst
	second := make(chan error, 1)
	go func() { second <- z.Sync(func() error { return <-release }) }()
	for z.Waiting() != 1 {
		runtime.Gosched()
	}
	release <- nil  // sync 1 succeeds
	release <- boom // sync 2, run by the second caller, fails
	require.NoError(t, <-first)
	require.ErrorIs(t, <-second, boom)
}
