// Package worker claims work units from the ledger, runs each attempt in a
// fresh guest instance and commits the outcome.
package worker

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/lhengine/lhengine/engine/internal/confine"
	"github.com/lhengine/lhengine/engine/internal/guest"
	"github.com/lhengine/lhengine/engine/internal/hostcall"
	"github.com/lhengine/lhengine/engine/internal/metrics"
	"github.com/lhengine/lhengine/engine/internal/plan"
	"github.com/lhengine/lhengine/engine/internal/taskfile"
	"github.com/lhengine/lhengine/fault"
	"github.com/lhengine/lhengine/internal/crashpoint"
	"github.com/lhengine/lhengine/ledger"
)

// Config configures a Worker. Store, Runtime and Specs are required.
type Config struct {
	Store   ledger.Store
	Runtime *guest.Runtime
	Specs   *plan.Cache
	Logger  hclog.Logger

	// Name identifies the worker in lease owners ("<session>/<name>").
	Name string
	// Metrics counts what the worker commits and its attempts' host
	// calls; nil counts nothing.
	Metrics *metrics.Set
	// Tracer traces each unit: a span from its lease's grant to its
	// commit, with the attempt's run, its host calls and the commit as
	// children (specs/metrics.md). Nil traces nothing.
	Tracer trace.Tracer
	// Concurrency is the number of attempts run at once; 0 = 1.
	Concurrency int
	// LeaseFor is the lease length; the worker renews at a third of it
	// while an attempt runs. 0 = 30s.
	LeaseFor time.Duration
	// Task restricts the worker to one task's units.
	Task string
	// ExitWhenIdle makes Run return once there is nothing left to do: no
	// runnable task (or, with Task set, that task no longer runnable) and no
	// attempt running.
	ExitWhenIdle bool
	// PollEvery bounds how long an idle worker waits before looking for work
	// again when it knows of nothing due sooner; 0 = 1s.
	PollEvery time.Duration
	// Workspaces is the folder holding one workspace folder per task ("":
	// steps get no workspace).
	Workspaces string
	// HTTPClient performs http effects and fetches; nil = http.DefaultClient.
	HTTPClient *http.Client
	// ModelRecord is a folder where every live model response is recorded
	// (hostcall.Attempt); "" for none. A task submitted with a replay set
	// is answered from the set its manifest pins, whatever this says.
	ModelRecord string
	// OnCommit, when set, is called after every committed attempt with the
	// task as committed (for progress displays). Called from unit goroutines.
	OnCommit func(*ledger.Task)
	// Aborts, when set, lets the engine stop this worker's attempts of a
	// task it cancelled (see Aborts).
	Aborts *Aborts
	// Clock is the worker's time; nil = RealClock. Give the store the same
	// one (store.Options.Now) or lease times will not agree.
	Clock Clock

	// Stop, when it is closed, begins a graceful stop of Run: nothing more
	// is claimed, and the attempts in flight run on for up to Grace (0:
	// none), to end and be recorded as usual; those still running then
	// are cancelled and their units given back uncharged (store.Release).
	Stop  <-chan struct{}
	Grace time.Duration
	// OnStopping, when set, is called once as a stop begins (Stop closed,
	// or the context of Run ended), with the attempts then in flight.
	// OnStopped is called as Run returns after a stop began.
	OnStopping func(inFlight int)
	OnStopped  func(Stopped)

	// Seams for tests of failures the store cannot be made to produce on
	// demand; nil uses the Store.
	heartbeat func(context.Context, ledger.Lease, time.Duration) (time.Time, error)
	claim     func(context.Context, ledger.ClaimRequest) (ledger.Claimed, error)
	commit    func(context.Context, ledger.Result, ledger.ClaimRequest) (*ledger.Task, ledger.Claimed, ledger.Durability, error)
	// load wraps the loading of an attempt's plugin (Worker.plugin).
	load func(ctx context.Context, pin ledger.PluginPin, plugin func(context.Context, ledger.PluginPin) (*guest.Plugin, error)) (*guest.Plugin, error)
}

// Stopped is what a stop of Run did with the attempts in flight.
type Stopped struct {
	InFlight  int // attempts running as the stop began
	Finished  int // attempts that ended, and were recorded, after it began
	GivenBack int // units given back uncharged (store.Release)
}

// Worker runs work units. Create with New, then Run.
type Worker struct {
	cfg   Config
	owner string
	log   hclog.Logger
	clock Clock

	mu      sync.Mutex
	plugins map[string]*loaded            // by pinned path+sha256
	replays map[string]ledger.ReplayIndex // by set sha256; at most maxReplays

	// A stop: begun, and what became of the attempts since.
	stopping  atomic.Bool
	inFlight  int // set once, as stopping is
	finished  atomic.Int64
	givenBack atomic.Int64
}

