package guest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lhengine/lhengine/fault"
	"github.com/lhengine/lhengine/internal/testwasm"
)

// statelessPlugin loads testdata/guests/go/stateless into a Runtime of its
// own, so that the idle pool and the count of instances started are the
// test's.
func statelessPlugin(t *testing.T, cfg Config) (*Runtime, *Plugin) {
	t.Helper()
	cfg.CacheDir = sharedCacheDir(t)
	r := ownRuntime(t, cfg)
	return r, loadAs(t, r, "conformance", testwasm.GoGuest(t, "stateless"))
}

// statelessReq is a request of the stateless guest; item < 0 is none.
func statelessReq(task string, item, attempt int, mode string) Request {
	req := Request{TaskID: task, TaskName: "n", Step: "s", Attempt: attempt, Input: json.RawMessage(`{"mode":"` + mode + `"}`)}
	if item >= 0 {
		req.Item = &Item{Index: item, Key: json.RawMessage(fmt.Sprint(item)), Value: json.RawMessage(`{"v":1}`)}
	}
	return req
}

const fresh = `{"count":1,"seen":[],"cached":0}`

// TestStatelessNoStateLeaks: the guest's global counter, slice, map and a
// goroutine it leaves behind never reach the next attempt, in the same
// task (one instance serves them all, put back to its image each time) or
// in another (which never gets that instance).
func TestStatelessNoStateLeaks(t *testing.T) {
	t.Parallel()
	r, p := statelessPlugin(t, Config{})
	require.True(t, p.reuse, "a Go plugin using sdk.Stateless is reusable")
	ctx := context.Background()
	run := func(req Request) string {
		t.Helper()
		res, err := p.Run(ctx, req, Limits{Timeout: time.Minute}, nil)
		require.NoError(t, err)
		return string(res.Output)
	}
	for i := range 10 {
		require.JSONEq(t, fresh, run(statelessReq("task-a", i, 1, "count")), "item %d", i)
		require.JSONEq(t, `"forked"`, run(statelessReq("task-a", i, 2, "fork")))
	}
	require.EqualValues(t, 1, r.starts.Load(), "one instance served the task")
	require.Equal(t, 1, r.pool.idleCount())
	if runtime.GOOS == "linux" {
		r.pool.mu.Lock()
		frozen := r.pool.idle[0].img.frozen
		r.pool.mu.Unlock()
		require.True(t, frozen, "on Linux the image is the memory frozen in place, not a copy")
	}

	require.JSONEq(t, fresh, run(statelessReq("task-b", 0, 1, "count")))
	require.EqualValues(t, 2, r.starts.Load(), "another task never gets task-a's instance")
	require.JSONEq(t, fresh, run(statelessReq("task-a", 0, 3, "count")))
	require.EqualValues(t, 2, r.starts.Load())
	require.Equal(t, 2, r.pool.idleCount())
}

