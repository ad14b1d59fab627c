package worker

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lhengine/lhengine/engine/internal/guest"
	"github.com/lhengine/lhengine/engine/internal/plan"
	"github.com/lhengine/lhengine/internal/testwait"
	"github.com/lhengine/lhengine/internal/testwasm"
	"github.com/lhengine/lhengine/ledger"
	"github.com/lhengine/lhengine/store"
)

const lease = 30 * time.Second

// bundle is one test's store, runtime and fake clock, with the unit guest
// beside the task files.
type bundle struct {
	st     *store.Store
	rt     *guest.Runtime
	specs  *plan.Cache
	clk    *fakeClock
	dir    string
	client *http.Client
}

func setup(t *testing.T) *bundle {
	t.Helper()
	wasm := testwasm.BuildC(t, "testdata/unit.c")
	b := &bundle{specs: plan.NewCache(), clk: newFakeClock(), dir: t.TempDir()}
	testwasm.Copy(t, wasm, filepath.Join(b.dir, "unit.wasm"))
	var err error
	b.st, err = store.Open(filepath.Join(b.dir, "store"), store.Options{Now: b.clk.Now, Planner: b.specs.Planner()})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, b.st.Close()) })
	b.rt, err = guest.NewRuntime(context.Background(), guest.Config{CacheDir: filepath.Join(b.dir, "cache")})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, b.rt.Close(context.Background())) })
	tr := &http.Transport{}
	b.client = &http.Client{Transport: tr}
	t.Cleanup(tr.CloseIdleConnections)
	return b
}

// submit writes a task file and queues it.
func (b *bundle) submit(t *testing.T, name, hcl string) string {
	t.Helper()
	path := filepath.Join(b.dir, name+".hcl")
	require.NoError(t, os.WriteFile(path, []byte(hcl), 0o644))
	sub, err := plan.Prepare(context.Background(), path, nil, func(ctx context.Context, p string) error {
		_, err := b.rt.Load(ctx, p, "")
		return err
	})
	require.NoError(t, err)
	task, _, err := b.st.Submit(context.Background(), ledger.NewTask{Name: sub.Task.Name, Steps: sub.Steps, Manifest: sub.Manifest})
	require.NoError(t, err)
	return task.ID
}

func (b *bundle) worker(name, task string, edit func(*Config)) *Worker {
	cfg := Config{Store: b.st, Runtime: b.rt, Specs: b.specs, Name: name, Task: task,
		Concurrency: 1, LeaseFor: lease, PollEvery: time.Hour, Clock: b.clk, HTTPClient: b.client}
	if edit != nil {
		edit(&cfg)
	}
	return New(cfg)
}

// start runs w until the test ends; the returned channel gets Run's error.
func start(t *testing.T, ctx context.Context, w *Worker) (<-chan error, <-chan struct{}) {
	ctx, cancel := context.WithCancel(ctx)
	errc := make(chan error, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		errc <- w.Run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return errc, done
}

// server is a loopback HTTP server whose first `block` requests hang until
// released or abandoned by the client; later ones are answered at once.
type server struct {
	url     string
	block   int32
	n       atomic.Int32
	arrived chan struct{} // a blocked request arrived
	gone    chan struct{} // a blocked request was abandoned by its client
	release chan struct{}
	once    sync.Once
}

// unblock answers the blocked requests.
func (s *server) unblock() { s.once.Do(func() { close(s.release) }) }

func newServer(t *testing.T, block int32) *server {
	s := &server{block: block, arrived: make(chan struct{}, 8), gone: make(chan struct{}, 8), release: make(chan struct{})}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.n.Add(1) <= s.block {
			s.arrived <- struct{}{}
			select {
			case <-s.release:
			case <-r.Context().Done():
				s.gone <- struct{}{}
				return
			}
		}
		fmt.Fprintln(w, "ok")
	}))
	t.Cleanup(func() {
		s.unblock()
		srv.Close()
	})
	s.url = srv.URL
	return s
}

