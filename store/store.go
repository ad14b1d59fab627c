package store

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/badger/v4/options"
	"github.com/hashicorp/go-hclog"

	"github.com/lhengine/lhengine/internal/diskfree"
	"github.com/lhengine/lhengine/internal/holdpoint"
	"github.com/lhengine/lhengine/ledger"
	"github.com/lhengine/lhengine/store/internal/approval"
	"github.com/lhengine/lhengine/store/internal/blob"
	"github.com/lhengine/lhengine/store/internal/budget"
	"github.com/lhengine/lhengine/store/internal/filecheck"
	"github.com/lhengine/lhengine/store/internal/group"
	"github.com/lhengine/lhengine/store/internal/index"
	"github.com/lhengine/lhengine/store/internal/kv"
	"github.com/lhengine/lhengine/store/internal/lease"
	"github.com/lhengine/lhengine/store/internal/logsync"
	"github.com/lhengine/lhengine/store/internal/models"
	"github.com/lhengine/lhengine/store/internal/outbox"
	"github.com/lhengine/lhengine/store/internal/pgkv"
	"github.com/lhengine/lhengine/store/internal/quota"
	"github.com/lhengine/lhengine/store/internal/retention"
	"github.com/lhengine/lhengine/store/internal/storedir"
)

// failedError is ErrStoreFailed with its cause.
type failedError struct{ cause error }

func (e *failedError) Error() string {
	return fmt.Sprintf("%v: disk sync failed (%v); the outcome of the writes that waited for it is unknown "+
		"(they may or may not be on disk) and no write is accepted any more: close and reopen the store "+
		"(restart lhengine), then check the task", ledger.ErrStoreFailed, e.cause)
}

func (e *failedError) Is(target error) bool { return target == ledger.ErrStoreFailed }
func (e *failedError) Unwrap() error        { return e.cause }

// Options configure Open. The zero value is a durable on-disk store.
type Options struct {
	// InMemory keeps everything in memory (tests about logic only).
	InMemory bool
	// NoSync skips the fsync at each commit. Only for benchmarks that want to
	// measure everything but the disk.
	NoSync bool
	// Logger receives Badger's own messages: errors and warnings at their
	// level, the rest at debug and trace.
	Logger hclog.Logger
	// Now is the clock; nil means time.Now. Tests inject one.
	Now func() time.Time
	// MaxBatch bounds how many operations share one transaction; 0 = 256.
	MaxBatch int
	// Planner plans fan-out steps when a task's cursor reaches them. A store
	// without one fails tasks that reach a fan-out step.
	Planner ledger.Planner
	// AllowDamaged opens a store that failed an integrity check (see
	// ErrDamaged) instead of refusing it, with a warning on Logger. What is
	// missing stays missing; the high-water mark moves on with the next sync.
	AllowDamaged bool
	// ReadOnly opens the store without taking the write lock: every write
	// fails with ErrReadOnly. Badger refuses it for a store whose log must be
	// replayed (one that was not closed).
	ReadOnly bool
	// MinFreeBytes is the free-space floor: writes fail with ErrNoSpace
	// while the store's file system has less free space. 0 means
	// DefaultMinFreeBytes; negative disables the check.
	MinFreeBytes int64

	markEvery time.Duration                 // high-water mark interval; 0 = one second
	memTable  int64                         // memtable size; 0 = 8 MiB (tests use less)
	vlogFile  int64                         // value log file size; 0 = 16 MiB (tests use less)
	syncFn    func(sync func() error) error // wraps the disk sync (tests inject failures, record images)
	freeFn    func(string) (int64, error)
	// filesChecked skips the check of the files (Verify has just run it).
	filesChecked bool
}

