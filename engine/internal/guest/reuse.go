package guest

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/experimental"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"
	"github.com/tetratelabs/wazero/sys"

	"github.com/lhengine/lhengine/engine/internal/guest/linmem"
	"github.com/lhengine/lhengine/fault"
)

// Instance reuse for stateless plugins (specs/abi.md, "Stateless plugins";
// specs/RATIONALE.md says why it is sound).
//
// A Go plugin spends most of an attempt starting the Go runtime. A plugin
// that declares itself stateless, by importing lhengine_v1.serve_next (the
// Go SDK does when the plugin passes sdk.Stateless() to sdk.Run), keeps its
// instance between attempts instead:
//
//   - it starts once and calls serve_next, which returns 1: no request yet,
//     get ready. It fills its caches and calls serve_next again. The host
//     then takes the instance's image: its linear memory (frozen in place
//     where the platform allows, linmem.Cap.Freeze: the memory becomes a
//     copy-on-write mapping of a file holding the image; else copied) and
//     mutable globals, the readings of its clocks and the random bytes it
//     drew, and what it wrote or logged while starting;
//   - every attempt, the first included, starts from that image: the host
//     puts the image back into memory (the pages the last attempt wrote,
//     or the whole copy) and globals, restarts the clocks and
//     the attempt's random stream where start-up left them, and puts the
//     attempt's request on stdin; stdout, stderr and the host functions are
//     the attempt's own. serve_next returns 0; the plugin answers on stdout
//     and calls serve_next again, which ends the attempt and parks the
//     instance, idle, until the next one;
//   - an instance serves only attempts of the task that started it (its
//     start-up draws from a stream seeded by that task), and only attempts
//     with the same plugin name, memory limit and mounts. What an attempt
//     opens is closed when it ends (descriptors live in the host, outside
//     the image);
//   - it goes back to the idle pool only after an attempt that succeeded
//     within every budget, without a refused memory growth or host call,
//     and without growing its memory (a Wasm memory cannot shrink back to
//     the image). Anything else, a trap, an exit, a timeout, a lost lease,
//     an output past its limit, closes it.
//
// Memory and globals are a Go wasip1 instance's whole state at a host call:
// the Go compiler keeps nothing in Wasm locals across a call (any call may
// unwind the Wasm stack for a goroutine switch), and never changes tables
// or data segments. Only modules the Go toolchain built are reused; other
// stateless modules run in a fresh instance per attempt, where serve_next
// returns 0 once and ends the instance the second time.

// serveNextName is the host function a stateless plugin serves through.
const serveNextName = "serve_next"

// Bounds of the idle pool of a Runtime.
const (
	poolMaxIdle   = 16               // idle instances kept; the oldest are closed past it
	poolIdleLimit = 30 * time.Second // idle instances are closed once idle this long
)

// globalExportPrefix names the exports Load adds for a reusable module's
// mutable globals, so that the image can read and restore them.
const globalExportPrefix = "lhengine.global."

var errInstanceClosed = errors.New("stateless instance closed")

// hostServeNext is serve_next() -> i32.
func hostServeNext(ctx context.Context, mod api.Module, stack []uint64) {
	switch v := ctx.Value(attemptKey{}).(type) {
	case *instance:
		if !v.greeted {
			// Start-up is done: the plugin may get ready before the
			// image. Its clocks stand still meanwhile, and what it draws
			// from the random source is not skipped in the attempts'
			// streams, so that a request sees both where a fresh
			// instance's start-up leaves them.
			v.greeted = true
			v.clock.frozen = true
			v.randAtGreeting = v.rand.n
			stack[0] = 1
			return
		}
		v.serveNext(ctx, mod)
		stack[0] = api.EncodeI32(StatusOK)
	case *attempt:
		// A fresh instance serves its one attempt, whose request is on
		// stdin; the next call ends the instance as proc_exit(0) would.
		v.serveCalls++
		if v.serveCalls == 1 {
			stack[0] = api.EncodeI32(StatusOK)
			return
		}
		_ = mod.CloseWithExitCode(ctx, 0)
		panic(sys.NewExitError(0))
	default:
		stack[0] = api.EncodeI32(StatusBudget) // not reached through Run
	}
}