// TestStatelessConcurrent: attempts of one task at once each get an
// instance of their own, never one that another attempt is using.
func TestStatelessConcurrent(t *testing.T) {
	t.Parallel()
	r, p := statelessPlugin(t, Config{})
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 8 {
				res, err := p.Run(context.Background(), statelessReq("t", g*100+i, 1, "count"), Limits{}, nil)
				if err != nil {
					errs <- err
					return
				}
				if string(res.Output) != `{"cached":0,"count":1,"seen":[]}` {
					errs <- fmt.Errorf("output %s", res.Output)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	require.LessOrEqual(t, r.starts.Load(), int64(4), "at most one instance per concurrent attempt")
}

// outcomeOf is an attempt as a test compares it: kind and message of its
// fault, output, log, host calls.
func outcomeOf(res *Result, err error) string {
	o := map[string]any{"log": string(res.Log), "calls": res.HostCalls}
	if err != nil {
		var se *fault.StepError
		if errors.As(err, &se) {
			o["kind"], o["message"] = se.Kind, se.Message
		} else {
			o["error"] = err.Error()
		}
	} else {
		o["output"], o["repair"], o["reason"] = string(res.Output), res.NeedsRepair, res.RepairReason
	}
	b, _ := json.Marshal(o)
	return string(b)
}

// TestStatelessMatchesFresh: every attempt gives what it gives in a fresh
// instance, whatever ran in its instance before: output, log, host calls
// and fault, including what the attempt reads of its clocks and random
// stream (the "env" mode).
func TestStatelessMatchesFresh(t *testing.T) {
	t.Parallel()
	r, reused := statelessPlugin(t, Config{})
	_, freshP := statelessPlugin(t, Config{NoInstanceReuse: true})
	type call struct {
		req Request
		lim Limits
	}
	var calls []call
	for i, mode := range []string{"env", "echo", "log", "count", "error", "repair", "env", "exit3", "env", "grow", "env", "dance"} {
		req := statelessReq("t1", i%3-1, 1+i%2, mode)
		if i%4 == 3 {
			req.Repair = &Repair{Count: 2, Reason: "again"}
		}
		calls = append(calls, call{req, Limits{}})
	}
	calls = append(calls,
		call{statelessReq("t2", 5, 1, "env"), Limits{}},
		call{statelessReq("t1", 7, 1, "log"), Limits{MaxHostCalls: 1}},
		// Start-up itself runs out of memory: the attempt that started
		// the instance fails as a fresh one would.
		call{statelessReq("t3", 0, 1, "env"), Limits{MemoryBytes: 3 << 20}},
		// Enough for the plugin, not for the heap room the SDK leaves
		// itself before the image: the attempt runs fresh.
		call{statelessReq("t4", 0, 1, "env"), Limits{MemoryBytes: 6 << 20}},
	)
	ctx := context.Background()
	want := make([]string, len(calls))
	for i, c := range calls {
		res, err := freshP.Run(ctx, c.req, c.lim, &testHost{})
		want[i] = outcomeOf(res, err)
	}
	// Twice over, in both orders: what ran before changes nothing.
	for _, order := range [][]int{ascending(len(calls)), descending(len(calls))} {
		for _, i := range order {
			c := calls[i]
			res, err := reused.Run(ctx, c.req, c.lim, &testHost{})
			require.Equal(t, want[i], outcomeOf(res, err), "call %d: %s", i, c.req.Input)
		}
	}
	require.Less(t, r.starts.Load(), int64(2*len(calls)), "instances were reused")
	_, failed := r.failedStarts.Load(startKey{reused.SHA256, 6 << 20})
	require.True(t, failed, "start-ups under 6 MiB are not tried again")
}

func ascending(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}

func descending(n int) []int {
	out := ascending(n)
	for i, j := 0, n-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return out
}

// TestStatelessFaultDiscardsInstance: an attempt that faults, or that
// ends in any way but a success within its budgets and its instance's
// memory image, closes its instance; the next attempt starts a new one.
// Every budget of the attempt applies to it in a reused instance.
func TestStatelessFaultDiscardsInstance(t *testing.T) {
	t.Parallel()
	cases := []struct {
		mode string
		lim  Limits
		host *testHost
		kind fault.Kind // "" for success
	}{
		{mode: "exit3", kind: fault.PluginError},
		{mode: "error", kind: fault.PluginError},
		{mode: "spin", lim: Limits{Timeout: 300 * time.Millisecond}, kind: fault.Timeout},
		{mode: "hog", lim: Limits{MemoryBytes: 16 << 20}, kind: fault.Memory},
		{mode: "flood", lim: Limits{MaxStdout: 1 << 10}, kind: fault.OutputTooLarge},
		{mode: "log", host: &testHost{leaseErr: errors.New("taken over")}, kind: fault.Internal},
		{mode: "log", lim: Limits{MaxHostCalls: 1}},        // the heartbeat is refused: over budget
		{mode: "grow", lim: Limits{MemoryBytes: 64 << 20}}, // succeeds, but its memory grew
	}
	for _, tc := range cases {
		t.Run(fmt.Sprintf("%s %+v", tc.mode, tc.lim), func(t *testing.T) {
			t.Parallel()
			r, p := statelessPlugin(t, Config{})
			ctx := context.Background()
			// The attempts around share the instance's key (the memory
			// limit), not the faulting one's other limits.
			around := Limits{MemoryBytes: tc.lim.MemoryBytes}
			warm, err := p.Run(ctx, statelessReq("t", 0, 1, "count"), around, nil)
			require.NoError(t, err)
			require.JSONEq(t, fresh, string(warm.Output))
			require.Equal(t, 1, r.pool.idleCount())

			host := tc.host
			if host == nil {
				host = &testHost{}
			}
			_, err = p.Run(ctx, statelessReq("t", 1, 1, tc.mode), tc.lim, host)
			if tc.kind == "" {
				require.NoError(t, err)
			} else {
				requireKind(t, err, tc.kind)
			}
			require.Equal(t, 0, r.pool.idleCount(), "the instance is closed")

			res, err := p.Run(ctx, statelessReq("t", 2, 1, "count"), around, nil)
			require.NoError(t, err)
			require.JSONEq(t, fresh, string(res.Output))
			require.EqualValues(t, 2, r.starts.Load(), "a new instance served the next attempt")
		})
	}
}

// TestStatelessMounts: attempts with the same mounts share an instance;
// what an attempt opens is closed when it ends, and an attempt that closes
// one of the instance's own descriptors closes the instance.
func TestStatelessMounts(t *testing.T) {
	t.Parallel()
	r, p := statelessPlugin(t, Config{})
	dir := t.TempDir()
	lim := Limits{Mounts: []Mount{{HostDir: dir, GuestDir: "/work"}}}
	ctx := context.Background()
	for i := range 3 {
		res, err := p.Run(ctx, statelessReq("t", i, 1, "count"), lim, nil)
		require.NoError(t, err)
		require.JSONEq(t, fresh, string(res.Output))
		req := statelessReq("t", i, 1, "file")
		req.Input = json.RawMessage(fmt.Sprintf(`{"mode":"file","name":"f%d"}`, i))
		res, err = p.Run(ctx, req, lim, nil)
		require.NoError(t, err)
		require.Equal(t, "4", string(res.Output), "descriptor 4, after stdio and the mount: the last attempt's was closed")
		require.FileExists(t, filepath.Join(dir, fmt.Sprintf("f%d", i)))
	}
	require.EqualValues(t, 1, r.starts.Load())

	// Other mounts, another instance.
	other := Limits{Mounts: []Mount{{HostDir: dir, GuestDir: "/work", ReadOnly: true}}}
	res, err := p.Run(ctx, statelessReq("t", 0, 1, "count"), other, nil)
	require.NoError(t, err)
	require.JSONEq(t, fresh, string(res.Output))
	require.EqualValues(t, 2, r.starts.Load())

	// Closing stderr spoils the instance for later attempts.
	_, err = p.Run(ctx, statelessReq("t", 0, 1, "close2"), lim, nil)
	require.NoError(t, err)
	require.Equal(t, 1, r.pool.idleCount(), "only the read-only one is left")
	res, err = p.Run(ctx, statelessReq("t", 0, 1, "count"), lim, nil)
	require.NoError(t, err)
	require.JSONEq(t, fresh, string(res.Output))
	require.EqualValues(t, 3, r.starts.Load())
}

// TestServeNextOutsideGo: a stateless module the Go toolchain did not
// build is run fresh for every attempt; serve_next returns 0 once and ends
// the instance, with exit status 0, the second time.
func TestServeNextOutsideGo(t *testing.T) {
	t.Parallel()
	wasm, err := os.ReadFile(testwasm.BuildWat(t, "servenext", `(module
  (import "lhengine_v1" "serve_next" (func $next (result i32)))
  (import "wasi_snapshot_preview1" "fd_write" (func $write (param i32 i32 i32 i32) (result i32)))
  (memory (export "memory") 1)
  (data (i32.const 16) "{\"output\":7}")
  (func (export "_start")
    (if (call $next) (then unreachable))
    (i32.store (i32.const 0) (i32.const 16))
    (i32.store (i32.const 4) (i32.const 12))
    (drop (call $write (i32.const 1) (i32.const 0) (i32.const 1) (i32.const 8)))
    (drop (call $next))
    unreachable))`))
	require.NoError(t, err)
	r := ownRuntime(t, Config{})
	p, err := r.LoadBytes(context.Background(), "servenext", wasm)
	require.NoError(t, err)
	require.False(t, p.reuse)
	for range 2 {
		res, err := p.Run(context.Background(), Request{TaskID: "t", Step: "s", Attempt: 1}, Limits{}, nil)
		require.NoError(t, err)
		require.Equal(t, "7", string(res.Output))
	}
	require.EqualValues(t, 0, r.starts.Load())
}

// TestExportGlobals: the rewrite adds one export per global and keeps the
// module valid; immutable globals are not rewritten.
func TestExportGlobals(t *testing.T) {
	t.Parallel()
	wasm, err := os.ReadFile(testwasm.BuildWat(t, "globals", `(module
  (global (mut i32) (i32.const 7)) (global (mut i64) (i64.const -1))
  (func (export "_start")))`))
	require.NoError(t, err)
	out, n, err := exportGlobals(wasm)
	require.NoError(t, err)
	require.Equal(t, 2, n)
	ctx := context.Background()
	r := ownRuntime(t, Config{})
	mod, err := r.rt.InstantiateWithConfig(ctx, out, moduleConfig("g").WithStartFunctions())
	require.NoError(t, err)
	require.EqualValues(t, 7, mod.ExportedGlobal(globalExportPrefix+"0").Get())
	require.EqualValues(t, ^uint64(0), mod.ExportedGlobal(globalExportPrefix+"1").Get())

	immutable, err := os.ReadFile(testwasm.BuildWat(t, "immutable", `(module (global i32 (i32.const 7)) (func (export "_start")))`))
	require.NoError(t, err)
	_, _, err = exportGlobals(immutable)
	require.Error(t, err)
}

// manualClock is a poolClock that moves only when the test says; due
// functions run in the test's goroutine.
type manualClock struct {
	mu  sync.Mutex
	now time.Time
	fns []*manualFn
}

type manualFn struct {
	at      time.Time
	f       func()
	stopped bool
}

func (c *manualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *manualClock) AfterFunc(d time.Duration, f func()) func() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	fn := &manualFn{at: c.now.Add(d), f: f}
	c.fns = append(c.fns, fn)
	return func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		was := !fn.stopped
		fn.stopped = true
		return was
	}
}