// maxReplays bounds the replay set indexes a worker keeps in memory; one
// more drops them all (they are read from the store again).
const maxReplays = 16

type loaded struct {
	p    *guest.Plugin
	size int64
	mod  time.Time
}

// New returns a worker. It starts nothing.
func New(cfg Config) *Worker {
	if cfg.Concurrency <= 0 {
		cfg.Concurrency = 1
	}
	if cfg.LeaseFor <= 0 {
		cfg.LeaseFor = 30 * time.Second
	}
	if cfg.PollEvery <= 0 {
		cfg.PollEvery = time.Second
	}
	if cfg.Name == "" {
		cfg.Name = fmt.Sprintf("worker-%d", os.Getpid())
	}
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	if cfg.Clock == nil {
		cfg.Clock = RealClock{}
	}
	if cfg.heartbeat == nil {
		cfg.heartbeat = cfg.Store.Heartbeat
	}
	if cfg.claim == nil {
		cfg.claim = cfg.Store.Claim
	}
	return &Worker{
		cfg:     cfg,
		owner:   cfg.Store.Owner(cfg.Name),
		log:     cfg.Logger.Named("worker"),
		clock:   cfg.Clock,
		plugins: map[string]*loaded{},
		replays: map[string]ledger.ReplayIndex{},
	}
}

// replay is the replay set a task's manifest pins, with its index read
// from the store (once per set while it is cached); nil for none.
func (w *Worker) replay(m *ledger.Manifest) (*hostcall.Replay, error) {
	pin := m.ModelReplay
	if pin == nil {
		return nil, nil
	}
	w.mu.Lock()
	idx, ok := w.replays[pin.SHA256]
	w.mu.Unlock()
	if !ok {
		var err error
		if idx, err = w.cfg.Store.ReplayIndex(pin.SHA256); err != nil {
			return nil, err
		}
		w.mu.Lock()
		if len(w.replays) >= maxReplays {
			clear(w.replays)
		}
		w.replays[pin.SHA256] = idx
		w.mu.Unlock()
	}
	return &hostcall.Replay{Pin: *pin, Index: idx}, nil
}

// Owner is the lease owner name of this worker.
func (w *Worker) Owner() string { return w.owner }

// Run claims and runs units until ctx is done, Config.Stop is closed or,
// with ExitWhenIdle, there is nothing left to do.
//
// A stop through Config.Stop claims nothing more and gives the attempts in
// flight up to Config.Grace to end; they are recorded as usual. ctx ending
// stops at once, during a grace too. Either way, attempts cancelled by the
// stop are not committed: their units are given back uncharged
// (store.Release), ready for the next claim here or elsewhere, which runs
// the same attempt again. Run returns nil after a stop through
// Config.Stop or when it ran out of work, and ctx's error when ctx ended.
func (w *Worker) Run(ctx context.Context) error {
	runCtx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	var grace Timer
	// Whatever ends Run (ctx, a stop, a claim that failed, no work left),
	// attempts still running are cancelled first and then waited for:
	// waiting first would keep a failed worker's units busy until they
	// finish.
	defer func() {
		cancel()
		wg.Wait()
		if grace != nil {
			grace.Stop()
		}
		if w.stopping.Load() && w.cfg.OnStopped != nil {
			w.cfg.OnStopped(Stopped{InFlight: w.inFlight, Finished: int(w.finished.Load()), GivenBack: int(w.givenBack.Load())})
		}
	}()
	finished := make(chan struct{}, w.cfg.Concurrency)
	running := 0
	var graceC <-chan time.Time
	for {
		if err := ctx.Err(); err != nil {
			w.beginStop(running)
			cancel()
			return err
		}
		if !w.stopping.Load() {
			select {
			case <-w.cfg.Stop:
				w.beginStop(running)
				grace = w.clock.NewTimer(w.cfg.Grace)
				graceC = grace.C()
			default:
			}
		}
		if w.stopping.Load() {
			// Stopping: wait for the attempts in flight, until the
			// grace runs out.
			if running == 0 {
				return nil
			}
			select {
			case <-finished:
				running--
			case <-graceC:
				graceC = nil
				cancel() // the attempts still running give their units back
			case <-ctx.Done():
			}
			continue
		}
		var wake time.Time
		var others <-chan struct{} // taken before the claim, so a change after it wakes the wait
		if oc, ok := w.cfg.Store.(othersChanged); ok {
			others = oc.OthersChanged()
		}
		if free := w.cfg.Concurrency - running; free > 0 {
			c, err := w.cfg.claim(runCtx, ledger.ClaimRequest{
				Owner: w.owner, Max: free, LeaseFor: w.cfg.LeaseFor, Task: w.cfg.Task,
			})
			if err != nil {
				if ctx.Err() != nil {
					continue
				}
				return fmt.Errorf("claim: %w", err)
			}
			wake = c.Wake
			w.cfg.Metrics.TookOver(c.Reclaimed)
			for _, l := range c.Leases {
				running++
				wg.Add(1)
				go func(l ledger.Lease) {
					defer wg.Done()
					// A commit may hand back the next unit: run it in this slot.
					var after ledger.Durability
					for next := []ledger.Lease{l}; len(next) > 0; {
						if w.stopping.Load() || runCtx.Err() != nil {
							// Claimed as the stop began, not started.
							w.giveBack(runCtx, next[0], w.log)
							break
						}
						next, after = w.attempt(runCtx, next[0], after)
					}
					// The slot's last commit is on disk before the slot ends.
					if after != nil {
						if err := after.Wait(context.WithoutCancel(runCtx)); err != nil {
							w.log.Error("a commit's sync failed", "error", err)
						}
					}
					finished <- struct{}{}
				}(l)
			}
			if len(c.Leases) > 0 {
				continue // more may be ready: claim until the slots are full
			}
		}
		if running == 0 && w.cfg.ExitWhenIdle {
			idle, err := w.idle()
			if err != nil {
				return err
			}
			if idle {
				return nil
			}
		}
		wait := w.cfg.PollEvery
		if !wake.IsZero() {
			wait = min(wait, max(wake.Sub(w.clock.Now()), time.Millisecond))
		}
		timer := w.clock.NewTimer(wait)
		select {
		case <-finished:
			running--
		case <-timer.C():
		case <-others:
		case <-ctx.Done():
		case <-w.cfg.Stop:
		}
		timer.Stop()
	}
}