func fetchTask(url string) string {
	return fmt.Sprintf(`
task "fetch" {
  step "one" {
    plugin = "unit.wasm"
    input  = { url = %q }
    http {
      allow = ["127.0.0.1:*"]
    }
  }
}
`, url)
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func events(t *testing.T, st *store.Store, id string) []ledger.Event {
	var evs []ledger.Event
	require.NoError(t, st.Read(func(r ledger.Reader) error {
		var err error
		evs, err = r.Events(id, 0, 0)
		return err
	}))
	return evs
}

// attempts reads the attempts of a task's step.
func attempts(t *testing.T, st *store.Store, id string, step int) []*ledger.Attempt {
	t.Helper()
	var as []*ledger.Attempt
	require.NoError(t, st.Read(func(r ledger.Reader) error {
		var err error
		as, err = r.Attempts(id, step)
		return err
	}))
	return as
}

// succeeded reads a task, which must have succeeded.
func succeeded(t *testing.T, ctx context.Context, st *store.Store, id string) *ledger.Task {
	t.Helper()
	task, err := st.Task(ctx, id)
	require.NoError(t, err)
	require.Equal(t, ledger.Succeeded, task.Status, task.Reason)
	return task
}

func countEvents(evs []ledger.Event, typ ledger.EventType) int {
	n := 0
	for _, e := range evs {
		if e.Type == typ {
			n++
		}
	}
	return n
}

// TestHeartbeatRetriedAfterTransientError: a heartbeat that fails with
// anything but a lost lease is retried after LeaseFor/30, and the lease
// goes on being renewed; the attempt commits.
func TestHeartbeatRetriedAfterTransientError(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	b := setup(t)
	srv := newServer(t, 1)
	id := b.submit(t, "t", fetchTask(srv.url+"/slow"))

	var calls atomic.Int32
	w := b.worker("w", id, func(c *Config) {
		c.ExitWhenIdle = true
		c.heartbeat = func(ctx context.Context, l ledger.Lease, d time.Duration) (time.Time, error) {
			if calls.Add(1) == 1 {
				return time.Time{}, errors.New("store briefly unavailable")
			}
			return b.st.Heartbeat(ctx, l, d)
		}
	})
	errc, _ := start(t, ctx, w)
	testwait.Receive(t, ctx, srv.arrived, "the attempt's request")

	b.clk.fireAt(t, ctx, epoch.Add(lease/3))          // first heartbeat: fails
	b.clk.fireAt(t, ctx, epoch.Add(lease/3+lease/30)) // retried after LeaseFor/30: succeeds
	// The renewal after that is a third of the lease later, and so on.
	b.clk.fireAt(t, ctx, epoch.Add(2*lease/3+lease/30))
	b.clk.waitTimer(t, ctx, epoch.Add(lease+lease/30))
	require.Equal(t, int32(3), calls.Load())
	var units []*ledger.Unit
	require.NoError(t, b.st.Read(func(r ledger.Reader) error {
		var err error
		units, err = r.Units(id, 0)
		return err
	}))
	require.Len(t, units, 1)
	require.Equal(t, epoch.Add(2*lease/3+lease/30+lease), units[0].LeaseUntil.UTC(), "the last heartbeat renewed the lease")

	srv.unblock()
	require.NoError(t, testwait.Receive(t, ctx, errc, "Run"))
	task := succeeded(t, ctx, b.st, id)
	require.Equal(t, 1, task.Attempts)
}

// TestLeaseRunsOutWhileHeartbeatsFail: heartbeats that keep failing are
// retried with a doubling backoff bounded by half the time left, with a
// last try as the lease ends; then the attempt is cancelled and abandoned
// uncommitted, and the unit runs again under a new lease.
func TestLeaseRunsOutWhileHeartbeatsFail(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	b := setup(t)
	srv := newServer(t, 1)
	id := b.submit(t, "t", fetchTask(srv.url+"/slow"))

	var mu sync.Mutex
	var at []time.Duration
	w := b.worker("w", id, func(c *Config) {
		c.ExitWhenIdle = true
		c.heartbeat = func(ctx context.Context, l ledger.Lease, d time.Duration) (time.Time, error) {
			if l.Attempt > 1 {
				return b.st.Heartbeat(ctx, l, d)
			}
			mu.Lock()
			at = append(at, b.clk.Now().Sub(epoch))
			mu.Unlock()
			return time.Time{}, errors.New("store unreachable")
		}
	})
	errc, done := start(t, ctx, w)
	testwait.Receive(t, ctx, srv.arrived, "the attempt's request")

	s := time.Second
	want := []time.Duration{10 * s, 11 * s, 13 * s, 17 * s, 23500 * time.Millisecond,
		26750 * time.Millisecond, 28375 * time.Millisecond, 30 * s}
	for _, d := range want {
		b.clk.fireAt(t, ctx, epoch.Add(d))
	}
	testwait.Receive(t, ctx, srv.gone, "the attempt to be cancelled")
	b.clk.drive(t, ctx, done)
	require.NoError(t, <-errc)
	mu.Lock()
	require.Equal(t, want, at)
	mu.Unlock()

	succeeded(t, ctx, b.st, id)
	as := attempts(t, b.st, id, 0)
	require.Len(t, as, 1, "the attempt whose lease ran out is not committed")
	require.Equal(t, 2, as[0].Attempt)
	require.Equal(t, 1, countEvents(events(t, b.st, id), ledger.EvLeaseExpired))
}

// TestTakeoverAfterExpiry: a worker whose heartbeat hangs past the end of
// its lease loses the unit to a second worker, which runs and commits it;
// when the first worker's heartbeat returns it is told the lease is lost,
// stops renewing and cancels its attempt, whose outcome is not committed.
func TestTakeoverAfterExpiry(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	b := setup(t)
	srv := newServer(t, 1)
	id := b.submit(t, "t", fetchTask(srv.url+"/slow"))

	entered := make(chan struct{}, 1)
	unblock := make(chan struct{})
	var calls atomic.Int32
	var answer atomic.Value
	a := b.worker("a", id, func(c *Config) {
		c.heartbeat = func(ctx context.Context, l ledger.Lease, d time.Duration) (time.Time, error) {
			calls.Add(1)
			entered <- struct{}{}
			<-unblock // a store call that hangs
			until, err := b.st.Heartbeat(ctx, l, d)
			answer.Store(fmt.Sprint(err))
			return until, err
		}
	})
	aErr, aDone := start(t, ctx, a)
	testwait.Receive(t, ctx, srv.arrived, "a's request")
	b.clk.fireAt(t, ctx, epoch.Add(lease/3))
	testwait.Receive(t, ctx, entered, "a's heartbeat")
	b.clk.advanceTo(epoch.Add(lease + time.Second))

	second := b.worker("b", id, func(c *Config) { c.ExitWhenIdle = true })
	bErr, _ := start(t, ctx, second)
	require.NoError(t, testwait.Receive(t, ctx, bErr, "b's Run"))
	succeeded(t, ctx, b.st, id)

	close(unblock)
	testwait.Receive(t, ctx, srv.gone, "a's attempt to be cancelled")
	require.Contains(t, answer.Load(), ledger.ErrLeaseLost.Error())
	select {
	case err := <-aErr:
		t.Fatalf("a stopped on its own: %v", err)
	default:
	}
	_ = aDone
	require.Equal(t, int32(1), calls.Load(), "no heartbeat after the lease was lost")

	as := attempts(t, b.st, id, 0)
	require.Len(t, as, 1)
	require.Equal(t, 2, as[0].Attempt)
	require.Equal(t, second.Owner(), as[0].Owner)
	require.Equal(t, 1, countEvents(events(t, b.st, id), ledger.EvLeaseExpired))
}

// TestClaimErrorCancelsRunningAttempts: when a claim fails, Run cancels
// the attempts in flight before waiting for them, and returns the error.
func TestClaimErrorCancelsRunningAttempts(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	b := setup(t)
	srv := newServer(t, 1)
	id := b.submit(t, "t", fetchTask(srv.url+"/slow"))

	var fail atomic.Bool
	w := b.worker("w", "", func(c *Config) {
		c.Concurrency = 2
		c.PollEvery = time.Second
		c.claim = func(ctx context.Context, req ledger.ClaimRequest) (ledger.Claimed, error) {
			if fail.Load() {
				return ledger.Claimed{}, errors.New("disk on fire")
			}
			return b.st.Claim(ctx, req)
		}
	})
	errc, done := start(t, ctx, w)
	testwait.Receive(t, ctx, srv.arrived, "the attempt's request")
	fail.Store(true)
	b.clk.drive(t, ctx, done)
	err := <-errc
	require.ErrorContains(t, err, "disk on fire")
	testwait.Receive(t, ctx, srv.gone, "the attempt to be cancelled")
	task, err := b.st.Task(ctx, id)
	require.NoError(t, err)
	require.Equal(t, ledger.Running, task.Status)
}

// TestUnitsGetTheirOwnRandomBytes: every unit's plugin gets random bytes
// of its own, derived from (task, step, item, attempt), which the attempt's
// log records; the same unit and attempt get the same bytes.
func TestUnitsGetTheirOwnRandomBytes(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	b := setup(t)
	const fan = `
task "rand" {
  step "each" {
    plugin   = "unit.wasm"
    for_each = range(3)
    input    = {}
  }
}
`
	ids := []string{b.submit(t, "a", fan), b.submit(t, "b", fan)}
	errc, _ := start(t, ctx, b.worker("w", "", func(c *Config) { c.ExitWhenIdle = true; c.Concurrency = 2 }))
	require.NoError(t, testwait.Receive(t, ctx, errc, "Run"))

	seen := map[string]string{}
	for _, id := range ids {
		require.NoError(t, b.st.Read(func(r ledger.Reader) error {
			as, err := r.Attempts(id, 0)
			require.NoError(t, err)
			require.Len(t, as, 3)
			for _, a := range as {
				var out struct{ Rand string }
				require.NoError(t, json.Unmarshal(a.Output, &out))
				unit := fmt.Sprintf("%s/%d", id, a.Item)
				other, dup := seen[out.Rand]
				require.False(t, dup, "%s and %s got the same bytes", unit, other)
				seen[out.Rand] = unit

				// Replaying the unit from what its log records gives the same bytes.
				seed := guest.Seed(guest.Request{TaskID: id, Step: "each", Item: &guest.Item{Index: a.Item}, Attempt: a.Attempt})
				require.Contains(t, string(a.Log), fmt.Sprintf("random seed %x (task %s, step \"each\", item %d, attempt 1, repairs 0)", seed[:], id, a.Item))
				want := make([]byte, 16)
				_, _ = rand.NewChaCha8(seed).Read(want)
				require.Equal(t, hex.EncodeToString(want), out.Rand, unit)
			}
			return nil
		}))
	}
	require.Len(t, seen, 6)
	require.False(t, strings.Contains(fmt.Sprint(seen), "error"))
}

// TestSnapshotOfARepairedTaskCommitsNothing: two units are leased with one
// snapshot of the task (no repairs yet); one of them sends the task back
// for repair. The other, run from that stale snapshot, must not land its
// output in the new pass: its commit is refused, and the units of the new
// pass run with the repair in their request.
func TestSnapshotOfARepairedTaskCommitsNothing(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	b := setup(t)
	id := b.submit(t, "repair", `
task "repair" {
  step "each" {
    plugin   = "unit.wasm"
    for_each = range(2)
    input    = {}
  }
}
`)
	w := b.worker("w", id, func(c *Config) { c.ExitWhenIdle = true; c.Concurrency = 2 })
	c, err := b.st.Claim(ctx, ledger.ClaimRequest{Owner: w.Owner(), Max: 2, LeaseFor: lease, Task: id})
	require.NoError(t, err)
	require.Len(t, c.Leases, 2)
	stale := c.Leases[1]
	require.NotNil(t, stale.Snapshot)
	require.Zero(t, stale.Snapshot.Repairs)

	_, err = b.st.Commit(ctx, ledger.Result{Lease: c.Leases[0], Repair: &ledger.Repair{RestartFrom: 0, Max: 3, Reason: "again"}})
	require.NoError(t, err)
	next, _ := w.attempt(ctx, stale, nil)
	require.Nil(t, next)

	errc, _ := start(t, ctx, w)
	require.NoError(t, testwait.Receive(t, ctx, errc, "Run"))
	require.NoError(t, b.st.Read(func(r ledger.Reader) error {
		task, err := r.Task(id)
		require.NoError(t, err)
		require.Equal(t, ledger.Succeeded, task.Status)
		require.Equal(t, 1, task.Repairs)
		units, err := r.Units(id, 0)
		require.NoError(t, err)
		done := 0
		for _, u := range units {
			if u.State != ledger.UnitDone {
				continue
			}
			done++
			a, err := r.Attempt(id, 0, u.Item, u.Attempt)
			require.NoError(t, err)
			require.Contains(t, string(a.Log), "repairs 1)", "unit %d of pass %d", u.Item, u.Pass)
		}
		require.Equal(t, 2, done)
		return nil
	}))
}
