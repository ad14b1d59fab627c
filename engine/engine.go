package engine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"go.opentelemetry.io/otel/trace"

	"github.com/lhengine/lhengine/engine/internal/guest"
	"github.com/lhengine/lhengine/engine/internal/hostcall"
	"github.com/lhengine/lhengine/engine/internal/metrics"
	"github.com/lhengine/lhengine/engine/internal/plan"
	"github.com/lhengine/lhengine/engine/internal/taskfile"
	"github.com/lhengine/lhengine/engine/internal/worker"
	"github.com/lhengine/lhengine/fault"
	"github.com/lhengine/lhengine/ledger"
	"github.com/lhengine/lhengine/store"
)

// Versions of this engine and of the plugin ABI it speaks. ABIVersion is
// the ABI's major version, defined once in the SDK's leaf package
// github.com/lhengine/lhengine/plugins/sdk/go/abi.
const (
	Version    = plan.EngineVersion
	ABIVersion = guest.ABIVersion
	// LanguageVersion is the version of the task language
	// (specs/task-language.md) this engine reads.
	LanguageVersion = taskfile.LanguageVersion
)

// Config configures Open.
type Config struct {
	// Home holds the store and caches. Required.
	Home   string
	Logger hclog.Logger
	// Store is where the ledger is kept: "" for the embedded store in the
	// home (HOME/store), or a PostgreSQL URL (postgres://…), the home then
	// keeping the caches and the socket only (specs/ledger.md,
	// "PostgreSQL").
	Store string
	// MigrateStore brings a PostgreSQL store's schema up to this build's
	// as it opens; without it, a schema that is behind is refused.
	MigrateStore bool
	// NoSync skips fsync at commits (benchmarks of everything but the disk).
	NoSync bool
	// AllowDamaged opens a store that failed an integrity check
	// (the embedded store's ErrDamaged) instead of refusing it.
	AllowDamaged bool
	// MustExist refuses, with a *NoHomeError, a home that holds no store
	// yet, instead of creating one: for commands that only read or act on
	// tasks that must already be there.
	MustExist bool
	// CacheDir keeps compiled plugins between processes: a wazero
	// compilation cache, keyed by module content, wazero version and CPU,
	// which any number of homes and processes may share, at once too. ""
	// means HOME/cache/wazero. It is created owner-only (0700, entries
	// 0600), and one that another user owns is refused: it holds native
	// code this process runs.
	CacheDir string
	// NoCache keeps compiled plugins in memory only: each process compiles
	// the plugins it loads.
	NoCache bool
	// OnCompile, if not nil, is called as Submit loads each distinct plugin
	// of a task (compiling it, unless this process or the cache already
	// has), before and after; from several goroutines at once, since a
	// task's plugins are loaded in parallel.
	OnCompile func(CompileEvent)
	// TracerProvider, when set, traces every unit this engine's workers
	// run: a span from the lease's grant to the commit, with the run, its
	// host calls and the commit under it (specs/metrics.md, "Traces").
	// Nil traces nothing.
	TracerProvider trace.TracerProvider
}

// CompileEvent is one plugin load of Submit: Done false when it starts,
// true when it ended, with Err if the plugin cannot run.
type CompileEvent struct {
	Plugin string // its path, as the task names it
	Size   int    // bytes
	Done   bool
	Err    error
}

// NoHomeError: Open with MustExist found no store in the home.
type NoHomeError struct{ Home string }

func (e *NoHomeError) Error() string {
	return fmt.Sprintf("no lhengine home at %s (it holds no store): submit or run a task there first, "+
		"or point at a home with --home DIR or LHENGINE_HOME", e.Home)
}

// IsPostgresURL reports whether store names a PostgreSQL database
// (postgres:// or postgresql://).
func IsPostgresURL(store string) bool {
	return strings.HasPrefix(store, "postgres://") || strings.HasPrefix(store, "postgresql://")
}

// Engine is an open home directory: ledger, compiled-module cache and the
// task specs this process has read. Safe for concurrent use.
type Engine struct {
	home  string
	log   hclog.Logger
	store ledger.Store
	rt    *guest.Runtime
	specs *plan.Cache

	onCompile func(CompileEvent) // Config.OnCompile

	notify *notifier // delivers the notify blocks' notifications (notify.go)

	metrics *metrics.Set // what this process's workers did (MetricsHandler)
	tracer  trace.Tracer // Config.TracerProvider's; nil traces nothing

	mu      sync.Mutex
	working map[string]int // Work calls running, by task ("" = every task)
	aborts  worker.Aborts  // attempts of this engine's workers, by task
}