// poolKey says which attempts an idle instance may serve.
type poolKey struct {
	sha, name, task string
	memLimit        uint64
	mounts          string // mountsKey
}

// instance is a live instance of a stateless plugin. Its goroutine runs the
// module (_start) and, parked in serve_next, hands attempts over with Run.
type instance struct {
	key   poolKey
	stop  context.CancelCauseFunc // closes the instance
	mem   *linmem.Cap
	nglob int

	// Descriptors (instanceWASI): those below reserved are stdin,
	// stdout, stderr and the mounts; opened are those the current
	// attempt opened; tainted says the instance must not be reused.
	reserved int32
	opened   map[int32]bool
	tainted  bool

	// What the guest's WASI and host functions see; set by the instance's
	// goroutine only (switchTo), before start and while the guest is
	// parked in serve_next.
	cur   *attempt
	stdin bytes.Reader
	out   switchWriter
	errw  switchWriter
	rand  switchRand
	clock guestClock

	greeted        bool   // serve_next has returned 1
	randAtGreeting int64  // random bytes drawn by then
	img            *image // set at the second serve_next
	globals        []api.MutableGlobal

	next     chan *attempt // Run -> instance: the next attempt
	finished chan struct{} // instance -> Run: the attempt called serve_next
	ended    chan error    // instance -> Run: the module returned (once)

	idleSince time.Time
}

// image is an instance as its start-up left it.
type image struct {
	// The memory: frozen in place (linmem.Cap.Freeze), or a copy in mem;
	// size bytes either way. Neither: no image, the instance serves one
	// attempt.
	frozen     bool
	mem        []byte
	size       uint64
	globals    []uint64
	wall, mono int64 // clock readings made
	randRead   int64 // random bytes drawn
	stdout     []byte
	log        []byte
	calls      int
}

// switchWriter is a stdout or stderr whose destination changes per attempt.
type switchWriter struct{ w io.Writer }

func (s *switchWriter) Write(p []byte) (int, error) { return s.w.Write(p) }

// switchRand is random_get's source, the current attempt's stream; n counts
// the bytes drawn.
type switchRand struct {
	r io.Reader
	n int64
}

func (s *switchRand) Read(p []byte) (int, error) {
	n, err := s.r.Read(p)
	s.n += int64(n)
	return n, err
}

// guestClock is the WASI clocks of an attempt (specs/abi.md, "The guest
// clock"), with a state that can be put back: the realtime clock reads base
// (the attempt's recorded time, in Unix nanoseconds) and the monotonic
// clock 0 the first time, each reading 1 ms more than the one before. A
// base of 0 reads 2022-01-01T00:00:00Z, as wazero's default fake clocks do.
type guestClock struct {
	base       int64
	wall, mono int64
	frozen     bool // readings do not advance the clocks
}

const fakeEpochNanos = 1640995200000 * int64(time.Millisecond)

// wallBase is the base of the wall clock of an attempt claimed at now.
func wallBase(now time.Time) int64 {
	if now.IsZero() {
		return 0
	}
	return now.UnixNano()
}

func (c *guestClock) walltime() (int64, int32) {
	base := c.base
	if base == 0 {
		base = fakeEpochNanos
	}
	t := base + c.wall*int64(time.Millisecond)
	if !c.frozen {
		c.wall++
	}
	return t / 1e9, int32(t % 1e9)
}

func (c *guestClock) nanotime() int64 {
	t := c.mono * int64(time.Millisecond)
	if !c.frozen {
		c.mono++
	}
	return t
}

// imageSeed is the seed of the random stream a reused instance starts up
// with: Seed of attempt 0 (which no real attempt has) of the task, with no
// step and no item.
func imageSeed(task string) [32]byte { return Seed(Request{TaskID: task}) }

// startupHost serves the host calls a stateless plugin makes while it
// starts: it logs into the image and has no capabilities.
type startupHost struct{ nopHost }

var errStartup = &HostError{Status: StatusUnavailable, Message: "not available while a stateless plugin starts: call serve_next first"}

func (startupHost) Call(context.Context, string, []byte) ([]byte, error) { return nil, errStartup }
func (startupHost) PutArtifact(context.Context, []byte, []byte) ([]byte, error) {
	return nil, errStartup
}
func (startupHost) ReadArtifact(context.Context, string, int64, []byte) (int, error) {
	return 0, errStartup
}

