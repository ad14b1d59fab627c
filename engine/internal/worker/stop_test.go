package worker

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lhengine/lhengine/engine/internal/guest"
	"github.com/lhengine/lhengine/internal/testwait"
	"github.com/lhengine/lhengine/internal/testwasm"
	"github.com/lhengine/lhengine/ledger"
	"github.com/lhengine/lhengine/store"
)

// gatedFanOut is a task of n units, each fetching from url.
func gatedFanOut(url string, n int) string {
	return `
task "gated" {
  step "each" {
    plugin      = "unit.wasm"
    for_each    = range(` + strconv.Itoa(n) + `)
    concurrency = 8
    input       = { url = "` + url + `" }
    http {
      allow = ["127.0.0.1:*"]
    }
  }
}
`
}

// stopRecorder collects what a worker says of its stop.
type stopRecorder struct {
	stopping chan int
	stopped  chan Stopped
}

func newStopRecorder() *stopRecorder {
	return &stopRecorder{stopping: make(chan int, 1), stopped: make(chan Stopped, 1)}
}

func (r *stopRecorder) config(c *Config) {
	c.OnStopping = func(n int) { r.stopping <- n }
	c.OnStopped = func(s Stopped) { r.stopped <- s }
}

// unitStates reads the units of the task's only step.
func unitStates(t *testing.T, st *store.Store, id string) []*ledger.Unit {
	t.Helper()
	var units []*ledger.Unit
	require.NoError(t, st.Read(func(r ledger.Reader) error {
		var err error
		units, err = r.Units(id, 0)
		return err
	}))
	return units
}

// TestGracefulStopLetsAttemptsFinish: closing Stop claims nothing more; the
// attempts in flight run on and commit, and Run returns nil saying so. The
// units never claimed are untouched.
func TestGracefulStopLetsAttemptsFinish(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	b := setup(t)
	srv := newServer(t, 2)
	id := b.submit(t, "t", gatedFanOut(srv.url+"/slow", 6))
	stop := make(chan struct{})
	rec := newStopRecorder()
	w := b.worker("w", id, func(c *Config) {
		c.Concurrency = 2
		c.Stop, c.Grace = stop, time.Minute
		rec.config(c)
	})
	errc, _ := start(t, ctx, w)
	testwait.Receive(t, ctx, srv.arrived, "the first attempt's request")
	testwait.Receive(t, ctx, srv.arrived, "the second attempt's request")
	close(stop)
	require.Equal(t, 2, testwait.Receive(t, ctx, rec.stopping, "the stop to begin"))
	srv.unblock()
	require.NoError(t, testwait.Receive(t, ctx, errc, "Run"))
	require.Equal(t, Stopped{InFlight: 2, Finished: 2}, testwait.Receive(t, ctx, rec.stopped, "the stop's report"))

	done, ready := 0, 0
	for _, u := range unitStates(t, b.st, id) {
		switch u.State {
		case ledger.UnitDone:
			done++
			require.Equal(t, 1, u.Attempt)
		case ledger.UnitReady:
			ready++
			require.Zero(t, u.Attempt, "never claimed")
		}
	}
	require.Equal(t, 2, done)
	require.Equal(t, 4, ready)
	require.Equal(t, int32(2), srv.n.Load(), "no unit started after the stop")
}

