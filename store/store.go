package store

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/hashicorp/go-hclog"
)

// Errors returned by the ledger.
var (
	// ErrNotFound: no task (or unit, or output) with that id.
	ErrNotFound = errors.New("not found")
	// ErrLeaseLost: the lease presented is not the unit's current lease (it
	// expired and was taken over, the unit was reset by a repair, or the task
	// was cancelled). The caller's work must be thrown away.
	ErrLeaseLost = errors.New("lease lost")
	// ErrTerminal: the task already succeeded, failed or was cancelled.
	ErrTerminal = errors.New("task is finished")
)

// Options configure Open. The zero value is a durable on-disk store.
type Options struct {
	// InMemory keeps everything in memory (tests about logic only).
	InMemory bool
	// NoSync skips the fsync at each commit. Only for benchmarks that want to
	// measure everything but the disk.
	NoSync bool
	// Logger receives Badger's own messages (warnings and errors only).
	Logger hclog.Logger
	// Now is the clock; nil means time.Now. Tests inject one.
	Now func() time.Time
	// MaxBatch bounds how many operations share one transaction; 0 = 256.
	MaxBatch int
	// Planner plans fan-out steps when a task's cursor reaches them. A store
	// without one fails tasks that reach a fan-out step.
	Planner Planner
}

// Store is the ledger. It is safe for concurrent use. Badger's directory lock
// makes one Store the only writer of a directory, which is what lets a
// restarted process reclaim the leases of the process before it at once.
type Store struct {
	db       *badger.DB
	now      func() time.Time
	session  string
	maxBatch int
	sync     bool // fsync after transactions that must be durable
	log      hclog.Logger
	plan     Planner
	planHook func() // tests: called after each planning batch that left items to plan
	idx      *index

	mu      sync.Mutex // guards queue and leading
	queue   []*op
	leading bool

	syncer     syncer
	durableOps atomic.Int64 // operations released only after a sync
}

// SyncStats reports how many disk syncs the store performed and how many
// operations waited for one: their ratio is how well commits are grouped.
func (s *Store) SyncStats() (syncs, ops int64) {
	s.syncer.mu.Lock()
	defer s.syncer.mu.Unlock()
	return s.syncer.calls, s.durableOps.Load()
}

// syncer coalesces disk syncs. A caller needs a sync that starts after its
// transaction committed; while one sync runs, every batch that commits
// meanwhile waits for it to end and then shares the next one. Without this,
// overlapping batches each paid a sync of their own (two operations per sync
// on a 10,000-unit fan-out).
type syncer struct {
	mu      sync.Mutex
	cond    *sync.Cond
	running bool
	started uint64 // syncs started
	done    uint64 // the latest sync that finished
	err     error  // its error
	waiting int    // callers waiting for a running sync (tests observe it)
	calls   int64  // syncs performed
}

// sync returns once a call of fn that started after sync was called has
// finished, calling fn itself if no such call is running.
func (y *syncer) sync(fn func() error) error {
	y.mu.Lock()
	defer y.mu.Unlock()
	if y.cond == nil {
		y.cond = sync.NewCond(&y.mu)
	}
	target := y.started + 1
	for y.done < target {
		if y.running {
			y.waiting++
			y.cond.Wait()
			y.waiting--
			continue
		}
		y.running = true
		y.started++
		mine := y.started
		y.calls++
		y.mu.Unlock()
		err := fn()
		y.mu.Lock()
		y.running, y.done, y.err = false, mine, err
		y.cond.Broadcast()
	}
	return y.err
}

