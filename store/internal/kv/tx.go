package kv

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/dgraph-io/badger/v4"

	"github.com/lhengine/lhengine/ledger"
	"github.com/lhengine/lhengine/store/internal/index"
	"github.com/lhengine/lhengine/store/internal/logsync"
)

// ErrDamaged: the store's files show that committed data is missing or
// corrupt (store.ErrDamaged is this error).
var ErrDamaged = errors.New("store is damaged")

// FinishedError is ErrTerminal for a task that has already finished, said
// in plain words: "task ID has already succeeded: there is nothing to
// cancel".
type FinishedError struct {
	ID     string
	Status ledger.Status
	Verb   string // what could not be done: "cancel"
}

func (e *FinishedError) Error() string {
	return fmt.Sprintf("task %s has already %s: there is nothing to %s", e.ID, e.Status, e.Verb)
}

// Is matches ledger.ErrTerminal.
func (e *FinishedError) Is(target error) bool { return target == ledger.ErrTerminal }

// ValueThreshold is Badger's value threshold: a value of this size or more
// goes to the value log, a smaller one stays in the tree (and the memtable's
// log).
const ValueThreshold = 64 << 10

// DB is a store's Badger database and what its transactions share: the
// decoded task records (see Tx.GetJSON), the step states of tasks read
// whole by writers (see Tx.Fill) and those shared by lease snapshots
// (Snapshot).
type DB struct {
	be       Backend
	logs     *logsync.Logs // told of values written to the value log; nil unless the store syncs
	tasks    taskCache
	leased   leasedUnits
	prefixes stepPrefixes
	mirror   stepMirror
	shared   bool // other processes write the database too (NewOn)
}

// New is the DB of the Badger database db, whose disk sync is logs (nil
// when the store does not sync).
func New(db *badger.DB, logs *logsync.Logs) *DB {
	return &DB{be: badgerBackend{db}, logs: logs}
}

// NewOn is the DB of another backend (PostgreSQL) that other processes
// write too: the caches of step states that only a single writer can keep
// (the mirror and the prefixes, tasks.go) are off; the cache of decoded
// task headers, checked against each record's version, stays.
func NewOn(be Backend) *DB { return &DB{be: be, shared: true} }

// Tx is the typed access of one operation to a Badger transaction: txn,
// read-write when rw (run by the group-commit leader), shared by the
// operations of batch b (nil: none yet).
func (d *DB) Tx(txn *badger.Txn, rw bool, b *Batch) *Tx { return d.TxOf(badgerTxn{txn}, rw, b) }

// TxOf is Tx on a transaction of the DB's backend (Begin).
func (d *DB) TxOf(txn Txn, rw bool, b *Batch) *Tx { return &Tx{txn: txn, db: d, rw: rw, b: b} }

// Begin starts a transaction of the backend.
func (d *DB) Begin(rw bool) (Txn, error) { return d.be.Begin(rw) }

// BeginExclusive starts a read-write transaction that no other exclusive
// one runs beside, in any process, and that reads what the one before it
// committed: where transactions keep conflicting on the same records,
// they take turns instead of being refused. A backend with one writer
// (Badger) has no such thing, and begins an ordinary one.
func (d *DB) BeginExclusive() (Txn, error) {
	if e, ok := d.be.(interface{ BeginExclusive() (Txn, error) }); ok {
		return e.BeginExclusive()
	}
	return d.be.Begin(true)
}

// Retryable reports whether err is the backend refusing a transaction
// because another one conflicted with it: running it again from its reads
// may succeed. Badger's never are (one group-commit leader writes).
func (d *DB) Retryable(err error) bool {
	r, ok := d.be.(interface{ Retryable(error) bool })
	return ok && err != nil && r.Retryable(err)
}

// Unavailable reports whether err says the backend's database could not
// be reached (a networked one: restarting, or cut off): the transaction
// may succeed once it is back.
func (d *DB) Unavailable(err error) bool {
	r, ok := d.be.(interface{ Unavailable(error) bool })
	return ok && err != nil && r.Unavailable(err)
}

// View runs fn in a read-only transaction.
func (d *DB) View(fn func(*Tx) error) error {
	txn, err := d.be.Begin(false)
	if err != nil {
		return err
	}
	defer txn.Discard()
	return d.TxOf(txn, false, nil).Run(fn)
}