// TestGraceRunsOutGivesBackUncharged: attempts still running when the
// grace runs out are cancelled and their units given back at once, their
// attempts not charged; a later worker runs them as attempt 1 and each
// unit commits once.
func TestGraceRunsOutGivesBackUncharged(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	b := setup(t)
	srv := newServer(t, 2)
	id := b.submit(t, "t", gatedFanOut(srv.url+"/slow", 3))
	stop := make(chan struct{})
	rec := newStopRecorder()
	const grace = 5 * time.Second
	w := b.worker("w", id, func(c *Config) {
		c.Concurrency = 2
		c.Stop, c.Grace = stop, grace
		rec.config(c)
	})
	errc, _ := start(t, ctx, w)
	testwait.Receive(t, ctx, srv.arrived, "the first attempt's request")
	testwait.Receive(t, ctx, srv.arrived, "the second attempt's request")
	close(stop)
	require.Equal(t, 2, testwait.Receive(t, ctx, rec.stopping, "the stop to begin"))
	b.clk.fireAt(t, ctx, epoch.Add(grace))
	testwait.Receive(t, ctx, srv.gone, "an attempt to be cancelled")
	testwait.Receive(t, ctx, srv.gone, "the other attempt to be cancelled")
	require.NoError(t, testwait.Receive(t, ctx, errc, "Run"))
	require.Equal(t, Stopped{InFlight: 2, GivenBack: 2}, testwait.Receive(t, ctx, rec.stopped, "the stop's report"))

	for _, u := range unitStates(t, b.st, id) {
		require.Equal(t, ledger.UnitReady, u.State)
		require.Zero(t, u.Attempt, "unit %d: the cut-short attempt is not charged", u.Item)
	}
	require.Equal(t, 2, countEvents(events(t, b.st, id), ledger.EvReleased))
	require.Zero(t, countEvents(events(t, b.st, id), ledger.EvLeaseExpired))

	// The next worker runs every unit, the given-back ones at once (no
	// lease to wait out) and as their first attempt.
	errc, _ = start(t, ctx, b.worker("w2", id, func(c *Config) { c.ExitWhenIdle = true; c.Concurrency = 3 }))
	require.NoError(t, testwait.Receive(t, ctx, errc, "the second Run"))
	task := succeeded(t, ctx, b.st, id)
	require.Equal(t, 3, task.Attempts)
	for _, u := range unitStates(t, b.st, id) {
		require.Equal(t, 1, u.Committed, "unit %d", u.Item)
	}
}

// TestContextEndGivesBackUncharged: ctx ending stops at once, during a
// grace too: the attempts are cancelled and their units given back
// uncharged, and Run returns ctx's error.
func TestContextEndGivesBackUncharged(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	b := setup(t)
	srv := newServer(t, 1)
	id := b.submit(t, "t", fetchTask(srv.url+"/slow"))
	stop := make(chan struct{})
	rec := newStopRecorder()
	w := b.worker("w", id, func(c *Config) {
		c.Stop, c.Grace = stop, time.Hour
		rec.config(c)
	})
	wctx, cancel := context.WithCancel(ctx)
	errc, _ := start(t, wctx, w)
	testwait.Receive(t, ctx, srv.arrived, "the attempt's request")
	close(stop)
	require.Equal(t, 1, testwait.Receive(t, ctx, rec.stopping, "the stop to begin"))
	cancel() // a second signal: no more grace
	testwait.Receive(t, ctx, srv.gone, "the attempt to be cancelled")
	require.ErrorIs(t, testwait.Receive(t, ctx, errc, "Run"), context.Canceled)
	require.Equal(t, Stopped{InFlight: 1, GivenBack: 1}, testwait.Receive(t, ctx, rec.stopped, "the stop's report"))
	units := unitStates(t, b.st, id)
	require.Len(t, units, 1)
	require.Equal(t, ledger.UnitReady, units[0].State)
	require.Zero(t, units[0].Attempt)
	task, err := b.st.Task(ctx, id)
	require.NoError(t, err)
	require.Zero(t, task.Attempts)
}

// oneUnitTask is one unit of the unit guest, with no input.
const oneUnitTask = `
task "t" {
  step "one" {
    plugin = "unit.wasm"
    input  = {}
  }
}
`

// TestCancelWhileLoadingStopsTheAttempt: an attempt can be cancelled while
// its plugin is being loaded: the cancel reaches it then, not at its first
// heartbeat, and nothing runs or commits.
func TestCancelWhileLoadingStopsTheAttempt(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	b := setup(t)
	id := b.submit(t, "t", oneUnitTask)
	loading := make(chan struct{})
	loaded := make(chan error, 1)
	aborts := &Aborts{}
	w := b.worker("w", id, func(c *Config) {
		c.Aborts = aborts
		c.load = func(ctx context.Context, pin ledger.PluginPin, load func(context.Context, ledger.PluginPin) (*guest.Plugin, error)) (*guest.Plugin, error) {
			close(loading)
			<-ctx.Done() // a compile that takes long, but gives way to a cancel
			p, err := load(ctx, pin)
			loaded <- ctx.Err()
			return p, err
		}
	})
	errc, _ := start(t, ctx, w)
	testwait.Receive(t, ctx, loading, "the load")
	_, err := b.st.Cancel(ctx, id, "no longer wanted")
	require.NoError(t, err)
	require.Equal(t, 1, aborts.Abort(id, "the task was cancelled"), "the loading attempt is registered")
	require.ErrorIs(t, testwait.Receive(t, ctx, loaded, "the load to end"), context.Canceled)
	select {
	case err := <-errc:
		t.Fatalf("Run ended: %v", err)
	default:
	}
	require.Empty(t, attempts(t, b.st, id, 0), "nothing committed")
}