// Store is the ledger. It is safe for concurrent use. Badger's directory lock
// makes one Store the only writer of a directory, which is what lets a
// restarted process reclaim the leases of the process before it at once.
type Store struct {
	db       *badger.DB
	now      func() time.Time
	session  string
	sync     bool // fsync after transactions that must be durable
	log      hclog.Logger
	plan     ledger.Planner
	kv       *kv.DB // typed access to the records, and what transactions share
	planHook func() // tests: called after each planning batch that left items to plan
	idx      *index.Index

	group group.Queue[func(*kv.Tx) error] // the group commit: runBatch, then complete

	syncer     logsync.Coalescer
	durableOps atomic.Int64 // operations released only after a sync

	dir       string
	readOnly  bool
	syncFn    func() error      // the disk sync: logs.Sync (db.Sync on Windows), wrapped by tests
	logs      *logsync.Logs     // nil unless the store syncs
	seq       uint64            // number of the latest sync (only syncDisk changes it)
	synced    atomic.Uint64     // number of the latest sync that succeeded
	commits   syncedCommits     // which commits are on disk (ReadSynced)
	roErr     error             // why writes are refused (read-only store)
	mark      *filecheck.Marker // high-water mark; nil for in-memory or unsynced stores
	opened    openedMark        // the sync sequence and mark Open found (Verify reports them)
	space     *storedir.Floor
	blobs     blob.Store                  // modules, artifacts, replay sets
	retention retention.Retention         // Remove, GC, ReclaimSpace
	inflight  quota.Inflight              // artifact puts between their quota check and their charge
	failure   atomic.Pointer[failedError] // set once a sync failed
	changes   changes                     // wakes Changed() watchers after each batch
	notified  changes                     // wakes NotificationsChanged() watchers (notify.go)
	others    changes                     // wakes OthersChanged() watchers (watch.go)
	events    outbox.Events               // appends events, with their outbox entries
	budgets   budget.Budgets              // checks, pauses for and raises budgets
	leases    lease.Leases                // claims, heartbeats, releases
	models    models.Journal              // the model journal
	approvals approval.Approvals          // units waiting for people
	lock      *storedir.Lock              // held from before the checks until Close
	pg        *pgkv.Backend               // the PostgreSQL database, when it is the backend (db is nil then)
	peers     *peers                      // the other processes of a PostgreSQL store (postgres.go)
	stopPeers context.CancelFunc          // stops the beat and the listener
	peersDone sync.WaitGroup
	shapes    map[string]string // by task: its shape when reindex last read it whole (postgres.go)
	wholes    int               // how many tasks reindex read whole
	contended atomic.Int64      // until when (unix ns) write transactions are exclusive (beginWrite)
}

// failed returns the store's failure, or nil.
func (s *Store) failed() error {
	if f := s.failure.Load(); f != nil {
		return f
	}
	return nil
}

// SyncStats reports how many disk syncs the store performed and how many
// operations waited for one: their ratio is how well commits are grouped.
func (s *Store) SyncStats() (syncs, ops int64) {
	return s.syncer.Calls(), s.durableOps.Load()
}