// Update runs fn in a read-write transaction of the store's group commit,
// which makes it durable before it returns when fn sets Tx.Durable. fn may
// run more than once: it must derive everything from what it reads
// through its Tx.
type Update func(ctx context.Context, fn func(*Tx) error) error

// Run runs fn in t. A record fn could not read (Err) fails it, whatever fn
// returned.
func (t *Tx) Run(fn func(*Tx) error) error {
	err := fn(t)
	if t.err != nil {
		return t.err
	}
	return err
}

// Tx wraps a Badger transaction with typed record access. It records whether
// anything was written, so that a failed operation can be told apart from a
// half-applied one.
type Tx struct {
	txn Txn
	db  *DB
	// Durable says the operation must be on disk before it returns.
	Durable bool
	wrote   bool
	size    int64                // bytes of the keys and values it set (see Size)
	afters  []func(*index.Index) // index changes to apply once committed
	b       *Batch               // shared by the operations of one transaction
	err     error                // a record the operation could not read (see Step)
	rw      bool                 // a read-write transaction, run by the group-commit leader
	saving  bool                 // SaveTask is writing
}

// Batch is what the operations sharing one transaction must see of each
// other that the index does not show yet: the index changes only once the
// transaction commits, so without it two claims of one batch would both
// offer the same ready unit (one wins, the other claims nothing) or both
// take back the same expired lease.
type Batch struct {
	Taken     map[index.Ref]bool      // units leased by an operation of the batch
	Ready     []index.Ref             // units made ready by an operation of the batch
	wroteTask map[string]*ledger.Task // task records written in the transaction (nil: not as a record)
	// steps written in the transaction, by task, and tasks whose record
	// was written other than by SaveTask (see stepMirror)
	wroteSteps map[string]map[int]ledger.StepState
	rawTask    map[string]bool
}

// Batch returns the transaction's batch state.
func (t *Tx) Batch() *Batch {
	if t.b == nil {
		t.b = &Batch{}
	}
	if t.b.Taken == nil {
		t.b.Taken = map[index.Ref]bool{}
	}
	return t.b
}

// Iterate walks keys of the transaction, for the reads typed access has no
// words for (key-only iteration, reverse iteration, versions, seeks).
func (t *Tx) Iterate(o IterOptions) Iterator { return t.txn.Iterate(o) }

// Wrote reports whether the operation wrote anything.
func (t *Tx) Wrote() bool { return t.wrote }

// Size is the bytes of the keys and values the operation set (the
// free-space floor's check of a big write).
func (t *Tx) Size() int64 { return t.size }

// Err is the first record the operation could not read (see Step).
func (t *Tx) Err() error { return t.err }

// Fail records the first error of a record an operation could not read.
func (t *Tx) Fail(err error) {
	if t.err == nil {
		t.err = err
	}
}

// Fence has the database refuse the transaction's commit unless the unit
// record at key still holds the lease of owner at epoch when it commits:
// the lease check of a commit made by the database itself, inside the
// commit, whatever the transaction read before (PostgreSQL, where other
// processes hold leases too). On Badger, one process's store, the
// transaction's reads are the check (a conflicting commit is refused).
func (t *Tx) Fence(key []byte, owner string, epoch uint64) {
	if f, ok := t.txn.(interface{ Fence([]byte, string, uint64) }); ok && t.rw {
		f.Fence(key, owner, epoch)
	}
}