// othersChanged is a store shared with other processes (PostgreSQL):
// OthersChanged is closed once it has read what they committed, which may
// have made units ready or finished a task this worker waits on.
type othersChanged interface{ OthersChanged() <-chan struct{} }

// beginStop marks the worker stopping, once, with the attempts in flight.
func (w *Worker) beginStop(inFlight int) {
	if w.stopping.Swap(true) {
		return
	}
	w.inFlight = inFlight
	if w.cfg.OnStopping != nil {
		w.cfg.OnStopping(inFlight)
	}
}

// releaseWait bounds how long a stopping worker waits for the store to take
// a unit back; past it the lease expires as a crashed worker's would.
const releaseWait = 10 * time.Second

// giveBack gives back the unit of l, whose attempt the stop cut short or
// never started, without charging the attempt (store.Release).
func (w *Worker) giveBack(ctx context.Context, l ledger.Lease, log hclog.Logger) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseWait)
	defer cancel()
	err := w.cfg.Store.Release(rctx, l)
	switch {
	case err == nil:
		w.givenBack.Add(1)
		log.Debug("unit given back uncharged: the worker is stopping", "task", l.Task, "step", l.Step, "item", l.Item, "attempt", l.Attempt)
	case errors.Is(err, ledger.ErrLeaseLost):
		log.Debug("unit not given back: its lease is gone", "error", err)
	default:
		log.Warn("giving the unit back failed; it runs again once its lease expires", "task", l.Task, "error", err)
	}
}

// idle reports whether there is no work left for this worker.
func (w *Worker) idle() (bool, error) {
	if w.cfg.Task == "" {
		return !w.cfg.Store.Pending(), nil
	}
	var idle bool
	err := w.cfg.Store.Read(func(r ledger.Reader) error {
		t, err := r.Task(w.cfg.Task)
		if err != nil {
			return err
		}
		idle = t.Status != ledger.Queued && t.Status != ledger.Running
		return nil
	})
	return idle, err
}