// setDefaults fills the options left zero.
func (o *Options) setDefaults() {
	if o.Logger == nil {
		o.Logger = hclog.NewNullLogger()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.MaxBatch <= 0 {
		o.MaxBatch = 256
	}
	if o.MinFreeBytes == 0 {
		o.MinFreeBytes = DefaultMinFreeBytes
	}
	if o.markEvery <= 0 {
		o.markEvery = time.Second
	}
	if o.memTable <= 0 {
		// Badger builds the table of a full memtable in the Go heap, in
		// buffers of two to four times its size that it keeps pooled:
		// 8 MiB memtables halved that memory against 16 MiB without
		// costing throughput (docs/BENCHMARKS.md, "Memory").
		o.memTable = 8 << 20
	}
	if o.vlogFile <= 0 {
		o.vlogFile = 16 << 20
	}
	if o.freeFn == nil {
		o.freeFn = diskfree.Bytes
	}
}

// checkFilesAtOpen checks the store's files before Badger opens them
// (filecheck.Check): a damaged store is refused unless o.AllowDamaged, and
// then its damaged files are set aside (unless read-only). It returns what
// it found.
func checkFilesAtOpen(dir string, o Options) ([]Finding, error) {
	if o.InMemory || o.filesChecked {
		return nil, nil
	}
	found, err := filecheck.Opening{Dir: dir, AllowDamaged: o.AllowDamaged, ReadOnly: o.ReadOnly, Log: o.Logger}.Files()
	if err != nil {
		return nil, err
	}
	if len(found) > 0 && !o.AllowDamaged {
		return nil, &DamagedError{Dir: dir, Findings: findings(found)}
	}
	return findings(found), nil
}

// badgerOptions are the Badger options of a store in dir.
func badgerOptions(dir string, o Options) badger.Options {
	bo := badger.DefaultOptions(dir).
		WithLogger(badgerLogger{o.Logger.Named("badger")}).
		// Durability is by an explicit Sync after each transaction that
		// needs it (see update), not Badger's per-write sync.
		WithSyncWrites(false).
		WithNumVersionsToKeep(1).
		WithMemTableSize(o.memTable).
		WithValueThreshold(kv.ValueThreshold).
		WithNumCompactors(2).
		WithValueLogFileSize(o.vlogFile).
		// Badger caches decompressed table blocks in the Go heap, 256 MiB
		// by default, which the garbage collector's headroom adds to
		// resident memory; a fan-out's reads are of recent keys, mostly
		// still in memtables (docs/BENCHMARKS.md, "Memory").
		WithBlockCacheSize(8 << 20).
		// Every block is checked when read from disk, values in the value
		// log too. Whole tables are checked before Badger opens them
		// (filecheck.Check), where a damaged one cannot make Badger skip it.
		WithChecksumVerificationMode(options.OnBlockRead).
		WithVerifyValueChecksum(true).
		WithReadOnly(o.ReadOnly)
	if o.InMemory {
		bo = bo.WithInMemory(true).WithDir("").WithValueDir("")
	}
	return bo
}

// Open opens (creating if needed) the store in dir.
//
// It refuses, with a *DamagedError (ErrDamaged), a store whose files show
// committed data missing: data files but no MANIFEST, a MANIFEST naming
// missing tables, a table or log failing its checksum, or a sync sequence
// behind the high-water mark kept beside the directory (dir + ".highwater").
// Options.AllowDamaged opens it anyway. A log file of 0 bytes is what a
// killed process leaves of a log Badger was creating or deleting: it is
// not damage, unless values still point into it (filecheck.OpenEmptyLogs). A store
// on a file system with less free space than the floor is opened
// read-only if it can be (writes fail with ErrNoSpace), so that it can
// still be read; one that holds nothing yet is not created there.
//
// The store directory is owner-only (0700, its files 0600), whatever the
// umask; Open makes it so, with a warning for a store open to others.
func Open(dir string, o Options) (*Store, error) {
	o.setDefaults()
	s := &Store{now: o.Now, session: newSessionID(), log: o.Logger,
		plan: o.Planner, idx: index.New(), sync: !o.NoSync && !o.InMemory && !o.ReadOnly,
		dir: dir, readOnly: o.ReadOnly}
	s.group.Max, s.group.Run, s.group.Complete = o.MaxBatch, s.runBatch, s.complete
	if !o.InMemory {
		lock, err := storedir.Acquire(dir, o.ReadOnly)
		if err != nil {
			return nil, err
		}
		s.lock = lock
		defer func() {
			if s.db == nil { // Open failed
				lock.Release()
			}
		}()
	}
	found, err := checkFilesAtOpen(dir, o)
	if err != nil {
		return nil, err
	}
	var hidden []string // value logs a kill left empty: see filecheck.OpenEmptyLogs
	if !o.InMemory {
		var err error
		if hidden, err = filecheck.OpenEmptyLogs(dir, o.ReadOnly); err != nil {
			return nil, fmt.Errorf("open store %s: %w", dir, err)
		}
		// Owner-only whatever the umask: the store holds every output.
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, fmt.Errorf("open store %s: %w", dir, err)
		}
		if o.MinFreeBytes > 0 {
			s.space = storedir.NewFloor(dir, o.MinFreeBytes, o.freeFn)
			if err := s.space.Check(); err != nil && !o.ReadOnly {
				s.roErr = err
				// Badger creates and maps a new log file at open: on a
				// full disk that faults. Read-only needs no new file.
				o.Logger.Warn("opening the store read-only", "reason", err)
				o.ReadOnly, s.readOnly, s.sync = true, true, false
			}
		}
		// Badger read-only needs a MANIFEST: a store it never created
		// holds nothing yet.
		if o.ReadOnly && !filecheck.HasManifest(dir) {
			if s.roErr != nil {
				return nil, fmt.Errorf("store %s holds no tasks yet, and it cannot be created: %w", dir, s.roErr)
			}
			return nil, fmt.Errorf("open store %s read-only: it holds no tasks yet (it has no MANIFEST)", dir)
		}
	}
	bo := badgerOptions(dir, o)
	db, err := openBadger(bo)
	if err != nil {
		switch {
		case strings.Contains(err.Error(), "Cannot acquire directory lock"):
			return nil, fmt.Errorf("%w: %s (%v)", ledger.ErrInUse, dir, err)
		case s.readOnly && s.space != nil && s.space.Check() != nil:
			return nil, fmt.Errorf("open store %s read-only (%v): %w", dir, s.space.Check(), err)
		case isCorruption(err):
			return nil, &DamagedError{Dir: dir, Findings: append(found, Finding{Check: "open",
				Detail: err.Error() + " (Badger itself refuses these files: not even --allow-damaged opens them)"})}
		}
		return nil, fmt.Errorf("open store %s: %w", dir, err)
	}
	s.db = db
	if s.readOnly && s.roErr == nil {
		s.roErr = fmt.Errorf("%w: opened read-only", ledger.ErrReadOnly)
	}
	if !o.InMemory {
		// After Badger's open, which created files of its own.
		if opened, err := storedir.Private(dir); err != nil {
			o.Logger.Warn("the store could not be made owner-only", "dir", dir, "error", err)
		} else if opened {
			o.Logger.Warn("the store was readable by other users; it is owner-only now (directory 0700, files 0600)", "dir", dir)
		}
	}
	s.syncFn = db.Sync
	if w := logsync.DurabilityWarning(runtime.GOOS); s.sync && w != "" {
		o.Logger.Warn(w, "dir", dir)
	}
	// Windows: Badger syncs nothing there (its msync is a no-op), and a
	// descriptor of ours would keep Badger from deleting a flushed log.
	if s.sync && runtime.GOOS != "windows" {
		logs, err := logsync.New(dir)
		if err != nil {
			db.Close()
			s.db = nil
			return nil, fmt.Errorf("open store %s: %w", dir, err)
		}
		s.logs, s.syncFn = logs, logs.Sync
	}
	if o.syncFn != nil {
		fn := s.syncFn
		s.syncFn = func() error { return o.syncFn(fn) }
	}
	s.wire(kv.New(db, s.logs), db)
	if !o.InMemory {
		if err := s.checkHighWater(o); err != nil {
			db.Close()
			s.db = nil
			return nil, err
		}
		if err := s.checkHiddenLogs(hidden, o); err != nil {
			db.Close()
			s.db = nil
			return nil, err
		}
	}
	if err := s.rebuildIndex(); err != nil {
		db.Close()
		s.db = nil
		return nil, fmt.Errorf("open store %s: reading runnable tasks: %w", dir, err)
	}
	return s, nil
}

