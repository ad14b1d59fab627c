// Package ledgertest is the store contract's conformance suite: every
// behaviour of a ledger.Store the engine relies on, written against the
// interface alone. An implementation passes it from its own tests:
//
//	func TestConformance(t *testing.T) {
//		ledgertest.Run(t, func(t *testing.T, c ledgertest.Config) ledgertest.Instance { ... })
//	}
//
// The embedded store runs it in make test (store/conformance_test.go).
package ledgertest

import (
	"context"
	"encoding/json"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lhengine/lhengine/ledger"
)

// Config is what a suite's test asks of the store it opens.
type Config struct {
	// Now is the store's clock: leases, retries and budgets read it. The
	// suite moves it by hand.
	Now func() time.Time
	// Planner plans fan-out steps; nil for tests without one.
	Planner ledger.Planner
}

// Instance is an open, empty store of the implementation under test.
type Instance struct {
	Store ledger.Store
	// Reopen closes Store and opens the same store again, as a process
	// started after a crash would (with the same Config). Nil when the
	// implementation cannot (an in-memory store); the tests of durability
	// then fail, as a store that forgets on restart is not a ledger.
	Reopen func(t *testing.T) ledger.Store
}

// Factory opens a fresh, empty store for one test and closes it when the
// test ends (t.Cleanup).
type Factory func(t *testing.T, c Config) Instance

// Run runs every conformance test against stores that open opens, each in
// a parallel subtest.
func Run(t *testing.T, open Factory) {
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.fn(t, open)
		})
	}
}

type test struct {
	name string
	fn   func(t *testing.T, open Factory)
}

// tests is the suite, in the order of the contract: work, controls,
// capabilities, models, notifications, retention.
var tests []test

func register(name string, fn func(t *testing.T, open Factory)) bool {
	tests = append(tests, test{name, fn})
	return true
}

// clock is a clock that moves only when told.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// bench is one test's store and clock.
type bench struct {
	t     *testing.T
	s     ledger.Store
	in    Instance
	clock *clock
	ctx   context.Context
}

func newBench(t *testing.T, open Factory, plan ledger.Planner) *bench {
	t.Helper()
	c := &clock{now: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	in := open(t, Config{Now: c.Now, Planner: plan})
	if in.Store == nil {
		t.Fatal("the factory opened no store")
	}
	return &bench{t: t, s: in.Store, in: in, clock: c, ctx: t.Context()}
}

func steps(names ...string) []ledger.StepState {
	out := make([]ledger.StepState, len(names))
	for i, n := range names {
		out[i] = ledger.StepState{Name: n}
	}
	return out
}

func (b *bench) submit(st []ledger.StepState) *ledger.Task {
	b.t.Helper()
	task, created, err := b.s.Submit(b.ctx, ledger.NewTask{Name: "t", Steps: st})
	require.NoError(b.t, err)
	if !created {
		b.t.Fatal("Submit without an idempotency key did not create a task")
	}
	return task
}

func (b *bench) claim(owner string, max int) ledger.Claimed {
	b.t.Helper()
	c, err := b.s.Claim(b.ctx, ledger.ClaimRequest{Owner: b.s.Owner(owner), Max: max, LeaseFor: 30 * time.Second})
	require.NoError(b.t, err)
	return c
}

func (b *bench) claim1(owner string) ledger.Lease {
	b.t.Helper()
	c := b.claim(owner, 1)
	if len(c.Leases) != 1 {
		b.t.Fatalf("Claim(Max 1) gave %d leases, want 1", len(c.Leases))
	}
	return c.Leases[0]
}

func (b *bench) done(l ledger.Lease, out string) *ledger.Task {
	b.t.Helper()
	task, err := b.s.Commit(b.ctx, ledger.Result{Lease: l, Output: json.RawMessage(out)})
	require.NoError(b.t, err)
	return task
}

func (b *bench) task(id string) *ledger.Task {
	b.t.Helper()
	task, err := b.s.Task(b.ctx, id)
	require.NoError(b.t, err)
	return task
}

func (b *bench) read(fn func(r ledger.Reader) error) {
	b.t.Helper()
	require.NoError(b.t, b.s.Read(fn))
}

func (b *bench) events(id string) []ledger.EventType {
	b.t.Helper()
	var types []ledger.EventType
	b.read(func(r ledger.Reader) error {
		evs, err := r.Events(id, 0, 0)
		for i, e := range evs {
			if e.Seq != uint64(i) {
				b.t.Errorf("event %d has seq %d: a task's events are numbered from 0 without gaps", i, e.Seq)
			}
			types = append(types, e.Type)
		}
		return err
	})
	return types
}

// planN plans n items for every fan-out step, keyed item-0... with the same
// string as value.
func planN(n int) ledger.Planner {
	return func(context.Context, ledger.Reader, *ledger.Task, int) ([]ledger.Item, error) {
		items := make([]ledger.Item, n)
		for i := range items {
			k, _ := json.Marshal(i)
			v, _ := json.Marshal("item-" + strconv.Itoa(i))
			items[i] = ledger.Item{Key: k, Value: v}
		}
		return items, nil
	}
}
