package benchrun

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"
	"github.com/tetratelabs/wazero/sys"
)

// fsyncFloor rewrites the first 4 KiB of one file and fsyncs it, n times,
// and returns how long each write-and-sync took.
type fsyncFloor struct {
	f   *os.File
	buf []byte
}

func newFsyncFloor(dir string) (*fsyncFloor, error) {
	f, err := os.OpenFile(filepath.Join(dir, "fsync.dat"), os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return nil, err
	}
	buf := bytes.Repeat([]byte{'x'}, 4<<10)
	// The block exists before the first timed sync: later rewrites change
	// no file size, as the rewrite of a preallocated log does not.
	_, err = f.WriteAt(buf, 0)
	if err == nil {
		err = f.Sync()
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return &fsyncFloor{f: f, buf: buf}, nil
}

func (s *fsyncFloor) run(ctx context.Context, n int) ([]float64, error) {
	ops := make([]float64, 0, n)
	for i := range n {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		start := time.Now()
		binary.LittleEndian.PutUint64(s.buf, uint64(i))
		if _, err := s.f.WriteAt(s.buf, 0); err != nil {
			return nil, err
		}
		if err := s.f.Sync(); err != nil {
			return nil, err
		}
		ops = append(ops, ms(time.Since(start)))
	}
	return ops, nil
}

func (s *fsyncFloor) close() error { return s.f.Close() }

// badgerFloor is a Badger DB whose transactions are durable when they
// return. With SyncWrites Badger syncs each commit itself, grouping the
// writes of concurrent transactions into one sync (its group commit).
// Without, the writers share a DB.Sync the way the engine's store does
// (coalesce): a writer whose transaction committed waits for a sync that
// began after its commit; one sync covers every transaction committed
// before it began.
type badgerFloor struct {
	db       *badger.DB
	seq      uint64 // keys are never rewritten across runs
	coalesce bool
	mu       sync.Mutex
	cond     *sync.Cond
	commits  uint64 // transactions committed
	synced   uint64 // transactions covered by a finished sync
	syncing  bool
	syncs    int // DB.Sync calls of the last run
}

func newBadgerFloor(dir string, coalesce bool) (*badgerFloor, error) {
	db, err := badger.Open(badger.DefaultOptions(dir).
		WithSyncWrites(!coalesce).
		WithLogger(nil).
		WithNumVersionsToKeep(1).
		WithValueLogFileSize(16 << 20))
	if err != nil {
		return nil, err
	}
	s := &badgerFloor{db: db, coalesce: coalesce}
	s.cond = sync.NewCond(&s.mu)
	return s, nil
}

// run has g goroutines commit n small durable transactions in all and
// returns transactions per second. Every goroutine it starts has returned
// when it returns.
func (s *badgerFloor) run(ctx context.Context, g, n int) (float64, error) {
	val := bytes.Repeat([]byte{'v'}, 100)
	base := s.seq
	s.seq += uint64(n)
	s.syncs = 0
	var wg sync.WaitGroup
	errs := make([]error, g)
	start := time.Now()
	for w := range g {
		wg.Go(func() {
			key := make([]byte, 8)
			// Goroutine w writes transactions w, w+g, w+2g, ... below n.
			for i := w; i < n; i += g {
				if err := ctx.Err(); err != nil {
					errs[w] = err
					return
				}
				binary.BigEndian.PutUint64(key, base+uint64(i))
				if err := s.db.Update(func(txn *badger.Txn) error { return txn.Set(key, val) }); err != nil {
					errs[w] = err
					return
				}
				if s.coalesce {
					if err := s.durable(); err != nil {
						errs[w] = err
						return
					}
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	if err := errors.Join(errs...); err != nil {
		return 0, err
	}
	return float64(n) / elapsed.Seconds(), nil
}

// durable returns once a sync that began after the caller's transaction
// committed has finished: the first writer to find none under way syncs
// for everyone committed so far; the others wait for it, or for the next.
func (s *badgerFloor) durable() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.commits++
	mine := s.commits
	for s.synced < mine {
		if s.syncing {
			s.cond.Wait()
			continue
		}
		s.syncing = true
		upTo := s.commits
		s.mu.Unlock()
		err := s.db.Sync()
		s.mu.Lock()
		s.syncing = false
		s.syncs++
		if err != nil {
			s.cond.Broadcast()
			return err
		}
		s.synced = upTo
		s.cond.Broadcast()
	}
	return nil
}

func (s *badgerFloor) close() error { return s.db.Close() }

// instanceFloor runs a WASI command module in plain wazero (not the
// engine's guest runtime, which is internal to the engine): compiled once,
// then a fresh instance per run with the request on stdin, as the engine
// runs an attempt but without the lhengine_v1 host module, memory pooling
// or the engine's output checks.
type instanceFloor struct {
	rt  wazero.Runtime
	mod wazero.CompiledModule
	cfg wazero.ModuleConfig
	req []byte
	// limit is how long run may take beyond 10 ms an instance.
	limit time.Duration
}

// newRuntimeMu serialises newInstanceFloor's construction of wazero
// runtimes. wazero caches its version string the first time a runtime is
// built, without a lock, so the first two runtimes of a process must not be
// built at once; the engine serialises its own. Run builds this runtime
// before opening the engine, so in one Run the first is built before the
// second; a process running Run beside other engines (a test binary) builds
// one runtime before starting them.
var newRuntimeMu sync.Mutex

func newInstanceFloor(ctx context.Context, wasm []byte) (*instanceFloor, error) {
	newRuntimeMu.Lock()
	rt := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfig().WithCloseOnContextDone(true))
	newRuntimeMu.Unlock()
	if _, err := wasi_snapshot_preview1.Instantiate(ctx, rt); err != nil {
		rt.Close(ctx)
		return nil, err
	}
	mod, err := rt.CompileModule(ctx, wasm)
	if err != nil {
		rt.Close(ctx)
		return nil, fmt.Errorf("compiling the plugin: %w", err)
	}
	for _, imp := range mod.ImportedFunctions() {
		if m, name, _ := imp.Import(); m != wasi_snapshot_preview1.ModuleName {
			rt.Close(ctx)
			return nil, fmt.Errorf("the plugin imports %s.%s: the instance floor runs plain wazero with WASI only; "+
				"use a plugin that imports nothing else, such as testdata/guests/c/pipeline.c", m, name)
		}
	}
	return &instanceFloor{
		rt:    rt,
		mod:   mod,
		cfg:   wazero.NewModuleConfig().WithName("").WithArgs("step").WithStartFunctions("_start").WithStderr(io.Discard),
		limit: time.Minute,
		req:   []byte(`{"abi":1,"task_id":"01BENCH","task_name":"bench","step":"s0","item":null,"attempt":1,"input":{"mode":"echo"}}`),
	}, nil
}

// run instantiates and runs the module n times and returns how long each
// instance took. A plugin that does not finish is stopped after a minute
// plus 10 ms an instance.
func (s *instanceFloor) run(ctx context.Context, n int) ([]float64, error) {
	limit := s.limit + time.Duration(n)*10*time.Millisecond
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	var out bytes.Buffer
	ops := make([]float64, 0, n)
	for range n {
		start := time.Now()
		out.Reset()
		cfg := s.cfg.WithStdin(bytes.NewReader(s.req)).WithStdout(&out)
		m, err := s.rt.InstantiateModule(ctx, s.mod, cfg)
		var exit *sys.ExitError
		if errors.As(err, &exit) && exit.ExitCode() == 0 {
			err = nil
		}
		if err != nil && ctx.Err() == context.DeadlineExceeded {
			return nil, fmt.Errorf("%d instances of the plugin took more than %s: is it a step that returns at once for {\"mode\":\"echo\"}?", n, limit)
		}
		if err != nil {
			return nil, fmt.Errorf("running the plugin: %w", err)
		}
		if m != nil {
			if err := m.Close(ctx); err != nil {
				return nil, err
			}
		}
		if !bytes.Contains(out.Bytes(), []byte(`"output"`)) {
			return nil, fmt.Errorf("the plugin answered %.200q to an echo request; want a result with an output", out.String())
		}
		ops = append(ops, ms(time.Since(start)))
	}
	return ops, nil
}

func (s *instanceFloor) close(ctx context.Context) error { return s.rt.Close(ctx) }

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