// attempt runs one leased unit and commits its outcome, claiming the next
// unit in the same transaction; it returns that unit's lease, if any.
//
// after is the commit of the unit the slot ran before (zero when it is on
// disk). The commit returns before its sync when it hands back a next
// unit, which then runs beside the sync (the Durability returned goes with
// it); otherwise it waits for the sync, which also covers every earlier
// commit.
func (w *Worker) attempt(ctx context.Context, l ledger.Lease, after ledger.Durability) ([]ledger.Lease, ledger.Durability) {
	ctx, span := w.unitSpan(ctx, l)
	defer span.End()
	log := w.log.With("task", l.Task, "step", l.Step, "item", l.Item, "attempt", l.Attempt, "epoch", l.Epoch)
	started := w.clock.Now()
	var ws *wsUse
	res, step, hc, stepErr := w.execute(ctx, l, log, after, &ws)
	if ws != nil {
		defer ws.release()
	}
	if ctx.Err() != nil || errors.Is(stepErr, errGivenBack) {
		// The worker is stopping, or the task pausing, and cut the
		// attempt short: nothing of it is committed, and it costs the
		// unit nothing.
		w.giveBack(ctx, l, log)
		return nil, nil
	}
	var drifted *driftedError
	if errors.As(stepErr, &drifted) {
		// The environment changed and the task paused or went back to
		// an earlier step: the unit was given back uncharged (facts.go).
		w.ended(drifted.task)
		if w.cfg.OnCommit != nil {
			w.cfg.OnCommit(drifted.task)
		}
		return nil, nil
	}
	var waiting *waitingError
	if errors.As(stepErr, &waiting) {
		// The unit waits for a person (approval.go): nothing to commit.
		w.ended(waiting.task)
		if w.cfg.OnCommit != nil {
			w.cfg.OnCommit(waiting.task)
		}
		return nil, nil
	}
	if errors.Is(stepErr, ledger.ErrUnavailable) {
		// The store's database went away under the attempt (a restart):
		// what it read is not to be trusted, and its failure is not the
		// unit's. It goes back uncharged once the database is back (or
		// its lease expires), to run again.
		log.Warn("the store could not be reached during the attempt; the unit is given back", "error", stepErr)
		w.giveBack(ctx, l, log)
		return nil, nil
	}
	if errors.Is(stepErr, errLeaseRanOut) {
		// The unit is no longer this worker's to commit: the next claim,
		// here or elsewhere, takes it back and runs it again.
		log.Warn("attempt abandoned", "error", stepErr)
		return nil, nil
	}
	if hc != nil && hc.Ask() != nil {
		// The plugin asked a person (approval.request): whatever it
		// returned after, the unit waits for the decision and runs again
		// on it, its attempt uncharged.
		ask := hc.Ask()
		task, err := w.ask(ctx, l, ask)
		if err != nil {
			log.Warn("recording the plugin's approval request failed; the unit runs again", "error", err)
			w.giveBack(ctx, l, log)
			return nil, nil
		}
		log.Info("waiting for approval asked by the plugin", "prompt", ask.Prompt)
		w.ended(task)
		if w.cfg.OnCommit != nil {
			w.cfg.OnCommit(task)
		}
		return nil, nil
	}
	if hc != nil && hc.PauseReason() != "" {
		// An effect needs a human: the unit waits, its attempt uncharged,
		// until the effect is settled; the task's other units run on.
		task, err := w.cfg.Store.WaitEffect(ctx, l, hc.PauseKey(), hc.PauseReason())
		if err != nil {
			log.Warn("pausing the task failed", "error", err)
			return nil, nil
		}
		log.Warn("unit waits for a person to settle an effect", "reason", hc.PauseReason(), "task_status", task.Status)
		w.ended(task)
		if w.cfg.OnCommit != nil {
			w.cfg.OnCommit(task)
		}
		return nil, nil
	}
	// Only a progress display (OnCommit) reads the committed task's steps.
	r := ledger.Result{Lease: l, Started: started, HeaderOnly: w.cfg.OnCommit == nil}
	if res != nil {
		r.Log = res.Log
	}
	if hc != nil {
		r.Counts, r.Notes = hc.Progress()
		r.Environment = hc.Environment
	}
	var rejected *rejectedError
	switch {
	case errors.As(stepErr, &rejected) && step.Repair != nil:
		r.Repair = &ledger.Repair{RestartFrom: step.Repair.RestartIndex, Max: step.Repair.Max, Reason: rejected.reason}
		log.Warn("approval rejected; the step's repair runs", "reason", rejected.reason)
	case rejected != nil:
		r.Failure = &ledger.Failure{Kind: fault.Rejected, Message: rejected.reason}
		log.Warn("approval rejected", "reason", rejected.reason)
	case stepErr != nil:
		kind := fault.KindOf(stepErr)
		msg := stepErr.Error()
		var se *fault.StepError
		if errors.As(stepErr, &se) {
			msg = se.Message
		}
		if hc != nil && kind == fault.PluginError && hc.TransportFailure() != "" {
			// The plugin failed on an effect that got no whole answer:
			// the receiver's connection, not the plugin, is at fault.
			kind, msg = fault.EffectTransport, hc.TransportFailure()+"; then "+msg
		}
		r.Failure = &ledger.Failure{Kind: kind, Message: msg}
		// The budget counts the tries of this pass (Lease.Try), not the
		// attempt numbers, which go on across repairs and retries.
		if step != nil && kind.Retryable() && l.Try < step.Retry.Attempts {
			r.RetryAt = w.clock.Now().Add(step.Retry.Delay(l.Try))
		}
		log.Warn("attempt failed", "kind", kind, "error", msg, "retry", !r.RetryAt.IsZero())
	case res.NeedsRepair:
		if step.Repair == nil {
			r.Failure = &ledger.Failure{Kind: fault.PluginError,
				Message: fmt.Sprintf("plugin asked for repair (%s) but step %q has no repair block", res.RepairReason, step.Name)}
			break
		}
		r.Repair = &ledger.Repair{RestartFrom: step.Repair.RestartIndex, Max: step.Repair.Max, Reason: res.RepairReason}
	default:
		r.Output = res.Output
	}
	// The commit of a success or a repair of a step that writes the
	// workspace records a snapshot of it (snapshot.go), unless the task's
	// latest is of the tree as the attempt left it (needsSnapshot). The
	// snapshot is taken under the workspace's lock, held until the commit
	// has its place in the store's order of commits (Result.Queued): the
	// snapshots of one workspace land in the order they were taken, while
	// their commits share transactions.
	var wsFiles map[string]cached
	if ws != nil && ws.write && r.Failure == nil {
		ws.t.mu.Lock()
		unlock := sync.OnceFunc(ws.t.mu.Unlock)
		defer unlock()
		if !ws.needsSnapshot() {
			unlock()
		} else {
			r.Queued = unlock
		}
	}
	if r.Queued != nil {
		snap, files, err := ws.snapshot(ctx, w.cfg.Store, l, step.LimitsOf().WorkspaceBytes)
		var quota *errWorkspaceQuota
		switch {
		case errors.As(err, &quota):
			r.Output, r.Repair, r.Counts, r.Notes = nil, nil, nil, nil
			r.Failure = &ledger.Failure{Kind: fault.Budget, Message: err.Error()}
			log.Warn("attempt failed", "kind", fault.Budget, "error", err.Error(), "retry", false)
		case errors.Is(err, ledger.ErrLeaseLost):
			log.Warn("commit refused: lease lost", "error", err)
			return nil, nil
		case err != nil && ctx.Err() != nil:
			w.giveBack(ctx, l, log)
			return nil, nil
		case errors.Is(err, ledger.ErrNoSpace):
			// The disk cannot hold the workspace's files: the unit
			// commits without a snapshot, and the task's latest stays
			// the one before.
			log.Warn("workspace snapshot not recorded: the disk is below the store's free-space floor; the unit commits without it", "error", err)
		case err != nil:
			log.Error("recording the workspace snapshot failed; the lease will expire and the unit run again", "error", err)
			return nil, nil
		default:
			r.Workspace, wsFiles = snap, files
		}
	}
	next := ledger.ClaimRequest{Owner: w.owner, Max: 1, LeaseFor: w.cfg.LeaseFor, Task: w.cfg.Task}
	if w.stopping.Load() {
		next.Max = 0 // a stopping worker claims nothing more
	}
	crashpoint.Reached(crashpoint.UnitBeforeCommit)
	commit := w.cfg.Store.CommitAndClaim
	if w.cfg.commit != nil {
		commit = w.cfg.commit
	}
	began := time.Now()
	cctx, commitSpan := w.span(ctx, "lhengine.commit")
	committed, claimed, dur, err := commit(cctx, r, next)
	if err == nil && (len(claimed.Leases) == 0 || crashpoint.Armed(crashpoint.UnitAfterCommit)) {
		// Nothing more runs in this slot on the strength of this commit
		// (or a crash point wants it synced): it must be on disk before
		// the slot ends, since the task may be reported finished.
		err = dur.Wait(context.WithoutCancel(ctx))
		dur = nil
	}
	endSpan(commitSpan, err)
	if err == nil {
		crashpoint.Reached(crashpoint.UnitAfterCommit)
		w.cfg.Metrics.Committed(r, time.Since(began))
		w.cfg.Metrics.TookOver(claimed.Reclaimed)
		commitSpan.SetAttributes(attribute.Int("lhengine.next_units", len(claimed.Leases)))
	}
	switch {
	case errors.Is(err, ledger.ErrLeaseLost):
		log.Warn("commit refused: lease lost", "error", err)
		return nil, nil
	case errors.Is(err, ledger.ErrBudgetReached):
		// A budget paused the task while this attempt ran: its result
		// would go past the budget, so the unit goes back uncharged.
		log.Info("commit refused: the task's budget is reached; the unit is given back", "error", err)
		w.giveBack(ctx, l, log)
		return nil, nil
	case errors.Is(err, ledger.ErrStoreFailed):
		log.Error("commit outcome unknown: the store failed and accepts no more writes; restart lhengine, then check the task", "error", err)
		return nil, nil
	case errors.Is(err, ledger.ErrNoSpace):
		log.Error("commit refused: the disk is below the free-space floor; nothing was written, and the unit runs again once space is freed", "error", err)
		return nil, nil
	case err != nil && ctx.Err() != nil:
		// A stop cut the commit short; if it landed all the same, the
		// release finds the lease gone and changes nothing.
		w.giveBack(ctx, l, log)
		return nil, nil
	case err != nil:
		log.Error("commit failed; the lease will expire and the unit run again", "error", err)
		return nil, nil
	}
	if r.Workspace != nil {
		r.Queued()
		ws.committed(committed.WorkspaceSeq, committed.WorkspaceDigest, wsFiles, log)
	}
	w.ended(committed)
	if w.cfg.OnCommit != nil {
		w.cfg.OnCommit(committed)
	}
	return claimed.Leases, dur
}