// serveNext runs on the instance's goroutine, inside serve_next: once the
// plugin is ready it takes the image, later it reports the attempt done; then it waits
// for the next attempt and starts it from the image. It does not return
// when the instance is closed meanwhile.
func (in *instance) serveNext(ctx context.Context, mod api.Module) {
	if in.img == nil {
		in.takeImage(mod)
		if len(in.opened) > 0 {
			in.tainted = true // start-up left files open: the image needs them
		}
	} else {
		in.closeOpened(ctx, mod)
		in.finished <- struct{}{}
	}
	var att *attempt
	select {
	case att = <-in.next:
	case <-ctx.Done():
		panic(sys.NewExitError(sys.ExitCodeContextCanceled))
	}
	if in.cur.served && in.img.hasMemory() {
		in.restore(mod)
	}
	in.switchTo(att)
}

// takeImage copies what the guest's start-up left. A module whose globals
// cannot be read (which Load rules out) gets no memory image: its instance
// serves one attempt and is closed.
func (in *instance) takeImage(mod api.Module) {
	img := &image{
		wall: in.clock.wall, mono: in.clock.mono, randRead: in.randAtGreeting,
		stdout: bytes.Clone(in.cur.stdout.buf.Bytes()),
		log:    in.cur.log.Bytes(),
		calls:  in.cur.calls,
	}
	in.img = img
	for i := range in.nglob {
		g, ok := mod.ExportedGlobal(globalExportPrefix + strconv.Itoa(i)).(api.MutableGlobal)
		if !ok {
			in.globals = nil
			return
		}
		in.globals = append(in.globals, g)
		img.globals = append(img.globals, g.Get())
	}
	img.size = uint64(mod.Memory().Size())
	if in.mem.Freeze() {
		img.frozen = true
	} else if b, ok := mod.Memory().Read(0, mod.Memory().Size()); ok {
		img.mem = bytes.Clone(b)
	}
}

// hasMemory says whether the image holds the memory.
func (img *image) hasMemory() bool { return img.frozen || img.mem != nil }

// restore puts the image back into memory and globals. Run only hands an
// instance whose memory has not grown. A frozen memory gets the image back
// in the pages the attempt wrote; a copy is written back whole (comparing first to skip what an attempt did not write measured
// no faster, the copy being bound by memory bandwidth either way). A
// frozen memory that cannot be put back closes the instance.
func (in *instance) restore(mod api.Module) {
	if in.img.frozen {
		if !in.mem.Thaw() {
			panic(sys.NewExitError(sys.ExitCodeContextCanceled))
		}
	} else {
		mod.Memory().Write(0, in.img.mem)
	}
	for i, g := range in.globals {
		g.Set(in.img.globals[i])
	}
}

// switchTo makes att the attempt the guest serves: its request on stdin,
// its stdout and log, its random stream and host, the clocks as start-up
// left them.
func (in *instance) switchTo(att *attempt) {
	img := in.img
	att.served = true
	in.cur = att
	in.stdin.Reset(att.env)
	in.out.w = att.stdout
	in.errw.w = att.log
	in.rand = switchRand{r: &att.rand, n: img.randRead}
	in.clock = guestClock{base: att.wallBase, wall: img.wall, mono: img.mono}
	skipRand(&att.rand, img.randRead)
	att.calls = img.calls
	if len(img.log) > 0 {
		att.log.Write(img.log)
	}
	if len(img.stdout) > 0 {
		att.stdout.Write(img.stdout)
	}
	in.mem.BeginAttempt()
}

// skipRand draws n bytes from r: the bytes a fresh instance's start-up
// would have taken from the attempt's stream.
func skipRand(r *fakeRand, n int64) {
	var buf [256]byte
	for n > 0 {
		k := min(n, int64(len(buf)))
		r.Read(buf[:k])
		n -= k
	}
}

// reusable reports whether this attempt may run in a reused instance.
func (p *Plugin) reusable(lim Limits) bool {
	if !p.reuse || p.r.noReuse {
		return false
	}
	_, failed := p.r.failedStarts.Load(startKey{p.SHA256, lim.MemoryBytes})
	return !failed
}