// Open opens (creating if needed) the home directory. Only one process may
// have a home open at a time.
func Open(ctx context.Context, cfg Config) (*Engine, error) {
	if cfg.Home == "" {
		return nil, errors.New("engine: no home directory")
	}
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	if cfg.MustExist && cfg.Store == "" {
		if fi, err := os.Stat(filepath.Join(cfg.Home, "store")); err != nil || !fi.IsDir() {
			abs, _ := filepath.Abs(cfg.Home)
			return nil, &NoHomeError{Home: abs}
		}
	}
	if err := os.MkdirAll(cfg.Home, 0o700); err != nil { // owner-only: it holds every output
		return nil, err
	}
	specs := plan.NewCache()
	so := store.Options{Logger: cfg.Logger, Planner: specs.Planner(), NoSync: cfg.NoSync, AllowDamaged: cfg.AllowDamaged}
	var st *store.Store
	var err error
	switch {
	case cfg.Store == "":
		st, err = store.Open(filepath.Join(cfg.Home, "store"), so)
	case IsPostgresURL(cfg.Store):
		st, err = store.OpenPostgres(ctx, cfg.Store, store.PostgresOptions{Options: so, Migrate: cfg.MigrateStore, Version: Version})
	default:
		err = fmt.Errorf("store %q: not a postgres:// URL (leave it empty for the embedded store in the home)", cfg.Store)
	}
	if err != nil {
		return nil, err
	}
	cache := cfg.CacheDir
	switch {
	case cfg.NoCache:
		cache = ""
	case cache == "":
		cache = filepath.Join(cfg.Home, "cache", "wazero")
	}
	rt, err := guest.NewRuntime(ctx, guest.Config{CacheDir: cache, Logger: cfg.Logger})
	if err != nil {
		st.Close()
		return nil, err
	}
	e := &Engine{home: cfg.Home, log: cfg.Logger, store: st, rt: rt, specs: specs, onCompile: cfg.OnCompile,
		notify: newNotifier(st, cfg.Logger)}
	e.metrics = metrics.New(e.Read)
	if cfg.TracerProvider != nil {
		e.tracer = cfg.TracerProvider.Tracer("github.com/lhengine/lhengine/engine")
	}
	return e, nil
}

// MetricsHandler serves this engine's Prometheus metrics (specs/metrics.md):
// what its workers committed, their attempts' host calls, effects and
// model tokens, and the units ready per task, read from the ledger at the
// scrape.
func (e *Engine) MetricsHandler() http.Handler { return e.metrics.Handler() }

// Close releases the home directory. Work must have returned.
func (e *Engine) Close(ctx context.Context) error {
	return errors.Join(e.rt.Close(ctx), e.store.Close())
}

// SubmitOptions are the optional parts of a submission.
type SubmitOptions struct {
	Vars           map[string]string // raw --var values
	IdempotencyKey string

	// The run's harness policies (specs/policies.md): Policies adds NAME
	// or NAME@VERSION to those the task lists (or re-versions one),
	// Without removes by name, PolicyDirs are searched after policies/
	// beside the task file and before HOME/policies.
	Policies   []string
	Without    []string
	PolicyDirs []string
	// GrantPolicies names policies whose inserted steps may reach what no
	// step of the task does (--grant-policy); without it such a policy
	// is refused.
	GrantPolicies []string

	// ModelReplay is a folder of recorded model responses (--model-replay):
	// its recordings are read now, kept in the store with the task and
	// pinned in its manifest, and the task's model calls are answered from
	// them, never from the folder, and send nothing. A call with no
	// recording fails, naming its request's sha256. "" for live calls.
	ModelReplay string
}

// Submit validates the task file at path, pins its run manifest and queues
// it. It returns the task and whether it was created (false when the
// idempotency key names an earlier submission). A task file that does not
// validate gives an *InvalidTaskError.
func (e *Engine) Submit(ctx context.Context, path string, o SubmitOptions) (*ledger.Task, bool, error) {
	return e.submit(ctx, path, e.home, taskfile.OSFiles{}, o)
}