// wire sets up the store's parts on its records, d: the database below
// them is db (Badger), or nil for another backend.
func (s *Store) wire(d *kv.DB, db *badger.DB) {
	s.kv = d
	s.events = outbox.Events{Update: s.update, Now: s.now, Notify: s.notified.notify, Session: s.session}
	s.budgets = budget.Budgets{Update: s.update, Events: &s.events}
	s.leases = lease.Leases{Idx: s.idx, Events: &s.events, Session: s.session, Update: s.update}
	s.models = models.Journal{DB: s.kv, Update: s.update, Events: &s.events, Budgets: &s.budgets}
	s.approvals = approval.Approvals{Update: s.update, Events: &s.events, Budgets: &s.budgets}
	s.blobs = blob.Store{DB: s.kv, Update: s.update, Now: s.now}
	s.retention = retention.Retention{DB: s.kv, Badger: db, Logs: s.logs, Update: s.update, Blobs: &s.blobs}
}

// openBadger opens Badger, turning a panic (some corrupt files make it
// panic) into an error.
func openBadger(bo badger.Options) (db *badger.DB, err error) {
	defer func() {
		if r := recover(); r != nil {
			db, err = nil, fmt.Errorf("%w: Badger failed reading its files: %s", errCorrupt, strings.Join(strings.Fields(fmt.Sprint(r)), " "))
		}
	}()
	return badger.Open(bo)
}