// TestLeaseRenewedWhileLoading: a plugin that takes longer to load than a
// third of the lease does not lose it: renewal runs from the attempt's
// first moment.
func TestLeaseRenewedWhileLoading(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	b := setup(t)
	id := b.submit(t, "t", oneUnitTask)
	loading := make(chan struct{})
	hold := make(chan struct{})
	var beats atomic.Int32
	w := b.worker("w", id, func(c *Config) {
		c.ExitWhenIdle = true
		c.heartbeat = func(ctx context.Context, l ledger.Lease, d time.Duration) (time.Time, error) {
			beats.Add(1)
			return b.st.Heartbeat(ctx, l, d)
		}
		c.load = func(ctx context.Context, pin ledger.PluginPin, load func(context.Context, ledger.PluginPin) (*guest.Plugin, error)) (*guest.Plugin, error) {
			close(loading)
			select {
			case <-hold:
			case <-ctx.Done():
			}
			return load(ctx, pin)
		}
	})
	errc, _ := start(t, ctx, w)
	testwait.Receive(t, ctx, loading, "the load")
	b.clk.fireAt(t, ctx, epoch.Add(lease/3))
	b.clk.fireAt(t, ctx, epoch.Add(2*lease/3))
	b.clk.waitTimer(t, ctx, epoch.Add(lease))
	require.Equal(t, int32(2), beats.Load(), "renewed twice while the plugin loaded")
	close(hold)
	require.NoError(t, testwait.Receive(t, ctx, errc, "Run"))
	task := succeeded(t, ctx, b.st, id)
	require.Equal(t, 1, task.Attempts)
	require.Zero(t, countEvents(events(t, b.st, id), ledger.EvLeaseExpired))
}

// TestFinishedTaskReleasesItsInstances: the instances a stateless plugin
// kept idle for a task are closed as the task finishes, not left for the
// pool's timer.
func TestFinishedTaskReleasesItsInstances(t *testing.T) {
	t.Parallel()
	// Compiling a Go guest can take minutes on a busy machine: no
	// 30-second bound here, only the suite's.
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	b := setup(t)
	wasm, err := os.ReadFile(testwasm.GoGuest(t, "stateless"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(b.dir, "stateless.wasm"), wasm, 0o644))
	const task = `
task "stateless" {
  step "each" {
    plugin   = "stateless.wasm"
    for_each = range(3)
    input    = { mode = "count" }
  }
}
`
	id := b.submit(t, "t", task)
	errc, _ := start(t, ctx, b.worker("w", id, func(c *Config) { c.ExitWhenIdle = true }))
	require.NoError(t, testwait.Receive(t, ctx, errc, "Run"))
	succeeded(t, ctx, b.st, id)
	require.Zero(t, b.rt.ReleaseTask(id), "the finished task's instance was closed as it finished")

	// A check that the plugin does keep an instance while its task runs.
	p, err := b.rt.LoadBytes(ctx, "stateless.wasm", wasm)
	require.NoError(t, err)
	_, err = p.Run(ctx, guest.Request{TaskID: "other", Step: "each", Attempt: 1, Input: []byte(`{"mode":"count"}`)},
		guest.Limits{Timeout: time.Minute}, nil)
	require.NoError(t, err)
	require.Equal(t, 1, b.rt.ReleaseTask("other"))
}

// TestStopDuringCommitGivesBack: a commit cut short by the stop (the grace
// ran out, or a second signal, as it was sent) leaves the unit given back
// uncharged, not leased until its lease expires.
func TestStopDuringCommitGivesBack(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	b := setup(t)
	id := b.submit(t, "t", fetchTask(newServer(t, 0).url+"/fast"))
	wctx, cancel := context.WithCancel(ctx)
	w := b.worker("w", id, func(c *Config) {
		c.commit = func(context.Context, ledger.Result, ledger.ClaimRequest) (*ledger.Task, ledger.Claimed, ledger.Durability, error) {
			cancel() // the stop, as the commit is under way
			return nil, ledger.Claimed{}, nil, context.Canceled
		}
	})
	errc, _ := start(t, wctx, w)
	require.ErrorIs(t, testwait.Receive(t, ctx, errc, "Run"), context.Canceled)
	units := unitStates(t, b.st, id)
	require.Len(t, units, 1)
	require.Equal(t, ledger.UnitReady, units[0].State, "given back, not left leased")
	require.Zero(t, units[0].Attempt)
}