// ended notes an attempt recorded in task: counted if a stop has begun,
// and when the task runs no more (finished or paused) the idle instances
// it kept in the runtime are closed.
func (w *Worker) ended(task *ledger.Task) {
	if w.stopping.Load() {
		w.finished.Add(1)
	}
	if task.Status != ledger.Queued && task.Status != ledger.Running {
		w.cfg.Runtime.ReleaseTask(task.ID)
	}
}

// execute evaluates the unit's input, loads the plugin and runs the attempt
// while renewing the lease.
//
// *ws is set to the attempt's use of its task's workspace, if it has one:
// the caller releases it once the outcome is committed.
func (w *Worker) execute(ctx context.Context, l ledger.Lease, log hclog.Logger, after ledger.Durability, ws **wsUse) (*guest.Result, *taskfile.Step, *hostcall.Attempt, error) {
	// From its first moment the attempt can be cancelled (Aborts) and its
	// lease is renewed: reading its input and loading its plugin (perhaps
	// compiling it) may take a while.
	attemptCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	h := &host{w: w, lease: l, until: l.Until, log: log, cancel: cancel}
	defer w.cfg.Aborts.add(l.Task, h)()
	stop := sync.OnceFunc(w.renew(attemptCtx, h))
	defer stop()
	var (
		task  *ledger.Task
		sp    *plan.Spec
		input []byte
		ask   *taskfile.ApprovalAsk
	)
	err := w.cfg.Store.Read(func(r ledger.Reader) error {
		var err error
		if task = l.Snapshot; task == nil || task.ID != l.Task {
			if task, err = r.Task(l.Task); err != nil {
				return fault.Wrap(fault.Internal, err, err.Error())
			}
		}
		if sp, err = w.cfg.Specs.Spec(r, l.Task); err != nil {
			return fault.Wrap(fault.Internal, err, err.Error())
		}
		input, ask, err = w.cfg.Specs.Unit(r, task, l)
		return err
	})
	if sp == nil {
		return nil, nil, nil, err
	}
	step := sp.Task.Steps[l.Step]
	if err != nil {
		return nil, step, nil, err
	}
	facts, err := w.checkFacts(ctx, l, sp, log) // facts.go
	if err != nil {
		return nil, step, nil, err
	}
	if err := w.gate(ctx, l, step, ask, log); err != nil { // approval.go
		return nil, step, nil, err
	}
	pin, ok := sp.Manifest.Plugins[step.Name]
	if !ok {
		return nil, step, nil, fault.New(fault.PluginMissing, "the run manifest pins no plugin for step %q", step.Name)
	}
	var p *guest.Plugin
	if w.cfg.load != nil {
		p, err = w.cfg.load(attemptCtx, pin, w.plugin)
	} else {
		p, err = w.plugin(attemptCtx, pin)
	}
	if lost := h.lost(); lost != nil && ctx.Err() == nil {
		return nil, step, nil, fault.Wrap(fault.Internal, lost, "lease lost during the attempt: "+lost.Error())
	}
	if err != nil {
		return nil, step, nil, err
	}

	req := guest.Request{TaskID: task.ID, TaskName: task.Name, Step: step.Name, Attempt: l.Attempt, Input: input, Policy: step.Params, Now: l.Unit.Claimed}
	req.Environment = facts
	req.Objective, req.Constraints = sp.Manifest.Objective, sp.Manifest.Constraints
	if step.ForEach != nil || step.Every > 0 {
		req.Item = &guest.Item{Index: l.Item, Key: l.Unit.Key, Value: l.Unit.Value}
	}
	if task.Repairs > 0 {
		req.Repair = &guest.Repair{Count: task.Repairs, Reason: task.RepairReason}
	}
	// The attempt's log records what its random_get stream derives from,
	// so a replay of the attempt can be given the same bytes.
	item := "none"
	if req.Item != nil {
		item = fmt.Sprint(l.Item)
	}
	seed := guest.Seed(req)
	seedLine := fmt.Sprintf("[lhengine] random seed %x (task %s, step %q, item %s, attempt %d, repairs %d)\n",
		seed[:], task.ID, step.Name, item, l.Attempt, task.Repairs)
	workspace := ""
	if w.cfg.Workspaces != "" && step.Workspace != "none" {
		workspace = filepath.Join(w.cfg.Workspaces, task.ID)
		// Restored from the task's latest snapshot when missing here or
		// older (snapshot.go).
		u, err := w.enterWorkspace(task, workspace, step.Workspace == "rw")
		if err != nil {
			return nil, step, nil, fault.Wrap(fault.Internal, err, "preparing the task workspace: "+err.Error())
		}
		u.at = stepPass{step: l.Step, pass: l.Unit.Pass}
		*ws = u
	}
	replay, err := w.replay(sp.Manifest)
	if err != nil {
		return nil, step, nil, fault.Wrap(fault.Internal, err, "reading the task's replay set: "+err.Error())
	}
	var (
		guard   *confine.Guard
		changed *atomic.Bool
	)
	if workspace != "" && step.Workspace == "rw" {
		var release func()
		guard, release = workspaceGuard(workspace, step.LimitsOf().WorkspaceBytes, w.cfg.Store)
		defer release()
		changed = &(*ws).changed
	}
	inSum := sha256.Sum256(input)
	h.Attempt = &hostcall.Attempt{
		Store: w.cfg.Store, Lease: l, TaskName: task.Name, Step: step, Workspace: workspace, WorkspaceGuard: guard, WorkspaceChanged: changed,
		PluginSHA256: pin.SHA256, InputSHA256: hex.EncodeToString(inSum[:]), Environment: facts, Client: w.cfg.HTTPClient,
		Replay: replay, ModelRecord: w.cfg.ModelRecord, After: after, Metrics: w.cfg.Metrics,
	}
	lim := guest.Limits{Timeout: step.Timeout, MemoryBytes: step.Memory, MaxHostCalls: step.HostCalls}
	if workspace != "" {
		lim.Mounts = append(lim.Mounts, guest.Mount{HostDir: workspace, GuestDir: "/workspace", ReadOnly: step.Workspace == "ro", Guard: guard, Changed: changed})
	}
	for _, m := range step.Mounts {
		lim.Mounts = append(lim.Mounts, guest.Mount{HostDir: m.SourcePath, GuestDir: "/mnt/" + m.Name, ReadOnly: true})
	}
	runCtx, runSpan := w.span(attemptCtx, "lhengine.run", attribute.String("lhengine.plugin.sha256", pin.SHA256))
	res, err := p.Run(runCtx, req, lim, h)
	endSpan(runSpan, err)
	stop()
	if res != nil {
		res.Log = append([]byte(seedLine), res.Log...)
	}
	if lost := h.lost(); lost != nil && ctx.Err() == nil {
		return res, step, h.Attempt, fault.Wrap(fault.Internal, lost, "lease lost during the attempt: "+lost.Error())
	}
	return res, step, h.Attempt, err
}