var errCorrupt = errors.New("corrupt store files")

// isCorruption tells errors that mean damaged files from others (a lock, a
// permission).
func isCorruption(err error) bool {
	if errors.Is(err, errCorrupt) {
		return true
	}
	if errors.Is(err, badger.ErrTruncateNeeded) {
		return false // read-only open of a store that was not closed
	}
	msg := strings.ToLower(err.Error())
	for _, p := range []string{"checksum", "does not exist for table", "corrupt", "bad magic", "manifest"} {
		if strings.Contains(msg, p) {
			return true
		}
	}
	return false
}

// openedMark is what checkHighWater found at Open: the store's sync
// sequence, the high-water mark, and the finding when they disagree.
type openedMark struct {
	sync, mark uint64
	finding    *filecheck.Finding
}

// checkHighWater compares the store's sync sequence with the high-water
// mark and sets up the marker.
func (s *Store) checkHighWater(o Options) error {
	var stored uint64
	err := s.view(func(t *kv.Tx) error {
		b, err := t.GetRaw(filecheck.SyncSeqKey)
		if errors.Is(err, ledger.ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		stored, err = filecheck.DecodeSeq(b)
		return err
	})
	if err != nil {
		return fmt.Errorf("open store %s: reading its sync sequence: %w", s.dir, err)
	}
	path := filecheck.MarkPath(s.dir)
	mark, err := filecheck.ReadMark(path)
	if err != nil {
		return fmt.Errorf("open store %s: %w", s.dir, err)
	}
	s.opened = openedMark{sync: stored, mark: mark, finding: filecheck.CheckMark(path, stored, mark)}
	if f := s.opened.finding; f != nil {
		if !o.AllowDamaged {
			return &DamagedError{Dir: s.dir, Findings: []Finding{Finding(*f)}}
		}
		s.log.Warn("opening a damaged store", "dir", s.dir, "finding", f.String())
	}
	// Syncs go on from the higher of the two, so the mark never goes back.
	s.seq = max(stored, mark)
	s.synced.Store(s.seq)
	if s.sync {
		s.mark = filecheck.NewMarker(path, o.markEvery, mark)
	}
	return nil
}

// rebuildIndex fills the claim index from the records: every runnable task,
// the ready units of its current step, and its leased units (leases of an
// earlier session are taken back by the first claim).
func (s *Store) rebuildIndex() error {
	return s.view(func(t *kv.Tx) error {
		for _, k := range t.Keys([]byte("a/")) {
			if err := indexTask(t, string(k[2:]), s.idx); err != nil {
				return err
			}
		}
		return t.Err()
	})
}

// indexTask adds to x what the index holds of task id, from its records:
// whether it is runnable, its ready units, its leases and whether its
// step awaits planning.
func indexTask(t *kv.Tx, id string, x *index.Index) error {
	task := new(ledger.Task)
	if err := t.GetJSON(kv.TaskKey(id), task); errors.Is(err, ledger.ErrNotFound) {
		return nil // removed
	} else if err != nil {
		return err
	}
	if !task.Status.Runnable() {
		return nil
	}
	x.AddActive(id)
	st := *t.Step(task, task.Cursor)
	if !st.Planned {
		x.NeedPlan(id) // planning was cut short: it resumes
	}
	for _, step := range liveSteps(t, task) {
		st := *t.Step(task, step)
		err := t.Scan(kv.UnitStepPrefix(id, step), func(_, val []byte) (bool, error) {
			u := new(ledger.Unit)
			if err := json.Unmarshal(val, u); err != nil {
				return false, err
			}
			if u.Pass != st.Pass {
				return true, nil // a unit of an earlier pass
			}
			indexUnit(x, index.Ref{Task: id, Step: u.Step, Item: u.Item}, u, &st)
			return true, nil
		})
		if err != nil {
			return err
		}
	}
	return t.Err()
}

// indexUnit adds unit u of step st, named r, to x: queued when it can be
// claimed, a lease while it is leased.
func indexUnit(x *index.Index, r index.Ref, u *ledger.Unit, st *ledger.StepState) {
	switch u.State {
	case ledger.UnitReady:
		x.AddReady(r, u.NotBefore, st.Every > 0)
	case ledger.UnitWaiting:
		if !u.NotBefore.IsZero() { // claimed at its approval's expiry
			x.AddReady(r, u.NotBefore, false)
		}
	case ledger.UnitLeased:
		x.Leases[r] = index.Lease{Owner: u.Owner, Until: u.LeaseUntil}
	}
}

// checkHiddenLogs checks that no value pointed into the value logs a kill
// left empty, which Open hid from Badger (filecheck.Opening.HiddenLogs).
// store verify (filesChecked) reports them as they are.
func (s *Store) checkHiddenLogs(hidden []string, o Options) error {
	open := filecheck.Opening{Dir: s.dir, AllowDamaged: o.AllowDamaged && !o.filesChecked, ReadOnly: s.readOnly, Log: s.log}
	found, err := open.HiddenLogs(s.db, hidden, kv.ValueThreshold, func(item *badger.Item) error {
		return kv.ItemValue(item, func([]byte) error { return nil })
	})
	if err != nil {
		return err
	}
	if len(found) > 0 {
		return &DamagedError{Dir: s.dir, Findings: findings(found)}
	}
	return nil
}

// Close closes the database and brings the high-water mark up to the last
// sync. Operations in flight must have returned.
func (s *Store) Close() error {
	s.group.Wait()
	if s.pg != nil {
		return s.closePostgres()
	}
	err := s.db.Close()
	if s.logs != nil {
		s.logs.Close()
	}
	if s.mark != nil {
		if merr := s.mark.Advance(s.synced.Load(), true); err == nil {
			err = merr
		}
	}
	s.lock.Release()
	return err
}

// Session identifies this opening of the store. Lease owners are prefixed with
// it, so leases left by an earlier process are recognised as dead.
func (s *Store) Session() string { return s.session }

// Owner returns the lease owner name for a worker of this store session.
func (s *Store) Owner(worker string) string { return s.session + "/" + worker }

func newSessionID() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// ---- group commit ----

// op is one state change waiting for a transaction (internal/group runs
// the group commit).
type op = group.Op[func(*kv.Tx) error]

// durability is an operation whose transaction committed and whose sync
// may still be under way (Store.CommitAndClaim). The zero value is
// on disk already.
type durability = group.Durability[func(*kv.Tx) error]

// update runs fn in a read-write transaction, sharing the transaction (and its
// fsync) with concurrent callers. fn may run more than once; it must derive
// everything from what it reads through tx.
func (s *Store) update(ctx context.Context, fn func(*kv.Tx) error) error {
	return s.updateThen(ctx, fn, nil)
}

// updateThen is update that calls queued (unless nil) once fn has its
// place in the order of commits (group.Queue.DoThen).
func (s *Store) updateThen(ctx context.Context, fn func(*kv.Tx) error, queued func()) error {
	if err := s.admit(ctx); err != nil {
		return err
	}
	return s.group.DoThen(fn, queued)
}

// updateEarly is update that returns as soon as fn's transaction committed,
// before its sync: the Durability says when it is on disk. A caller may act
// on what it committed inside the process at once, and must wait for the
// Durability before anything outside the process depends on it.
func (s *Store) updateEarly(ctx context.Context, fn func(*kv.Tx) error, queued func()) (durability, error) {
	if err := s.admit(ctx); err != nil {
		return durability{}, err
	}
	return s.group.EarlyThen(fn, queued)
}

// admit refuses an operation before it is queued: ctx is done, or the
// store refuses writes.
func (s *Store) admit(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return s.writable()
}

// writable returns why the store refuses writes now, or nil: it failed, it
// is read-only, or its disk is below the free-space floor.
func (s *Store) writable() error {
	if err := s.failed(); err != nil {
		return err
	}
	if s.roErr != nil {
		return s.roErr
	}
	return s.space.Check()
}

// complete makes a committed batch durable when it must be, then releases
// its callers. A failed sync fails the store: every operation of the batch
// that had succeeded gets ErrStoreFailed, since whether it is on disk is
// unknown.
func (s *Store) complete(batch []*op, sync bool) {
	if sync && s.sync {
		s.durableOps.Add(int64(len(batch)))
		if err := s.syncer.Sync(s.syncDisk); err != nil {
			f := s.failStore(err)
			for _, o := range batch {
				switch {
				case o.Early() && o.Err == nil:
					o.SyncErr = f // its caller has heard back already
				case o.Err == nil:
					o.Err = f
				}
			}
		}
	}
	for _, o := range batch {
		o.Finish()
	}
	s.changes.notify()
}

// syncDisk is one disk sync (the syncer runs one at a time). It first
// writes the sync's number, so the store's sequence says which sync its
// files reached, and once synced, advances the high-water mark.
func (s *Store) syncDisk() error {
	n := s.seq + 1
	covered := s.commits.done.Load() // every commit finished before this sync begins
	holdpoint.Reached(holdpoint.StoreSync, s.dir)
	err := s.db.Update(func(txn *badger.Txn) error { return txn.Set(filecheck.SyncSeqKey, filecheck.EncodeSeq(n)) })
	if err != nil {
		return err
	}
	if err := s.syncFn(); err != nil {
		return err
	}
	s.commits.synced.Store(covered)
	s.seq = n
	s.synced.Store(n)
	if err := s.mark.Advance(n, false); err != nil {
		// The data is on disk; only the mark lags, which is safe: it is
		// never ahead of the store. Close tries again.
		s.log.Warn("high-water mark not updated", "error", err)
	}
	return nil
}

// failStore makes the store failed (the first cause wins) and returns the failure.
func (s *Store) failStore(cause error) error {
	if s.failure.CompareAndSwap(nil, &failedError{cause: cause}) {
		s.log.Error("store failed: disk sync error; writes are refused until the store is reopened", "dir", s.dir, "error", cause)
	}
	return s.failure.Load()
}

// runBatch runs the ops' transactions and records each op's error. It
// reports whether any op that succeeded must be synced to disk. Once the
// store failed, nothing more is written.
func (s *Store) runBatch(batch []*op) (sync bool) {
	if err := s.failed(); err != nil {
		for _, o := range batch {
			o.Err = err
		}
		return false
	}
	if len(batch) > 1 {
		for conflicts := 0; ; conflicts++ {
			sync, ok, conflict := s.tryBatch(batch)
			if ok {
				return sync
			}
			if !conflict || conflicts >= maxConflicts {
				break
			}
		}
	}
	for _, o := range batch {
		sync = s.runAlone(o) || sync
	}
	return sync
}

// tryBatch runs all ops in one transaction. It returns ok false, having
// changed nothing, if an op failed after writing or the transaction could not
// commit; the caller then runs each op alone, or, when the database
// refused the transaction for a conflict with another process's
// (conflict), the batch again.
func (s *Store) tryBatch(batch []*op) (sync, ok, conflict bool) {
	txn, err := s.beginWrite()
	if err != nil {
		return false, false, false
	}
	defer txn.Discard()
	errs := make([]error, len(batch))
	txs := make([]*kv.Tx, len(batch))
	shared := &kv.Batch{}
	for i, o := range batch {
		txs[i] = s.kv.TxOf(txn, true, shared)
		errs[i] = txs[i].Run(o.Fn)
		if s.kv.Retryable(errs[i]) {
			s.conflicted()
			return false, false, true
		}
		if errs[i] != nil && txs[i].Wrote() {
			return false, false, false
		}
	}
	var size int64
	for _, t := range txs {
		size += t.Size()
	}
	// A batch that does not fit runs op by op: the ops that fit still commit.
	if s.space.CheckWrite(size) != nil {
		return false, false, false
	}
	n := s.commits.beginCommit()
	err = txn.Commit()
	s.commits.endCommit(n)
	if err != nil {
		if s.kv.Retryable(err) {
			s.conflicted()
			return false, false, true
		}
		return false, false, false
	}
	txs[0].CacheWritten() // the batch's operations share one record of what they wrote
	sync = s.applyIndex(txs, errs)
	for i, o := range batch {
		o.Err = errs[i]
	}
	return sync, true, false
}

// runAlone runs one op in a transaction of its own, again while the
// database refuses it for a conflict with another process's (PostgreSQL).
// While the database cannot be reached it tries again, waiting longer
// each time, for up to unavailableFor: every write waits meanwhile.
func (s *Store) runAlone(o *op) (sync bool) {
	var give time.Time
	wait := 50 * time.Millisecond
	for conflicts := 0; ; {
		sync = s.runAloneOnce(o)
		switch {
		case s.kv.Retryable(o.Err) && conflicts < maxConflicts:
			conflicts++
			s.conflicted()
		case s.kv.Unavailable(o.Err):
			if give.IsZero() {
				give = time.Now().Add(unavailableFor)
				s.log.Warn("the store's database cannot be reached; writes wait for it", "for", unavailableFor, "error", o.Err)
			}
			if time.Now().After(give) {
				return sync
			}
			t := time.NewTimer(wait)
			<-t.C
			wait = min(2*wait, 2*time.Second)
		default:
			return sync
		}
	}
}

// maxConflicts bounds how many times one op runs again after conflicts;
// unavailableFor how long it waits for a database it cannot reach.
const (
	maxConflicts   = 64
	unavailableFor = 2 * time.Minute
)

func (s *Store) runAloneOnce(o *op) (sync bool) {
	txn, err := s.beginWrite()
	if err != nil {
		o.Err = err
		return false
	}
	defer txn.Discard()
	t := s.kv.TxOf(txn, true, nil)
	o.Err = t.Run(o.Fn)
	if o.Err == nil && t.Size() > 0 {
		o.Err = s.space.CheckWrite(t.Size())
	}
	if o.Err == nil {
		n := s.commits.beginCommit()
		o.Err = txn.Commit()
		s.commits.endCommit(n)
		if o.Err == nil {
			t.CacheWritten()
			sync = s.applyIndex([]*kv.Tx{t}, []error{nil})
		}
	}
	return sync
}

// beginWrite begins a read-write transaction: an exclusive one
// (kv.DB.BeginExclusive) while the database refused one of this store's
// transactions for a conflict within the last contention, so that
// processes that keep conflicting (working one task) take turns instead
// of throwing their work away; an ordinary one otherwise, so that
// processes working different tasks write side by side.
func (s *Store) beginWrite() (kv.Txn, error) {
	if s.pg != nil && time.Now().UnixNano() < s.contended.Load() {
		return s.kv.BeginExclusive()
	}
	return s.kv.Begin(true)
}

// conflicted records that the database refused a transaction for a
// conflict: the store's transactions are exclusive for a while.
func (s *Store) conflicted() {
	s.contended.Store(time.Now().Add(contention).UnixNano())
}

// contention is how long the store's write transactions stay exclusive
// after a conflict.
const contention = 5 * time.Second

// applyIndex runs after a transaction committed: it applies the index
// changes of the operations that succeeded and reports whether any of them
// must be durable before its caller hears back.
func (s *Store) applyIndex(txs []*kv.Tx, errs []error) (durable bool) {
	s.idx.Mu.Lock()
	defer s.idx.Mu.Unlock()
	for i, t := range txs {
		if errs[i] != nil {
			continue
		}
		durable = durable || t.Durable
		for _, fn := range t.Afters() {
			fn(s.idx)
		}
	}
	return durable
}

// view runs fn in a read-only transaction.
func (s *Store) view(fn func(*kv.Tx) error) error { return s.kv.View(fn) }

// badgerLogger adapts hclog to Badger's logger: errors and warnings at
// their level, infos at debug (they include log replays and truncations),
// debug messages at trace.
type badgerLogger struct{ l hclog.Logger }

func (b badgerLogger) Errorf(f string, a ...any)   { b.l.Error(strings.TrimSpace(fmt.Sprintf(f, a...))) }
func (b badgerLogger) Warningf(f string, a ...any) { b.l.Warn(strings.TrimSpace(fmt.Sprintf(f, a...))) }
func (b badgerLogger) Infof(f string, a ...any) {
	if b.l.IsDebug() {
		b.l.Debug(strings.TrimSpace(fmt.Sprintf(f, a...)))
	}
}

func (b badgerLogger) Debugf(f string, a ...any) {
	if b.l.IsTrace() {
		b.l.Trace(strings.TrimSpace(fmt.Sprintf(f, a...)))
	}
}