// startKey identifies the start-ups that failed: a plugin whose start-up
// as a reused instance (its warm-up included) fails under a memory limit
// runs fresh under that limit from then on.
type startKey struct {
	sha      string
	memLimit uint64
}

// runReused is Run for a stateless plugin, in an idle instance of the task
// or in a new one.
func (p *Plugin) runReused(ctx context.Context, req Request, env []byte, lim Limits, host Host) (*Result, error) {
	res := &Result{}
	runCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	if lim.Timeout > 0 {
		var stop context.CancelFunc
		runCtx, stop = context.WithTimeoutCause(runCtx, lim.Timeout, errStepTimeout)
		defer stop()
	}
	att := &attempt{host: host, log: newLogBuffer(lim.MaxStderr), maxCalls: lim.MaxHostCalls, cancel: cancel,
		rand: fakeRand{seed: Seed(req)}, ctx: runCtx, env: env, wallBase: wallBase(req.Now)}
	att.stdout = &stdoutBuffer{max: lim.MaxStdout, overflow: func() { cancel(errOutputTooLarge) }}

	key := poolKey{sha: p.SHA256, name: p.Name, task: req.TaskID, memLimit: lim.MemoryBytes, mounts: mountsKey(lim.Mounts)}
	start := time.Now()
	in := p.r.pool.take(key)
	if in == nil {
		// A refused write is the attempt's the instance serves then.
		var started atomic.Pointer[instance]
		fsCfg, err := mountConfig(lim.Mounts, func(err error) {
			if in := started.Load(); in != nil {
				in.cur.refusedWrite(err)
			}
		})
		if err != nil {
			return res, fault.Wrap(fault.Input, err, "plugin "+p.Name+": "+err.Error())
		}
		in = p.startInstance(key, lim, fsCfg, cancel)
		started.Store(in)
	}
	// The attempt's end (timeout, cancellation, lost lease, too much
	// output) closes the instance, which stops the guest.
	watching := context.AfterFunc(runCtx, func() { in.stop(context.Cause(runCtx)) })

	var err error
	done := false
	select {
	case in.next <- att:
		select {
		case <-in.finished:
			done = true
		case err = <-in.ended:
		}
	case err = <-in.ended: // it failed to start
	}
	if !done {
		select {
		case <-in.finished: // it answered, then was stopped
			done, err = true, nil
		default:
		}
	}
	res.Duration = time.Since(start)
	keep := watching() && done

	cur := att
	if !att.served {
		// The instance failed to start, before it was given the
		// request. A fresh instance gives the attempt's own outcome,
		// unless the attempt itself is over (timeout, cancellation,
		// output past its limit): a reused instance gets ready with more
		// memory than a fresh one needs (the Go SDK leaves itself heap
		// room), so a start-up may fail where the plugin does not.
		if runCtx.Err() == nil {
			p.r.failedStarts.Store(startKey{p.SHA256, lim.MemoryBytes}, true)
			return p.runFresh(ctx, req, env, lim, host)
		}
		cur = in.cur // its output is the attempt's
	}
	res.Log = cur.log.Bytes()
	res.HostCalls = cur.calls
	res.MemoryBytes = in.mem.Peak()
	cerr := p.classify(ctx, runCtx, err, lim, cur, in.mem, cur.stdout, res)

	keep = keep && cerr == nil && in.img != nil && in.img.hasMemory() &&
		!in.mem.Hit() && !att.overBudget && !in.tainted && in.mem.Size() == in.img.size
	if keep {
		p.r.pool.put(in)
	} else if done {
		in.stop(errInstanceClosed)
	}
	if cerr != nil {
		return res, cerr
	}
	return res, nil
}