// submit is Submit reading every file of the submission through files
// (the task file, its plugins, prompts, the policy files of its search
// path, whose last folder is home/policies, and the replay set's
// recordings). Mount sources and the files of file_sha256 and git_head
// facts name the disk of the machine that runs the task: they are read
// there whatever files is.
func (e *Engine) submit(ctx context.Context, path, home string, files taskfile.Files, o SubmitOptions) (*ledger.Task, bool, error) {
	// Loading through the runtime compiles each module once per process
	// (and once per machine, with the on-disk cache); the worker reuses it.
	// The bytes checked are the bytes kept: the task runs from them. The
	// task's plugins are checked in parallel (plan.CheckModules).
	var mu sync.Mutex
	modules := map[string][]byte{}
	check := func(ctx context.Context, p string) error {
		wasm, err := readModule(files, p)
		if err != nil {
			return missingModule(p, err) // the same error a worker would see
		}
		if e.onCompile != nil {
			e.onCompile(CompileEvent{Plugin: p, Size: len(wasm)})
		}
		pl, err := e.rt.LoadBytes(ctx, filepath.Base(p), wasm)
		if e.onCompile != nil {
			e.onCompile(CompileEvent{Plugin: p, Size: len(wasm), Done: true, Err: err})
		}
		if err != nil {
			return err
		}
		mu.Lock()
		modules[pl.SHA256] = wasm
		mu.Unlock()
		return nil
	}
	sub, err := plan.PrepareWith(ctx, path, o.Vars, plan.PolicyOptions{
		Add: o.Policies, Without: o.Without, Dirs: o.PolicyDirs, Home: home, Grant: o.GrantPolicies, Files: files,
	}, check)
	var inv *plan.InvalidTaskError
	if errors.As(err, &inv) {
		return nil, false, &InvalidTaskError{Diagnostics: &Diagnostics{diags: inv.Diagnostics, files: inv.Files}}
	}
	if err != nil {
		return nil, false, err
	}
	for step, pin := range sub.Manifest.Plugins {
		if _, ok := modules[pin.SHA256]; !ok {
			return nil, false, fmt.Errorf("step %q: plugin %s changed while the task was being submitted; submit again", step, pin.Path)
		}
	}
	var replay *ledger.ReplaySet
	if o.ModelReplay != "" {
		if replay, err = hostcall.ReadReplayFrom(files, o.ModelReplay); err != nil {
			return nil, false, err
		}
		pin := replay.Pin()
		sub.Manifest.ModelReplay = &pin
	}
	// The environment's facts as the task starts: a later unit that reads
	// other values sees a drift.
	facts, err := sub.Task.Environment.ReadFacts(func(f *taskfile.Fact) (string, error) {
		pin := sub.Manifest.Plugins[plan.FactPluginKey(f.Name)]
		p, err := e.rt.LoadBytes(ctx, filepath.Base(pin.Path), modules[pin.SHA256])
		if err != nil {
			return "", err
		}
		return plan.RunFact(ctx, p, sub.Task.Name, f)
	})
	if err != nil {
		return nil, false, fmt.Errorf("reading the task's environment: %w", err)
	}
	// The output quota is kept with the task; the other limits reach the
	// store with each write they bound.
	quota := int64(sub.Task.Limits.OutputBytes)
	t, created, err := e.store.Submit(ctx, ledger.NewTask{
		Name: sub.Task.Name, Steps: sub.Steps, Manifest: sub.Manifest, IdempotencyKey: o.IdempotencyKey,
		OutputQuota: &quota, Facts: facts, Budget: budgetLimits(sub.Task.Budget), Notify: notifySpec(sub.Task.Notify),
		Progress: progressSpec(sub, o.Vars), Modules: modules, Replay: replay,
	})
	if err == nil && created {
		// This process's workers use the task as parsed here instead of
		// parsing its pinned source again; if that fails they parse it.
		if err := e.specs.Remember(t.ID, sub); err != nil {
			e.log.Warn("submitted task not cached; workers will read it from its manifest", "task", t.ID, "error", err)
		}
	}
	return t, created, err
}

// WorkOptions configure Work.
type WorkOptions struct {
	Name         string        // worker name in lease owners
	Concurrency  int           // attempts at once; 0 = 1
	Task         string        // only this task
	ExitWhenIdle bool          // return when no work is left
	LeaseFor     time.Duration // 0 = 30s
	PollEvery    time.Duration // longest idle wait before looking for work again; 0 = 1s
	OnCommit     func(*ledger.Task)
	// ModelRecord records every live model response of the tasks these
	// workers run in this folder (--model-record), for a later
	// submission's SubmitOptions.ModelReplay; "" for none.
	ModelRecord string

	// Stop, when it is closed, stops Work gracefully: nothing more is
	// claimed, and the attempts in flight run on for up to Grace (0: none)
	// to end and be recorded as usual. Those still running then are
	// cancelled, and their units given back without charging the attempt:
	// ready at once for the next worker, which runs the same attempt
	// again. Work then returns nil.
	Stop  <-chan struct{}
	Grace time.Duration
	// OnStopping, when set, is called once as a stop begins (Stop closed,
	// or ctx ended), with the attempts then in flight; OnStopped as Work
	// returns after it, with what became of them.
	OnStopping func(inFlight int)
	OnStopped  func(StopReport)
}