// Open opens (creating if needed) the store in dir.
func Open(dir string, o Options) (*Store, error) {
	if o.Logger == nil {
		o.Logger = hclog.NewNullLogger()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.MaxBatch <= 0 {
		o.MaxBatch = 256
	}
	bo := badger.DefaultOptions(dir).
		WithLogger(badgerLogger{o.Logger.Named("badger")}).
		// Durability is by an explicit Sync after each transaction that
		// needs it (see update), not Badger's per-write sync.
		WithSyncWrites(false).
		WithNumVersionsToKeep(1).
		WithMemTableSize(16 << 20).
		WithValueThreshold(64 << 10).
		WithNumCompactors(2).
		WithValueLogFileSize(16 << 20)
	if o.InMemory {
		bo = bo.WithInMemory(true).WithDir("").WithValueDir("")
	}
	db, err := badger.Open(bo)
	if err != nil {
		if strings.Contains(err.Error(), "Cannot acquire directory lock") {
			return nil, fmt.Errorf("store %s is in use by another lhengine process: %w", dir, err)
		}
		return nil, fmt.Errorf("open store %s: %w", dir, err)
	}
	s := &Store{db: db, now: o.Now, session: newSessionID(), maxBatch: o.MaxBatch, log: o.Logger,
		plan: o.Planner, idx: newIndex(), sync: !o.NoSync && !o.InMemory}
	if err := s.rebuildIndex(); err != nil {
		db.Close()
		return nil, fmt.Errorf("open store %s: reading runnable tasks: %w", dir, err)
	}
	return s, nil
}

// rebuildIndex fills the claim index from the records: every runnable task,
// the ready units of its current step, and its leased units (leases of an
// earlier session are taken back by the first claim).
func (s *Store) rebuildIndex() error {
	return s.view(func(t *tx) error {
		for _, k := range t.keys([]byte("a/")) {
			id := string(k[2:])
			task := new(Task)
			if err := t.getJSON(taskKey(id), task); err != nil {
				return err
			}
			if !task.Status.runnable() {
				continue
			}
			s.idx.addActive(id)
			st := task.Steps[task.Cursor]
			if !st.Planned {
				s.idx.needPlan(id) // planning was cut short: it resumes
			}
			err := t.scan(unitStepPrefix(id, task.Cursor), func(_, val []byte) (bool, error) {
				u := new(Unit)
				if err := json.Unmarshal(val, u); err != nil {
					return false, err
				}
				if u.Pass != st.Pass {
					return true, nil // a unit of an earlier pass
				}
				r := unitRef{id, u.Step, u.Item}
				switch u.State {
				case UnitReady:
					s.idx.addReady(r, u.NotBefore)
				case UnitLeased:
					s.idx.leases[r] = leaseRec{owner: u.Owner, until: u.LeaseUntil}
				}
				return true, nil
			})
			if err != nil {
				return err
			}
		}
		return nil
	})
}

// Close closes the database. Operations in flight must have returned.
func (s *Store) Close() error { return s.db.Close() }

// Session identifies this opening of the store. Lease owners are prefixed with
// it, so leases left by an earlier process are recognised as dead.
func (s *Store) Session() string { return s.session }

// Owner returns the lease owner name for a worker of this store session.
func (s *Store) Owner(worker string) string { return s.session + "/" + worker }

func ownerSession(owner string) string {
	if i := strings.IndexByte(owner, '/'); i >= 0 {
		return owner[:i]
	}
	return owner
}

func newSessionID() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// ---- group commit ----

// op is one state change waiting for a transaction.
type op struct {
	fn   func(*tx) error
	err  error
	done chan struct{} // closed when fn's transaction committed (or failed)
	lead chan struct{} // signalled when this op's goroutine must lead the next batch
}

// update runs fn in a read-write transaction, sharing the transaction (and its
// fsync) with concurrent callers. fn may run more than once; it must derive
// everything from what it reads through tx.
func (s *Store) update(ctx context.Context, fn func(*tx) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	o := &op{fn: fn, done: make(chan struct{}), lead: make(chan struct{}, 1)}
	s.mu.Lock()
	s.queue = append(s.queue, o)
	if s.leading {
		s.mu.Unlock()
		select {
		case <-o.done:
			return o.err
		case <-o.lead:
		}
		s.mu.Lock()
	} else {
		s.leading = true
	}
	// This goroutine leads: run the queue in batches until o's batch has
	// run. Leadership passes on as soon as that batch's transaction has
	// committed, so the next batch's transaction overlaps this one's sync.
	for {
		n := min(len(s.queue), s.maxBatch)
		batch := s.queue[:n:n]
		s.queue = s.queue[n:]
		mine := slices.Contains(batch, o)
		s.mu.Unlock()
		sync := s.runBatch(batch)
		s.mu.Lock()
		if mine {
			if len(s.queue) > 0 {
				s.queue[0].lead <- struct{}{}
			} else {
				s.leading = false
			}
			s.mu.Unlock()
			s.complete(batch, sync)
			return o.err
		}
		s.mu.Unlock()
		s.complete(batch, sync)
		s.mu.Lock()
	}
}

// complete makes a committed batch durable when it must be, then releases
// its callers. A failed sync fails every operation of the batch.
func (s *Store) complete(batch []*op, sync bool) {
	if sync && s.sync {
		s.durableOps.Add(int64(len(batch)))
		if err := s.syncer.sync(s.db.Sync); err != nil {
			for _, o := range batch {
				if o.err == nil {
					o.err = fmt.Errorf("sync: %w", err)
				}
			}
		}
	}
	for _, o := range batch {
		close(o.done)
	}
}

// runBatch runs the ops' transactions and records each op's error. It
// reports whether any op that succeeded must be synced to disk.
func (s *Store) runBatch(batch []*op) (sync bool) {
	if len(batch) > 1 {
		if sync, ok := s.tryBatch(batch); ok {
			return sync
		}
	}
	for _, o := range batch {
		sync = s.runAlone(o) || sync
	}
	return sync
}

// tryBatch runs all ops in one transaction. It returns ok false, having
// changed nothing, if an op failed after writing or the transaction could not
// commit; the caller then runs each op alone.
func (s *Store) tryBatch(batch []*op) (sync, ok bool) {
	txn := s.db.NewTransaction(true)
	defer txn.Discard()
	errs := make([]error, len(batch))
	txs := make([]*tx, len(batch))
	shared := &batchState{}
	for i, o := range batch {
		txs[i] = &tx{txn: txn, s: s, b: shared}
		errs[i] = o.fn(txs[i])
		if errs[i] != nil && txs[i].wrote {
			return false, false
		}
	}
	if err := txn.Commit(); err != nil {
		return false, false
	}
	sync = s.applyIndex(txs, errs)
	for i, o := range batch {
		o.err = errs[i]
	}
	return sync, true
}

func (s *Store) runAlone(o *op) (sync bool) {
	txn := s.db.NewTransaction(true)
	defer txn.Discard()
	t := &tx{txn: txn, s: s}
	o.err = o.fn(t)
	if o.err == nil {
		o.err = txn.Commit()
		if o.err == nil {
			sync = s.applyIndex([]*tx{t}, []error{nil})
		}
	}
	return sync
}

// applyIndex runs after a transaction committed: it applies the index
// changes of the operations that succeeded and reports whether any of them
// must be durable before its caller hears back.
func (s *Store) applyIndex(txs []*tx, errs []error) (durable bool) {
	s.idx.mu.Lock()
	defer s.idx.mu.Unlock()
	for i, t := range txs {
		if errs[i] != nil {
			continue
		}
		durable = durable || t.durable
		for _, fn := range t.afters {
			fn(s.idx)
		}
	}
	return durable
}

// view runs fn in a read-only transaction.
func (s *Store) view(fn func(*tx) error) error {
	return s.db.View(func(txn *badger.Txn) error { return fn(&tx{txn: txn, s: s}) })
}

// ---- transactions ----

// tx wraps a Badger transaction with typed record access. It records whether
// anything was written, so that a failed operation can be told apart from a
// half-applied one.
type tx struct {
	txn     *badger.Txn
	s       *Store
	wrote   bool
	durable bool           // the operation must be on disk before it returns
	afters  []func(*index) // index changes to apply once committed
	b       *batchState    // shared by the operations of one transaction
}

// batchState is what the operations sharing one transaction must see of
// each other that the index does not show yet: the index changes only once
// the transaction commits, so without it two claims of one batch would both
// offer the same ready unit (one wins, the other claims nothing) or both
// take back the same expired lease.
type batchState struct {
	taken map[unitRef]bool // units leased by an operation of the batch
	ready []unitRef        // units made ready by an operation of the batch
}

// batch returns the transaction's batch state.
func (t *tx) batch() *batchState {
	if t.b == nil {
		t.b = &batchState{}
	}
	if t.b.taken == nil {
		t.b.taken = map[unitRef]bool{}
	}
	return t.b
}

// after queues an index change to apply if and when the transaction commits.
func (t *tx) after(fn func(*index)) { t.afters = append(t.afters, fn) }

func (t *tx) getJSON(key []byte, v any) error {
	item, err := t.txn.Get(key)
	if errors.Is(err, badger.ErrKeyNotFound) {
		return ErrNotFound
	}
	if err != nil {
		return err
	}
	return item.Value(func(b []byte) error { return json.Unmarshal(b, v) })
}

func (t *tx) getRaw(key []byte) ([]byte, error) {
	item, err := t.txn.Get(key)
	if errors.Is(err, badger.ErrKeyNotFound) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, err
	}
	return item.ValueCopy(nil)
}