// startInstance starts a new instance of p for key; its start-up belongs
// to the attempt whose cancel is given (its output past the limit stops
// that attempt).
func (p *Plugin) startInstance(key poolKey, lim Limits, fsCfg wazero.FSConfig, cancel context.CancelCauseFunc) *instance {
	p.r.starts.Add(1)
	in := &instance{
		key:      key,
		mem:      linmem.New(lim.MemoryBytes),
		nglob:    p.nglob,
		reserved: 3 + int32(len(lim.Mounts)),
		opened:   map[int32]bool{},
		next:     make(chan *attempt),
		finished: make(chan struct{}, 1),
		ended:    make(chan error, 1),
	}
	startup := &attempt{host: startupHost{}, log: newLogBuffer(lim.MaxStderr), rand: fakeRand{seed: imageSeed(key.task)}}
	startup.stdout = &stdoutBuffer{max: lim.MaxStdout, overflow: func() { cancel(errOutputTooLarge) }}
	in.cur = startup
	in.out.w = startup.stdout
	in.errw.w = startup.log
	in.rand.r = &startup.rand

	instCtx, stop := context.WithCancelCause(context.Background())
	in.stop = stop
	instCtx = experimental.WithMemoryAllocator(instCtx, in.mem)
	instCtx = context.WithValue(instCtx, attemptKey{}, in)
	cfg := p.cfg.
		WithStdin(&in.stdin).
		WithStdout(&in.out).
		WithStderr(&in.errw).
		WithRandSource(&in.rand).
		WithWalltime(in.clock.walltime, sys.ClockResolution(time.Microsecond)).
		WithNanotime(in.clock.nanotime, sys.ClockResolution(1))
	if fsCfg != nil {
		cfg = cfg.WithFSConfig(fsCfg)
	}
	go func() {
		mod, err := p.r.rt.InstantiateModule(instCtx, p.compiled, cfg)
		if mod != nil {
			mod.Close(context.Background())
		}
		// Nothing runs on the memory any more.
		in.mem.Done()
		stop(errInstanceClosed)
		in.ended <- err
	}()
	return in
}

// instancePool keeps the idle instances of a Runtime. It is safe for
// concurrent use. An instance is closed once it has been idle for
// poolIdleLimit, by a timer the pool keeps armed while it holds any, or
// when the runtime is told that its task runs no more (dropTask).
type instancePool struct {
	mu     sync.Mutex
	closed bool
	idle   []*instance // oldest first
	clock  poolClock   // nil: the wall clock
	timer  func() bool // stops the expiry timer; nil when none is armed
}

// poolClock is the idle pool's time; tests move it by hand.
type poolClock interface {
	Now() time.Time
	// AfterFunc calls f in its own goroutine d from now, unless the
	// returned stop is called first (time.AfterFunc).
	AfterFunc(d time.Duration, f func()) (stop func() bool)
}

type wallClock struct{}

func (wallClock) Now() time.Time { return time.Now() }
func (wallClock) AfterFunc(d time.Duration, f func()) func() bool {
	return time.AfterFunc(d, f).Stop
}

func (p *instancePool) clk() poolClock {
	if p.clock == nil {
		return wallClock{}
	}
	return p.clock
}

// take returns an idle instance for key, the most recently used, or nil.
func (p *instancePool) take(key poolKey) *instance {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.expireLocked(p.clk().Now())
	for i := len(p.idle) - 1; i >= 0; i-- {
		if in := p.idle[i]; in.key == key {
			p.idle = append(p.idle[:i], p.idle[i+1:]...)
			return in
		}
	}
	return nil
}

// put keeps an idle instance, closing the oldest past the bound.
func (p *instancePool) put(in *instance) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		in.stop(errInstanceClosed)
		return
	}
	now := p.clk().Now()
	in.idleSince = now
	p.idle = append(p.idle, in)
	p.expireLocked(now)
	for len(p.idle) > poolMaxIdle {
		p.idle[0].stop(errInstanceClosed)
		p.idle = p.idle[1:]
	}
	p.armLocked(now)
}

// expireLocked closes the instances idle for longer than poolIdleLimit.
func (p *instancePool) expireLocked(now time.Time) {
	n := 0
	for n < len(p.idle) && now.Sub(p.idle[n].idleSince) >= poolIdleLimit {
		p.idle[n].stop(errInstanceClosed)
		n++
	}
	p.idle = p.idle[n:]
}

// armLocked arms the expiry timer for the oldest idle instance, if there
// is one and no timer is armed.
func (p *instancePool) armLocked(now time.Time) {
	if p.timer != nil || len(p.idle) == 0 || p.closed {
		return
	}
	p.timer = p.clk().AfterFunc(p.idle[0].idleSince.Add(poolIdleLimit).Sub(now), p.tick)
}

// tick is the expiry timer: it closes the instances idle for too long and
// arms the timer again for the next.
func (p *instancePool) tick() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.timer = nil
	now := p.clk().Now()
	p.expireLocked(now)
	p.armLocked(now)
}