// advance moves the clock by d and runs the functions then due.
func (c *manualClock) advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	var due []*manualFn
	kept := c.fns[:0]
	for _, fn := range c.fns {
		switch {
		case fn.stopped:
		case !fn.at.After(c.now):
			fn.stopped = true
			due = append(due, fn)
		default:
			kept = append(kept, fn)
		}
	}
	c.fns = kept
	c.mu.Unlock()
	for _, fn := range due {
		fn.f()
	}
}

// TestIdleInstancesAreReleased: a task's idle instances are closed when
// the runtime is told the task runs no more, and every idle instance is
// closed once idle for poolIdleLimit even if the pool is never used
// again; each instance's goroutine ends.
func TestIdleInstancesAreReleased(t *testing.T) {
	t.Parallel()
	r, p := statelessPlugin(t, Config{})
	clk := &manualClock{now: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)}
	r.pool.clock = clk
	ctx := context.Background()
	for _, task := range []string{"task-a", "task-b", "task-c"} {
		_, err := p.Run(ctx, statelessReq(task, 0, 1, "count"), Limits{Timeout: time.Minute}, nil)
		require.NoError(t, err)
	}
	r.pool.mu.Lock()
	idle := append([]*instance(nil), r.pool.idle...)
	r.pool.mu.Unlock()
	require.Len(t, idle, 3)

	require.Equal(t, 1, r.ReleaseTask("task-b"))
	require.Equal(t, 0, r.ReleaseTask("task-b"), "nothing more of it")
	require.Equal(t, 2, r.pool.idleCount())
	<-idle[1].ended

	clk.advance(poolIdleLimit - time.Millisecond)
	require.Equal(t, 2, r.pool.idleCount(), "not idle for long enough yet")
	clk.advance(time.Millisecond)
	require.Equal(t, 0, r.pool.idleCount(), "closed by the timer, the pool untouched")
	<-idle[0].ended
	<-idle[2].ended

	// The timer is armed again by the next instance put back.
	_, err := p.Run(ctx, statelessReq("task-a", 1, 1, "count"), Limits{Timeout: time.Minute}, nil)
	require.NoError(t, err)
	require.Equal(t, 1, r.pool.idleCount())
	clk.advance(poolIdleLimit)
	require.Equal(t, 0, r.pool.idleCount())
}