// plugin loads a pinned plugin from the module bytes the store keeps under
// its sha256 (the Runtime compiles each sha256 once and fetches its bytes
// only until then), never from the path, which may have changed or gone
// since the task was submitted.
//
// Tasks submitted by engines that did not keep module bytes in the store
// fall back to the pinned path, checked against the pinned sha256, once per
// process unless the file changed.
func (w *Worker) plugin(ctx context.Context, pin ledger.PluginPin) (*guest.Plugin, error) {
	var fromPath bool
	p, err := w.cfg.Runtime.LoadPinned(ctx, filepath.Base(pin.Path), pin.SHA256, func() ([]byte, error) {
		b, err := w.cfg.Store.Module(pin.SHA256)
		if errors.Is(err, ledger.ErrNotFound) {
			fromPath = true
		} else if err != nil {
			return nil, fault.Wrap(fault.HashMismatch, err, "plugin "+pin.Path+": the module pinned in the store cannot be read: "+err.Error())
		}
		return b, err
	})
	if !fromPath {
		return p, err
	}
	key := pin.Path + "@" + pin.SHA256
	fi, statErr := os.Stat(pin.Path)
	w.mu.Lock()
	c, ok := w.plugins[key]
	w.mu.Unlock()
	if ok && statErr == nil && fi.Size() == c.size && fi.ModTime().Equal(c.mod) {
		return c.p, nil
	}
	p, err = w.cfg.Runtime.Load(ctx, pin.Path, pin.SHA256)
	if err != nil {
		var se *fault.StepError
		if errors.As(err, &se) && se.Kind == fault.HashMismatch {
			se.Message = fmt.Sprintf("plugin %s changed since the task was submitted (pinned sha256 %s): %s", pin.Path, pin.SHA256, se.Message)
		}
		return nil, err
	}
	if statErr == nil {
		w.mu.Lock()
		w.plugins[key] = &loaded{p: p, size: fi.Size(), mod: fi.ModTime()}
		w.mu.Unlock()
	}
	return p, nil
}