func (t *tx) putJSON(key []byte, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return t.put(key, b)
}

func (t *tx) put(key, val []byte) error {
	t.wrote = true
	return t.txn.Set(key, val)
}

func (t *tx) del(key []byte) error {
	t.wrote = true
	return t.txn.Delete(key)
}

// keys returns the keys under prefix, in order.
func (t *tx) keys(prefix []byte) [][]byte {
	opts := badger.DefaultIteratorOptions
	opts.PrefetchValues = false
	opts.Prefix = prefix
	it := t.txn.NewIterator(opts)
	defer it.Close()
	var out [][]byte
	for it.Rewind(); it.Valid(); it.Next() {
		out = append(out, it.Item().KeyCopy(nil))
	}
	return out
}

// scan calls fn for each key and value under prefix, in order, until fn
// returns false or an error.
func (t *tx) scan(prefix []byte, fn func(key, val []byte) (bool, error)) error {
	opts := badger.DefaultIteratorOptions
	opts.Prefix = prefix
	opts.PrefetchSize = 64
	it := t.txn.NewIterator(opts)
	defer it.Close()
	for it.Rewind(); it.Valid(); it.Next() {
		item := it.Item()
		var more bool
		err := item.Value(func(v []byte) error {
			var err error
			more, err = fn(item.Key(), v)
			return err
		})
		if err != nil {
			return err
		}
		if !more {
			return nil
		}
	}
	return nil
}

// badgerLogger adapts hclog to Badger's logger, keeping warnings and errors.
type badgerLogger struct{ l hclog.Logger }

func (b badgerLogger) Errorf(f string, a ...any)   { b.l.Error(strings.TrimSpace(fmt.Sprintf(f, a...))) }
func (b badgerLogger) Warningf(f string, a ...any) { b.l.Warn(strings.TrimSpace(fmt.Sprintf(f, a...))) }
func (b badgerLogger) Infof(string, ...any)        {}
func (b badgerLogger) Debugf(string, ...any)       {}
