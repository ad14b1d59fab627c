package guest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/hashicorp/go-hclog"
	"github.com/tetratelabs/wazero"

	"github.com/lhengine/lhengine/fault"
)

// Config configures a Runtime.
type Config struct {
	// CacheDir is where compiled modules are kept between processes (a
	// wazero compilation cache, keyed by module content, wazero version and
	// CPU: homes and processes may share one, at once too). It is created
	// owner-only; one another user owns is refused (prepareCacheDir). Empty
	// keeps them in memory only.
	CacheDir string
	// Logger receives the runtime's own messages. Nil discards them.
	Logger hclog.Logger
	// NoInstanceReuse runs every attempt in a fresh instance, stateless
	// plugins' too (reuse.go): for comparisons and diagnosis.
	NoInstanceReuse bool
}

// Runtime loads and runs plugins. It is safe for concurrent use. Each
// distinct module (by sha256) is compiled once per Runtime; with a CacheDir
// the compiled code also survives the process.
//
// A Runtime holds native code and must be closed.
type Runtime struct {
	rt    wazero.Runtime
	cache wazero.CompilationCache // nil without CacheDir
	// cacheDir is CacheDir, and closeOnContextDone the runtime's setting:
	// repairCache compiles as rt does.
	cacheDir           string
	closeOnContextDone bool
	logger             hclog.Logger
	have               map[string]map[string]signature // host functions by module and name

	noReuse bool
	pool    instancePool // idle instances of stateless plugins
	starts  atomic.Int64 // instances of stateless plugins started

	failedStarts sync.Map // startKey -> true

	mu      sync.Mutex
	closed  bool
	modules map[string]*compiledEntry // by sha256
}

// compiledEntry is one module compiled (or refused) once; ready is closed
// when compiled, info and err are set.
type compiledEntry struct {
	ready    chan struct{}
	compiled wazero.CompiledModule
	size     int // bytes of the module
	info     Info
	sec      sections
	reuse    bool // stateless, and its instances can be reused
	nglob    int  // globals exported for the image
	err      error
}

// NewRuntime creates a Runtime. It fails only if CacheDir cannot be used.
func NewRuntime(ctx context.Context, cfg Config) (*Runtime, error) {
	return newRuntime(ctx, cfg, true)
}

// newRuntime is NewRuntime with the choice of stopping guests when their
// context is done, which only benchmarks turn off: without it a guest that
// never returns cannot be stopped.
// newRuntimeMu serialises the construction of wazero runtimes (see newRuntime).
var newRuntimeMu sync.Mutex

func newRuntime(ctx context.Context, cfg Config, closeOnContextDone bool) (*Runtime, error) {
	logger := cfg.Logger
	if logger == nil {
		logger = hclog.NewNullLogger()
	}
	rc := wazero.NewRuntimeConfig().WithCloseOnContextDone(closeOnContextDone)
	var cache wazero.CompilationCache
	// wazero caches its own version string lazily and without a lock the
	// first time a compilation cache or compiler engine is built; two
	// runtimes created at once race on it. Building them one at a time
	// costs nothing: runtimes are created once per process.
	newRuntimeMu.Lock()
	defer newRuntimeMu.Unlock()
	if cfg.CacheDir != "" {
		if err := prepareCacheDir(cfg.CacheDir); err != nil {
			return nil, err
		}
		var err error
		if cache, err = wazero.NewCompilationCacheWithDir(cfg.CacheDir); err != nil {
			return nil, err
		}
		rc = rc.WithCompilationCache(cache)
	}
	rt := wazero.NewRuntimeWithConfig(ctx, rc)
	if err := instantiateHostModules(ctx, rt); err != nil {
		rt.Close(ctx)
		if cache != nil {
			cache.Close(ctx)
		}
		return nil, err
	}
	return &Runtime{
		rt:       rt,
		cache:    cache,
		cacheDir: cfg.CacheDir, closeOnContextDone: closeOnContextDone,
		logger:  logger,
		have:    provided(rt),
		modules: map[string]*compiledEntry{},
		noReuse: cfg.NoInstanceReuse,
	}, nil
}

// Close releases the compiled modules and closes the idle instances of
// stateless plugins. Plugins loaded from r cannot run afterwards. Close
// waits for nothing else: attempts still running fail.
func (r *Runtime) Close(ctx context.Context) error {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil
	}
	r.closed = true
	r.mu.Unlock()
	r.pool.close()
	err := r.rt.Close(ctx)
	if r.cache != nil {
		err = errors.Join(err, r.cache.Close(ctx))
	}
	return err
}

// Load reads the module at path, checks its sha256 against wantSHA256
// (lower- or upper-case hex, optionally prefixed "sha256:"; empty skips the
// check), compiles it (once per Runtime) and checks it against the ABI.
//
// Errors are *fault.StepError of kind PluginMissing (the file cannot be
// read), HashMismatch, BadModule (not Wasm, or not a WASI command) or
// ABIMismatch (imports this engine does not provide).
func (r *Runtime) Load(ctx context.Context, path, wantSHA256 string) (*Plugin, error) {
	wasm, err := os.ReadFile(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fault.Wrap(fault.PluginMissing, err, "plugin "+path+" does not exist")
		}
		return nil, fault.Wrap(fault.PluginMissing, err, "reading plugin "+path+": "+err.Error())
	}
	sum := sha256.Sum256(wasm)
	got := hex.EncodeToString(sum[:])
	if wantSHA256 != "" {
		want := strings.ToLower(strings.TrimPrefix(strings.TrimSpace(wantSHA256), "sha256:"))
		if want != got {
			return nil, fault.New(fault.HashMismatch, "plugin %s has sha256 %s, want %s", path, got, want)
		}
	}
	return r.load(ctx, filepath.Base(path), got, wasm)
}