// ReadForClaim reads the records at keys for a claim, in one statement
// where the backend can (PostgreSQL: `FOR UPDATE SKIP LOCKED`, locking
// them): fn is called with each key's index and value, busy when another
// transaction holds the record locked (another process claiming or
// committing it: skipped, not waited for), found false when there is no
// record. On Badger, one process's store, no record is busy.
func (t *Tx) ReadForClaim(keys [][]byte, fn func(i int, val []byte, found, busy bool) error) error {
	if c, ok := t.txn.(interface {
		ReadForClaim([][]byte, func(int, []byte, bool, bool) error) error
	}); ok && t.rw {
		return c.ReadForClaim(keys, fn)
	}
	for i, key := range keys {
		err := t.txn.Get(key, func(v []byte, _ uint64) error { return fn(i, v, true, false) })
		if errors.Is(err, ledger.ErrNotFound) {
			err = fn(i, nil, false, false)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// After queues an index change to apply if and when the transaction commits.
func (t *Tx) After(fn func(*index.Index)) { t.afters = append(t.afters, fn) }

// Afters are the index changes the operation queued, in order.
func (t *Tx) Afters() []func(*index.Index) { return t.afters }

// GetJSON decodes the record at key into v; ErrNotFound when there is none.
// A task record is read through the DB's cache of decoded records.
func (t *Tx) GetJSON(key []byte, v any) error {
	switch v := v.(type) {
	case *ledger.Task:
		return t.getTask(key, v)
	case *ledger.Unit:
		return t.txn.Get(key, func(b []byte, _ uint64) error { return t.db.leased.decode(key, b, v) })
	}
	return t.txn.Get(key, func(b []byte, _ uint64) error { return json.Unmarshal(b, v) })
}

// leasedUnits holds the unit records in the leased state as this process
// last encoded them, by key, with what they decode to: a commit or a
// heartbeat reads back the unit its claim leased, and a record with the
// same bytes is copied rather than decoded. Bytes decide, not versions,
// so a record another process wrote, or a write whose transaction never
// committed, is never mistaken for another. A unit written in any other
// state leaves it, so it holds about the units leased now.
type leasedUnits struct {
	mu sync.Mutex
	m  map[string]leasedUnit
}

type leasedUnit struct {
	enc []byte
	u   ledger.Unit // never changed once put; decode hands out copies
}

// maxLeasedUnits bounds the cache; past it, it starts over.
const maxLeasedUnits = 1024

// note records that u was encoded as enc at key.
func (c *leasedUnits) note(key []byte, enc []byte, u *ledger.Unit) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if u.State != ledger.UnitLeased {
		delete(c.m, string(key))
		return
	}
	d, ok := decodedForm(u)
	if !ok {
		delete(c.m, string(key))
		return
	}
	if c.m == nil || len(c.m) >= maxLeasedUnits {
		c.m = make(map[string]leasedUnit)
	}
	c.m[string(key)] = leasedUnit{enc: enc, u: d}
}

// decode decodes the unit record b read at key into u.
func (c *leasedUnits) decode(key, b []byte, u *ledger.Unit) error {
	c.mu.Lock()
	e, ok := c.m[string(key)]
	c.mu.Unlock()
	if ok && bytes.Equal(e.enc, b) {
		*u = copyUnit(&e.u)
		return nil
	}
	*u = ledger.Unit{}
	return json.Unmarshal(b, u)
}

// decodedForm is what json.Unmarshal makes of json.Marshal(u): u with its
// times in the form a decode gives them (in UTC, with no monotonic
// reading; the zero time for one the encoding omits), sharing nothing with
// u. It reports false for a unit whose encoding changes what it holds,
// which must be decoded: a time at an offset from UTC, a string that is not valid UTF-8 (the
// encoding replaces what is not), raw JSON that is not compact or holds
// what the encoding escapes (<, >, &, U+2028, U+2029).
func decodedForm(u *ledger.Unit) (ledger.Unit, bool) {
	d := copyUnit(u)
	for _, t := range []*time.Time{&d.LeaseUntil, &d.NotBefore, &d.Claimed} {
		if t.IsZero() {
			*t = time.Time{}
			continue
		}
		if _, offset := t.Zone(); offset != 0 {
			return d, false
		}
		*t = t.UTC().Round(0) // written with "Z", read back as UTC
	}
	strs := []string{d.Task, string(d.State), d.Owner, d.Approval, d.Effect, d.WaitReason}
	if f := d.Failure; f != nil {
		strs = append(strs, string(f.Kind), f.Message, f.Step)
	}
	for _, s := range strs {
		if !utf8.ValidString(s) {
			return d, false
		}
	}
	return d, plainRaw(d.Key) && plainRaw(d.Value)
}

// plainRaw reports whether raw JSON b is encoded as it is: compact (no
// whitespace outside strings) and holding nothing the encoder escapes.
func plainRaw(b []byte) bool {
	in := false
	for i := 0; i < len(b); i++ {
		switch c := b[i]; {
		case c == '<' || c == '>' || c == '&':
			return false
		case c == 0xE2 && i+2 < len(b) && b[i+1] == 0x80 && (b[i+2] == 0xA8 || b[i+2] == 0xA9):
			return false
		case in && c == '\\':
			i++
		case c == '"':
			in = !in
		case !in && (c == ' ' || c == '\t' || c == '\n' || c == '\r'):
			return false
		}
	}
	return true
}

// copyUnit is a copy of u that shares nothing with it.
func copyUnit(u *ledger.Unit) ledger.Unit {
	c := *u
	c.Key, c.Value = slices.Clone(u.Key), slices.Clone(u.Value)
	if u.Failure != nil {
		f := *u.Failure
		c.Failure = &f
	}
	return c
}

// getTask decodes a task record, or copies it from the store's cache of
// decoded records when the cache holds the same committed version. A record
// this transaction wrote through SaveTask is copied from what SaveTask kept
// of it (the operations of one batch commit one task's units one after the
// other); one it wrote otherwise is decoded: a pending write reports the
// transaction's read timestamp as its version, which a committed version
// may share.
func (t *Tx) getTask(key []byte, task *ledger.Task) error {
	pending := false
	if t.b != nil {
		var c *ledger.Task
		if c, pending = t.b.wroteTask[string(key)]; c != nil {
			c.CopyTo(task)
			return nil
		}
	}
	return t.txn.Get(key, func(b []byte, version uint64) error {
		cache := !pending && version != 0
		if cache {
			if c, ok := t.db.tasks.get(string(key), version); ok {
				c.CopyTo(task)
				return nil
			}
		}
		if err := DecodeTask(b, task); err != nil {
			return err
		}
		if cache {
			c := new(ledger.Task)
			task.CopyTo(c)
			t.db.tasks.put(string(key), version, c)
		}
		return nil
	})
}

// taskCache holds decoded task headers by key and committed version, with
// the step under the cursor when it is known (a step record is written only
// with its header, so the header's version dates the steps too). Entries
// are never changed after they are put; readers get copies.
type taskCache struct {
	mu sync.Mutex
	m  map[string]cachedTask
}

type cachedTask struct {
	version uint64
	task    *ledger.Task
}

// maxCachedTasks bounds the cache; past it, it starts over.
const maxCachedTasks = 4096

func (c *taskCache) get(key string, version uint64) (*ledger.Task, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[key]
	if !ok || e.version != version {
		return nil, false
	}
	return e.task, true
}

func (c *taskCache) put(key string, version uint64, task *ledger.Task) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || len(c.m) >= maxCachedTasks {
		c.m = make(map[string]cachedTask)
	}
	if e, ok := c.m[key]; ok && e.version > version {
		return // a reader of an older snapshot: keep the newer record
	}
	c.m[key] = cachedTask{version: version, task: task}
}

// ItemValue calls fn with the item's value. Badger, when it cannot read a
// value from its value log (checksum mismatch, short file), logs the error
// and returns an empty value with no error; ItemValue turns that into an
// ErrDamaged error. A value really empty is stored inline and has size 0.
func ItemValue(item *badger.Item, fn func([]byte) error) error {
	return item.Value(func(v []byte) error {
		if len(v) == 0 && item.ValueSize() > 0 {
			return fmt.Errorf("%w: the value of key %q (about %d bytes) could not be read from the value log (checksum mismatch or short file; see the log)",
				ErrDamaged, item.Key(), item.ValueSize())
		}
		return fn(v)
	})
}

// GetRaw returns a copy of the value at key; ErrNotFound when there is none.
func (t *Tx) GetRaw(key []byte) ([]byte, error) {
	var out []byte
	err := t.txn.Get(key, func(v []byte, _ uint64) error {
		out = slices.Clone(v)
		return nil
	})
	return out, err
}

// PutJSON writes v as JSON at key; a task is saved as its header and the
// steps that changed (SaveTask).
func (t *Tx) PutJSON(key []byte, v any) error {
	if task, ok := v.(*ledger.Task); ok {
		return t.SaveTask(task) // a header and its steps
	}
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	if u, ok := v.(*ledger.Unit); ok {
		t.db.leased.note(key, b, u)
	}
	return t.Put(key, b)
}

// Put writes val at key.
func (t *Tx) Put(key, val []byte) error {
	if len(val) >= ValueThreshold {
		t.db.logs.ValuesWritten()
	}
	t.wrote = true
	t.size += int64(len(key) + len(val))
	t.noteWrite(key)
	return t.txn.Set(key, val)
}

// Del deletes key.
func (t *Tx) Del(key []byte) error {
	t.wrote = true
	t.noteWrite(key)
	return t.txn.Delete(key)
}

// noteWrite remembers the task records the transaction wrote (see getTask).
func (t *Tx) noteWrite(key []byte) {
	if len(key) > 2 && key[0] == 't' && key[1] == '/' {
		b := t.Batch()
		if b.wroteTask == nil {
			b.wroteTask = map[string]*ledger.Task{}
		}
		b.wroteTask[string(key)] = nil // a deletion, or a raw write
		if !t.saving {
			id := string(key[2:])
			if b.rawTask == nil {
				b.rawTask = map[string]bool{}
			}
			b.rawTask[id] = true
			t.After(func(*index.Index) { t.db.mirror.drop(id) })
		}
	}
}

// CacheWritten puts the task records a transaction that just committed
// wrote (t's, and those of the operations sharing its batch) into the cache
// of decoded records, under their committed versions, so that the next
// claim or commit of the task does not decode them. It runs while the
// caller still leads the group commit, so no other write can have replaced
// them.
func (t *Tx) CacheWritten() {
	b, d := t.b, t.db
	if b == nil || len(b.wroteTask) == 0 || d.shared {
		// Shared: another process may have written the record since, and
		// its version would then date this one's content.
		return
	}
	_ = d.View(func(t *Tx) error {
		for key, task := range b.wroteTask {
			if task == nil {
				continue
			}
			_ = t.txn.Get([]byte(key), func(_ []byte, version uint64) error {
				if version != 0 {
					d.tasks.put(key, version, task)
				}
				return nil
			})
		}
		return nil
	})
}

// Keys returns the keys under prefix, in order.
func (t *Tx) Keys(prefix []byte) [][]byte {
	it := t.txn.Iterate(IterOptions{Prefix: prefix, KeysOnly: true})
	defer it.Close()
	var out [][]byte
	for it.Rewind(); it.Valid(); it.Next() {
		out = append(out, slices.Clone(it.Key()))
	}
	t.Fail(it.Err())
	return out
}

// KeysLimit returns up to limit keys under prefix and adds the sizes of
// their values to size.
func (t *Tx) KeysLimit(prefix []byte, limit int, size int64) ([][]byte, int64) {
	it := t.txn.Iterate(IterOptions{Prefix: prefix, KeysOnly: true})
	defer it.Close()
	var out [][]byte
	for it.Rewind(); it.Valid() && len(out) < limit; it.Next() {
		out = append(out, slices.Clone(it.Key()))
		size += it.ValueSize()
	}
	t.Fail(it.Err())
	return out, size
}

// Scan calls fn for each key and value under prefix, in order, until fn
// returns false or an error.
func (t *Tx) Scan(prefix []byte, fn func(key, val []byte) (bool, error)) error {
	it := t.txn.Iterate(IterOptions{Prefix: prefix, Prefetch: 64})
	defer it.Close()
	for it.Rewind(); it.Valid(); it.Next() {
		var more bool
		err := it.Value(func(v []byte) error {
			var err error
			more, err = fn(it.Key(), v)
			return err
		})
		if err != nil {
			return err
		}
		if !more {
			return nil
		}
	}
	return it.Err()
}

// ScanFrom is Scan starting at the first key at or after start: a follower
// reads the events after the last it saw without walking the ones before.
func (t *Tx) ScanFrom(prefix, start []byte, fn func(key, val []byte) (bool, error)) error {
	it := t.txn.Iterate(IterOptions{Prefix: prefix, Prefetch: 64})
	defer it.Close()
	for it.Seek(start); it.Valid(); it.Next() {
		var more bool
		err := it.Value(func(v []byte) error {
			var err error
			more, err = fn(it.Key(), v)
			return err
		})
		if err != nil || !more {
			return err
		}
	}
	return it.Err()
}