// dropTask closes the idle instances of task and returns how many.
func (p *instancePool) dropTask(task string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	kept := p.idle[:0]
	for _, in := range p.idle {
		if in.key.task == task {
			in.stop(errInstanceClosed)
			n++
			continue
		}
		kept = append(kept, in)
	}
	clear(p.idle[len(kept):])
	p.idle = kept
	if len(p.idle) == 0 && p.timer != nil {
		p.timer()
		p.timer = nil
	}
	return n
}

// ReleaseTask closes the idle instances of stateless plugins that task
// kept (reuse.go), at once rather than when they expire: for a task that
// runs no more here (finished, paused, or given up by this process). It
// returns how many it closed. Safe to call for any task, at any time; a
// later attempt of the task starts a new instance.
func (r *Runtime) ReleaseTask(task string) int {
	return r.pool.dropTask(task)
}

// close closes every idle instance and waits for their goroutines; later
// puts close theirs at once.
func (p *instancePool) close() {
	p.mu.Lock()
	p.closed = true
	idle := p.idle
	p.idle = nil
	if p.timer != nil {
		p.timer()
		p.timer = nil
	}
	p.mu.Unlock()
	for _, in := range idle {
		in.stop(errInstanceClosed)
	}
	for _, in := range idle {
		<-in.ended
	}
}

// idleCount is how many instances are idle (for tests).
func (p *instancePool) idleCount() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.idle)
}

// --- load: which modules are reused, and exporting their globals ---

// goBuildIDSection is the custom section the Go linker writes first in
// every Wasm module it links.
const goBuildIDSection = "go:buildid"

// reuseShape reports whether wasm imports lhengine_v1.serve_next
// (stateless) and whether its instances can be reused: the Go toolchain
// built it and it has no data count section (so no memory.init or
// data.drop, whose effect the image would not hold).
func reuseShape(sec sections, wasm []byte) (stateless, reusable bool) {
	for _, im := range sec.imports {
		if im.module == HostModule && im.name == serveNextName && im.kind == externFunc {
			stateless = true
		}
	}
	if !stateless || len(wasm) < 8 {
		return stateless, false
	}
	r := &reader{b: wasm, off: 8}
	goBuilt := false
	for r.off < len(r.b) {
		id, err := r.byte()
		if err != nil {
			return stateless, false
		}
		size, err := r.u32()
		if err != nil {
			return stateless, false
		}
		body, err := r.bytes(size)
		if err != nil {
			return stateless, false
		}
		switch id {
		case 0:
			if name, err := (&reader{b: body}).name(); err == nil && name == goBuildIDSection {
				goBuilt = true
			}
		case 12:
			return stateless, false
		}
	}
	return stateless, goBuilt
}

// exportGlobals returns wasm with an export "lhengine.global.N" added for
// each of its globals (all defined in the module: a plugin imports none),
// and how many. It fails on anything it does not understand, or when a
// global is immutable (Go's never are; the image holds mutable ones).
func exportGlobals(wasm []byte) ([]byte, int, error) {
	bad := errors.New("globals not exportable")
	if len(wasm) < 8 {
		return nil, 0, bad
	}
	r := &reader{b: wasm, off: 8}
	nglob := -1
	expStart, expEnd := -1, -1
	var expBody []byte
	for r.off < len(r.b) {
		start := r.off
		id, err := r.byte()
		if err != nil {
			return nil, 0, err
		}
		size, err := r.u32()
		if err != nil {
			return nil, 0, err
		}
		body, err := r.bytes(size)
		if err != nil {
			return nil, 0, err
		}
		switch id {
		case 6:
			if nglob, err = countMutableGlobals(body); err != nil {
				return nil, 0, err
			}
		case 7:
			expStart, expEnd, expBody = start, r.off, body
		}
	}
	if nglob < 0 || expStart < 0 {
		return nil, 0, bad
	}
	er := &reader{b: expBody}
	count, err := er.u32()
	if err != nil {
		return nil, 0, err
	}
	for range count {
		name, err := er.name()
		if err != nil {
			return nil, 0, err
		}
		if len(name) >= len(globalExportPrefix) && name[:len(globalExportPrefix)] == globalExportPrefix {
			return nil, 0, bad
		}
		if _, err := er.byte(); err != nil {
			return nil, 0, err
		}
		if _, err := er.u32(); err != nil {
			return nil, 0, err
		}
	}
	body := appendU32(nil, count+uint32(nglob))
	body = append(body, expBody[len(appendU32(nil, count)):]...)
	for i := range nglob {
		name := globalExportPrefix + strconv.Itoa(i)
		body = appendU32(body, uint32(len(name)))
		body = append(body, name...)
		body = append(body, 0x03) // global
		body = appendU32(body, uint32(i))
	}
	out := make([]byte, 0, len(wasm)+len(body)-len(expBody)+8)
	out = append(out, wasm[:expStart]...)
	out = append(out, 7)
	out = appendU32(out, uint32(len(body)))
	out = append(out, body...)
	out = append(out, wasm[expEnd:]...)
	return out, nglob, nil
}