// StopReport is what a stop of Work did with the attempts in flight.
type StopReport struct {
	InFlight  int // attempts running as the stop began
	Finished  int // attempts that ended, and were recorded, after it began
	GivenBack int // units given back, their attempts not charged
}

// Work claims and runs work units until ctx is done, WorkOptions.Stop is
// closed or, with ExitWhenIdle, no work is left. ctx ending stops at once
// (during a graceful stop's grace too): attempts in flight are cancelled
// and their units given back uncharged, and Work returns ctx's error.
//
// While it runs, Work also delivers the notifications of every task of the
// home (notify blocks, notify.go); before it returns, unless ctx ended, it
// sends those due once more, for up to 10s.
func (e *Engine) Work(ctx context.Context, o WorkOptions) error {
	e.mu.Lock()
	if e.working == nil {
		e.working = map[string]int{}
	}
	e.working[o.Task]++
	e.mu.Unlock()
	defer func() {
		e.mu.Lock()
		e.working[o.Task]--
		e.mu.Unlock()
	}()
	defer e.notify.start(ctx)()
	w := worker.New(worker.Config{
		Store: e.store, Runtime: e.rt, Specs: e.specs, Logger: e.log,
		Name: o.Name, Concurrency: o.Concurrency, LeaseFor: o.LeaseFor, Task: o.Task,
		ExitWhenIdle: o.ExitWhenIdle, OnCommit: o.OnCommit, Workspaces: filepath.Join(e.home, "workspaces"),
		PollEvery: o.PollEvery, Aborts: &e.aborts, ModelRecord: o.ModelRecord,
		Stop: o.Stop, Grace: o.Grace, OnStopping: o.OnStopping, OnStopped: stopReport(o.OnStopped),
		Metrics: e.metrics, Tracer: e.tracer,
	})
	return w.Run(ctx)
}

// stopReport adapts f to the worker's report; nil stays nil.
func stopReport(f func(StopReport)) func(worker.Stopped) {
	if f == nil {
		return nil
	}
	return func(s worker.Stopped) { f(StopReport(s)) }
}

// Working reports whether a Work call of this engine is running that may
// work task id (one for every task, or for that task). A task recorded as
// running that no worker works is interrupted: its process is gone.
func (e *Engine) Working(id string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.working[""] > 0 || (id != "" && e.working[id] > 0)
}

// ErrPluginChanged is returned by CheckPlugins when a pinned module is
// neither in the store nor on disk with the sha256 pinned at submission.
var ErrPluginChanged = errors.New("plugin changed since the task was submitted")

// CheckPlugins verifies that every module pinned in the task's run manifest
// can still be loaded: the store keeps the module bytes of every task
// submitted by this engine, so files on disk do not matter. Tasks submitted
// by older engines, whose modules are not in the store, run from the pinned
// path: for those the file must still be on disk with the same sha256. A
// resume that skipped this would fail the task at its next step; checking
// first lets the user restore the file and resume again.
func (e *Engine) CheckPlugins(id string) error {
	var m *ledger.Manifest
	if err := e.store.Read(func(r ledger.Reader) error {
		var err error
		m, err = r.Manifest(id)
		return err
	}); err != nil {
		return err
	}
	var errs []error
	inStore := map[string]error{} // steps often share a module
	for step, pin := range m.Plugins {
		err, ok := inStore[pin.SHA256]
		if !ok {
			_, err = e.store.Module(pin.SHA256)
			inStore[pin.SHA256] = err
		}
		if err == nil {
			continue
		}
		if !errors.Is(err, ledger.ErrNotFound) {
			errs = append(errs, fmt.Errorf("%w: step %q: %v", ErrPluginChanged, step, err))
			continue
		}
		// Submitted before modules were kept in the store: the worker
		// loads the pinned path.
		sum, err := taskfile.HashFile(pin.Path)
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("%w: step %q: %v", ErrPluginChanged, step, err))
		case sum != pin.SHA256:
			errs = append(errs, fmt.Errorf("%w: step %q: %s has sha256 %s, the task pinned %s", ErrPluginChanged, step, pin.Path, sum, pin.SHA256))
		}
	}
	return errors.Join(errs...)
}

// readModule reads a plugin file named by a task through files: a regular
// file only (taskfile.OpenRegular, on the local disk).
func readModule(files taskfile.Files, path string) ([]byte, error) {
	f, err := files.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(f)
}

// missingModule is the step failure of a plugin that could not be read,
// as a worker loading it reports it.
func missingModule(path string, err error) error {
	if errors.Is(err, fs.ErrNotExist) {
		return fault.Wrap(fault.PluginMissing, err, "plugin "+path+" does not exist")
	}
	return fault.Wrap(fault.PluginMissing, err, "reading plugin "+path+": "+err.Error())
}