// errLeaseRanOut is why an attempt stops when its lease ran out while
// every heartbeat failed.
var errLeaseRanOut = errors.New("lease ran out: heartbeats failed until it expired")

// renew heartbeats the lease every third of its length until stop is
// called. A heartbeat that fails with anything but store.ErrLeaseLost is
// retried: after LeaseFor/30, then twice as long each time, but never
// later than half the time left on the lease (and, once less than that
// first delay is left, exactly when it runs out), so a store that is
// briefly unavailable costs nothing. Renewal stops when the lease is lost
// or has run out; either cancels the attempt. The goroutine it starts is
// owned by the attempt and ends before stop returns.
func (w *Worker) renew(ctx context.Context, h *host) (stop func()) {
	done := make(chan struct{})
	exited := make(chan struct{})
	go func() {
		defer close(exited)
		every := max(w.cfg.LeaseFor/3, time.Millisecond)
		first := max(w.cfg.LeaseFor/30, time.Millisecond)
		wait, backoff := every, time.Duration(0)
		for {
			t := w.clock.NewTimer(wait)
			select {
			case <-done:
				t.Stop()
				return
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C():
			}
			err := h.beat(ctx)
			if err == nil {
				wait, backoff = every, 0
				continue
			}
			if ctx.Err() != nil || h.lost() != nil {
				return
			}
			left := h.leaseUntil().Sub(w.clock.Now())
			if left <= 0 {
				h.lose(fmt.Errorf("%w (last error: %v)", errLeaseRanOut, err))
				return
			}
			if backoff == 0 {
				backoff = first
			} else {
				backoff = min(2*backoff, every)
			}
			wait = min(backoff, left/2)
			if wait < first {
				wait = left // one last try as the lease ends
			}
			h.log.Warn("lease heartbeat failed; retrying", "error", err, "retry_in", wait, "lease_left", left)
		}
	}()
	return func() { close(done); <-exited }
}