// countMutableGlobals reads a global section and returns how many globals
// it defines, all of which must be mutable.
func countMutableGlobals(body []byte) (int, error) {
	bad := errors.New("global section not understood")
	r := &reader{b: body}
	count, err := r.u32()
	if err != nil {
		return 0, err
	}
	for range count {
		if _, err := r.byte(); err != nil { // value type
			return 0, err
		}
		mut, err := r.byte()
		if err != nil {
			return 0, err
		}
		if mut != 1 {
			return 0, bad
		}
		// The initialiser: one constant, then end.
		op, err := r.byte()
		if err != nil {
			return 0, err
		}
		switch op {
		case 0x41, 0x42: // i32.const, i64.const
			if err := r.skipLEB(); err != nil {
				return 0, err
			}
		case 0x43: // f32.const
			if _, err := r.bytes(4); err != nil {
				return 0, err
			}
		case 0x44: // f64.const
			if _, err := r.bytes(8); err != nil {
				return 0, err
			}
		default:
			return 0, bad
		}
		if end, err := r.byte(); err != nil || end != 0x0b {
			return 0, bad
		}
	}
	if r.off != len(r.b) {
		return 0, bad
	}
	return int(count), nil
}

// skipLEB skips one LEB128 number of up to 64 bits.
func (r *reader) skipLEB() error {
	for range 10 {
		c, err := r.byte()
		if err != nil {
			return err
		}
		if c&0x80 == 0 {
			return nil
		}
	}
	return errors.New("bad LEB128")
}

// compileForRun compiles wasm as Run instantiates it: its data packed
// (compilePacked) and, when its instances can be reused, its globals
// exported. It reports whether they can, and how many globals.
func compileForRun(ctx context.Context, rt wazero.Runtime, wasm []byte) (wazero.CompiledModule, bool, int, error) {
	if sec, err := scanSections(wasm); err == nil {
		if _, reusable := reuseShape(sec, wasm); reusable {
			b := wasm
			if packed, ok := packData(wasm, sec.memMin); ok {
				b = packed
			}
			if exp, n, err := exportGlobals(b); err == nil {
				if compiled, err := compile(ctx, rt, exp); err == nil {
					return compiled, true, n, nil
				}
			}
		}
	}
	compiled, err := compilePacked(ctx, rt, wasm)
	return compiled, false, 0, err
}

// --- descriptors: what a reused instance's WASI keeps outside its image ---
//
// An instance's table of open descriptors lives in the host, not in its
// memory, so the image cannot put it back. The WASI functions that change
// it are wrapped: in a reused instance, what an attempt opens is closed
// when the attempt ends, and an attempt that closes or renumbers stdin,
// stdout, stderr or a mount (or whose start-up left a file open) closes
// the instance after it. Elsewhere they are wazero's own.

var (
	wasiOnce  sync.Once
	wasiFuncs map[string]api.FunctionDefinition // wazero's WASI functions
	wasiErr   error
)