// LoadBytes is Load for a module already in memory; name is what errors
// and logs call it.
func (r *Runtime) LoadBytes(ctx context.Context, name string, wasm []byte) (*Plugin, error) {
	sum := sha256.Sum256(wasm)
	return r.load(ctx, name, hex.EncodeToString(sum[:]), wasm)
}

// LoadPinned loads the module whose sha256 is sum (lower-case hex), calling
// fetch for its bytes only when the Runtime has not compiled it yet: a
// module pinned by many tasks is fetched and compiled once. The bytes fetch
// returns are checked against sum; name is what errors and logs call the
// module.
//
// Errors are those of fetch (returned as they are), a *fault.StepError of
// kind HashMismatch when the bytes do not have the sha256 sum, or those of
// Load.
func (r *Runtime) LoadPinned(ctx context.Context, name, sum string, fetch func() ([]byte, error)) (*Plugin, error) {
	r.mu.Lock()
	e, ok := r.modules[sum]
	r.mu.Unlock()
	if ok {
		select {
		case <-e.ready:
			if e.err == nil {
				return e.plugin(r, name, sum), nil
			}
		case <-ctx.Done():
			return nil, fault.Wrap(fault.Internal, ctx.Err(), "loading "+name+": "+ctx.Err().Error())
		}
	}
	wasm, err := fetch()
	if err != nil {
		return nil, err
	}
	got := sha256.Sum256(wasm)
	if hex.EncodeToString(got[:]) != sum {
		return nil, fault.New(fault.HashMismatch, "plugin %s has sha256 %s, want %s", name, hex.EncodeToString(got[:]), sum)
	}
	return r.load(ctx, name, sum, wasm)
}

func (r *Runtime) load(ctx context.Context, name, sum string, wasm []byte) (*Plugin, error) {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil, fault.New(fault.Internal, "loading %s: runtime is closed", name)
	}
	e, ok := r.modules[sum]
	if !ok {
		e = &compiledEntry{ready: make(chan struct{})}
		r.modules[sum] = e
	}
	r.mu.Unlock()

	if ok {
		select {
		case <-e.ready:
		case <-ctx.Done():
			return nil, fault.Wrap(fault.Internal, ctx.Err(), "loading "+name+": "+ctx.Err().Error())
		}
	} else {
		r.compile(ctx, e, name, sum, wasm)
	}
	if e.err != nil {
		return nil, prefixed(e.err, name)
	}
	return e.plugin(r, name, sum), nil
}

func (e *compiledEntry) plugin(r *Runtime, name, sum string) *Plugin {
	return &Plugin{Name: name, SHA256: sum, Size: e.size, Info: e.info, r: r, compiled: e.compiled, sec: e.sec,
		cfg: moduleConfig(name), reuse: e.reuse, nglob: e.nglob}
}

// compile fills e and closes e.ready. A failure caused by ctx is not kept,
// so the next Load tries again; any other failure is a property of the
// bytes and is kept.
func (r *Runtime) compile(ctx context.Context, e *compiledEntry, name, sum string, wasm []byte) {
	defer close(e.ready)
	e.size = len(wasm)
	log := r.logger.With("plugin", name, "sha256", sum[:12])
	compiled, reuse, nglob, err := compileForRun(ctx, r.rt, wasm)
	if err != nil && r.cache != nil && ctx.Err() == nil {
		// A compile refused because of the cache's entry, not the bytes.
		n, rerr := r.repairCache(ctx, wasm)
		switch {
		case rerr != nil:
			log.Warn("the compilation cache could not be checked", "dir", r.cacheDir, "error", rerr)
		case n > 0:
			log.Warn("damaged compilation cache entries replaced", "dir", r.cacheDir, "entries", n, "error", err)
			compiled, reuse, nglob, err = compileForRun(ctx, r.rt, wasm)
		}
	}
	if err == nil {
		e.info, e.sec, err = describe(wasm, compiled, r.have)
		if err != nil {
			compiled.Close(ctx)
		} else {
			e.compiled, e.reuse, e.nglob = compiled, reuse, nglob
		}
	}
	e.err = err
	if err != nil {
		log.Debug("plugin refused", "error", err)
		if fault.KindOf(err) == fault.Internal {
			r.mu.Lock()
			delete(r.modules, sum)
			r.mu.Unlock()
		}
		return
	}
	log.Debug("plugin compiled", "abi", e.info.ABI, "reused_instances", e.reuse)
}

// prefixed returns err with the plugin's name in front of its message.
func prefixed(err error, name string) error {
	var se *fault.StepError
	if errors.As(err, &se) {
		return &fault.StepError{Kind: se.Kind, Message: "plugin " + name + ": " + se.Message, Err: se.Err}
	}
	return err
}