// host is the engine side of one attempt's host calls.
type host struct {
	*hostcall.Attempt // Call, PutArtifact, ReadArtifact
	w                 *Worker
	lease             ledger.Lease
	log               hclog.Logger
	cancel            context.CancelFunc

	mu      sync.Mutex
	until   time.Time // the lease's end as last granted
	lostErr error
}

func (h *host) Log(level hclog.Level, msg string) { h.log.Log(level, msg, "from", "plugin") }

// beat renews the lease once. store.ErrLeaseLost marks it lost and cancels
// the attempt; other errors change nothing.
func (h *host) beat(ctx context.Context) error {
	if err := h.lost(); err != nil {
		return err
	}
	until, err := h.w.cfg.heartbeat(ctx, h.lease, h.w.cfg.LeaseFor)
	switch {
	case err == nil:
		h.mu.Lock()
		if until.After(h.until) {
			h.until = until
		}
		h.mu.Unlock()
	case errors.Is(err, ledger.ErrLeaseLost):
		h.lose(err)
	}
	return err
}

// Heartbeat is the guest's heartbeat call. It reports an error only when
// the lease is lost (which cancels the attempt): a failure to reach the
// store while the lease still holds is the renewer's to retry.
func (h *host) Heartbeat(ctx context.Context) error {
	err := h.beat(ctx)
	if err == nil || ctx.Err() != nil || h.lost() != nil {
		return err
	}
	if h.w.clock.Now().Before(h.leaseUntil()) {
		h.log.Warn("lease heartbeat failed; the lease still holds", "error", err)
		return nil
	}
	err = fmt.Errorf("%w (last error: %v)", errLeaseRanOut, err)
	h.lose(err)
	return err
}

// lose records why the lease is gone and cancels the attempt.
func (h *host) lose(err error) {
	h.mu.Lock()
	if h.lostErr == nil {
		h.lostErr = err
	}
	h.mu.Unlock()
	h.cancel()
}

func (h *host) leaseUntil() time.Time {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.until
}

func (h *host) lost() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.lostErr
}