// instantiateWASI adds wasi_snapshot_preview1 to rt: wazero's, with the
// descriptor-changing functions wrapped.
func instantiateWASI(ctx context.Context, rt wazero.Runtime) error {
	wasiOnce.Do(func() {
		tmp := wazero.NewRuntimeWithConfig(context.Background(), wazero.NewRuntimeConfigInterpreter())
		defer tmp.Close(context.Background())
		if _, wasiErr = wasi_snapshot_preview1.Instantiate(context.Background(), tmp); wasiErr == nil {
			wasiFuncs = tmp.Module(wasiModule).ExportedFunctionDefinitions()
		}
	})
	if wasiErr != nil {
		return wasiErr
	}
	b := rt.NewHostModuleBuilder(wasiModule)
	wasi_snapshot_preview1.NewFunctionExporter().ExportFunctions(b)
	for name, wrap := range map[string]func(orig api.GoModuleFunction) api.GoModuleFunc{
		"path_open":   wrapOpen(8),
		"sock_accept": wrapOpen(2),
		"fd_close":    wrapClose,
		"fd_renumber": wrapRenumber,
		"fd_write":    wrapWrite,
		"fd_pwrite":   wrapWrite,
		// A file grown by fd_filestat_set_size.
		"fd_filestat_set_size": wrapWrite,
	} {
		def, ok := wasiFuncs[name]
		orig, isMod := def.GoFunction().(api.GoModuleFunction)
		if !ok || !isMod {
			return errors.New("wasi: no " + name + " to wrap")
		}
		b.NewFunctionBuilder().
			WithGoModuleFunction(wrap(orig), def.ParamTypes(), def.ResultTypes()).
			WithParameterNames(def.ParamNames()...).
			Export(name)
	}
	_, err := b.Instantiate(ctx)
	return err
}

// wrapOpen wraps a function returning a new descriptor at the pointer of
// parameter i.
func wrapOpen(i int) func(orig api.GoModuleFunction) api.GoModuleFunc {
	return func(orig api.GoModuleFunction) api.GoModuleFunc {
		return func(ctx context.Context, mod api.Module, stack []uint64) {
			in, ok := ctx.Value(attemptKey{}).(*instance)
			if !ok {
				orig.Call(ctx, mod, stack)
				return
			}
			ptr := api.DecodeU32(stack[i])
			orig.Call(ctx, mod, stack)
			if api.DecodeU32(stack[0]) == 0 { // ESUCCESS
				if fd, ok := mod.Memory().ReadUint32Le(ptr); ok {
					in.opened[int32(fd)] = true
				}
			}
		}
	}
}

func wrapClose(orig api.GoModuleFunction) api.GoModuleFunc {
	return func(ctx context.Context, mod api.Module, stack []uint64) {
		in, ok := ctx.Value(attemptKey{}).(*instance)
		if !ok {
			orig.Call(ctx, mod, stack)
			return
		}
		fd := api.DecodeI32(stack[0])
		if fd < in.reserved {
			in.tainted = true
		}
		orig.Call(ctx, mod, stack)
		if api.DecodeU32(stack[0]) == 0 {
			delete(in.opened, fd)
		}
	}
}

func wrapRenumber(orig api.GoModuleFunction) api.GoModuleFunc {
	return func(ctx context.Context, mod api.Module, stack []uint64) {
		in, ok := ctx.Value(attemptKey{}).(*instance)
		if !ok {
			orig.Call(ctx, mod, stack)
			return
		}
		from, to := api.DecodeI32(stack[0]), api.DecodeI32(stack[1])
		if from < in.reserved || to < in.reserved {
			in.tainted = true
		}
		orig.Call(ctx, mod, stack)
		if api.DecodeU32(stack[0]) == 0 {
			delete(in.opened, from)
			in.opened[to] = true
		}
	}
}

// closeOpened closes what the attempt opened and left open.
func (in *instance) closeOpened(ctx context.Context, mod api.Module) {
	if len(in.opened) == 0 {
		return
	}
	fdClose := wasiFuncs["fd_close"].GoFunction().(api.GoModuleFunction)
	stack := make([]uint64, 1)
	for fd := range in.opened {
		stack[0] = api.EncodeI32(fd)
		fdClose.Call(ctx, mod, stack)
	}
	clear(in.opened)
}

// mountsKey is a Limits' mounts as a pool key.
func mountsKey(ms []Mount) string {
	var b []byte
	for _, m := range ms {
		b = append(b, m.HostDir...)
		b = append(b, 0)
		b = append(b, m.GuestDir...)
		if m.ReadOnly {
			b = append(b, 0, 'r')
		}
		b = append(b, 0, 0)
	}
	return string(b)
}
