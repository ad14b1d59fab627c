package kv

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"sync"

	"github.com/lhengine/lhengine/ledger"
	"github.com/lhengine/lhengine/store/internal/index"
)

// Per-step records.
//
// A task is stored as a header, t/<task> (every field of Task but Steps,
// and the number of steps), and one record per step, s/<task>/<step>. An
// operation loads the header and only the steps it touches (Task.Partial), and
// saving writes the header and the steps that changed: a commit costs the
// same in a pipeline of 50 steps and of 1,000. Every write of a step record
// writes the header in the same transaction, so the header's version is the
// version of the whole task (the cache of decoded records relies on it).
//
// Stores written before this layout hold the steps in the task record
// ("steps"); such a record is read as it is and rewritten in the new layout
// by the first operation that saves the task.

// lazySteps stands for a task's steps inside the ledger.
type lazySteps struct {
	n    int                       // number of steps
	got  map[int]*ledger.StepState // steps loaded (and maybe changed) by the operation
	orig map[int]ledger.StepState  // the same steps as stored
}

func newLazySteps(n int) *lazySteps {
	return &lazySteps{n: n, got: map[int]*ledger.StepState{}, orig: map[int]ledger.StepState{}}
}

// lazyOf returns task's lazySteps; nil when it has its Steps.
func lazyOf(task *ledger.Task) *lazySteps {
	l, _ := task.Partial.(*lazySteps)
	return l
}

// Count implements ledger.PartialSteps.
func (l *lazySteps) Count() int { return l.n }

// Clone implements ledger.PartialSteps.
func (l *lazySteps) Clone() ledger.PartialSteps {
	c := &lazySteps{n: l.n, got: make(map[int]*ledger.StepState, len(l.got)), orig: maps.Clone(l.orig)}
	for i, st := range l.got {
		v := *st
		c.got[i] = &v
	}
	return c
}

// taskHeader is the stored form of a task record: the task without its
// steps, and their number. A record of the earlier layout has no
// step_count and holds the steps.
type taskHeader struct {
	*ledger.Task
	StepCount int `json:"step_count,omitempty"`
}

// DecodeTask decodes a task record into task: a header (lazyOf(task) set,
// Steps nil) or a record of the earlier layout (Steps set).
func DecodeTask(b []byte, task *ledger.Task) error {
	h := taskHeader{Task: task}
	if err := json.Unmarshal(b, &h); err != nil {
		return err
	}
	task.Partial = nil
	if h.StepCount > 0 {
		task.Steps, task.Partial = nil, newLazySteps(h.StepCount)
	}
	return nil
}

func encodeTaskHeader(task *ledger.Task) ([]byte, error) {
	h := *task
	h.Steps, h.Partial = nil, nil
	return json.Marshal(taskHeader{Task: &h, StepCount: task.StepCount()})
}

// Step returns step i of the task, to read or change (SaveTask writes the
// changes): from Steps when the task holds them, else loaded from its record
// on first use. A record that cannot be read fails the operation (t.err)
// and reads as a zero step.
func (t *Tx) Step(task *ledger.Task, i int) *ledger.StepState {
	lz := lazyOf(task)
	if lz == nil {
		return &task.Steps[i]
	}
	if st, ok := lz.got[i]; ok {
		return st
	}
	st := new(ledger.StepState)
	if i < 0 || i >= lz.n {
		t.Fail(fmt.Errorf("task %s has no step %d (it has %d)", task.ID, i, lz.n))
		return st
	}
	if err := t.GetJSON(StepKey(task.ID, i), st); err != nil {
		t.Fail(fmt.Errorf("step %d of task %s: %w", i, task.ID, err))
		return st
	}
	lz.got[i], lz.orig[i] = st, *st
	return st
}

// StepValue is step i of the task without keeping it loaded.
func (t *Tx) StepValue(task *ledger.Task, i int) ledger.StepState {
	lz := lazyOf(task)
	if lz == nil {
		return task.Steps[i]
	}
	if st, ok := lz.got[i]; ok {
		return *st
	}
	var st ledger.StepState
	if err := t.GetJSON(StepKey(task.ID, i), &st); err != nil {
		t.Fail(fmt.Errorf("step %d of task %s: %w", i, task.ID, err))
	}
	return st
}

// SaveTask writes the task's header and the steps that changed; a task that
// holds its Steps (a new one, or one read from a record of the earlier
// layout) has every step written.
func (t *Tx) SaveTask(task *ledger.Task) error {
	t.saving = true
	defer func() { t.saving = false }()
	id := task.ID
	wrote := map[int]ledger.StepState{}
	if lz := lazyOf(task); lz != nil {
		for i, st := range lz.got {
			if *st == lz.orig[i] {
				continue
			}
			if err := t.PutJSON(StepKey(id, i), st); err != nil {
				return err
			}
			lz.orig[i], wrote[i] = *st, *st
		}
	} else {
		for i := range task.Steps {
			if err := t.PutJSON(StepKey(id, i), &task.Steps[i]); err != nil {
				return err
			}
			wrote[i] = task.Steps[i]
		}
	}
	b, err := encodeTaskHeader(task)
	if err != nil {
		return err
	}
	key := TaskKey(id)
	if err := t.Put(key, b); err != nil {
		return err
	}
	bs := t.Batch()
	if bs.wroteSteps == nil {
		bs.wroteSteps = map[string]map[int]ledger.StepState{}
	}
	if bs.wroteSteps[id] == nil {
		bs.wroteSteps[id] = map[int]ledger.StepState{}
	}
	maps.Copy(bs.wroteSteps[id], wrote)
	n := task.StepCount()
	if !t.db.shared {
		t.After(func(*index.Index) { t.db.mirror.apply(id, n, wrote) })
	}
	// Kept to seed the cache of decoded records once committed: the header
	// and the step under the cursor, which the next operation on the task
	// most likely needs.
	c := task.Header()
	c.Partial = newLazySteps(n)
	if cur := task.Cursor; cur >= 0 && cur < n {
		var st *ledger.StepState
		if lazyOf(task) == nil {
			st = &task.Steps[cur]
		} else {
			st = lazyOf(task).got[cur]
		}
		if st != nil {
			v := *st
			lazyOf(c).got[cur], lazyOf(c).orig[cur] = &v, v
		}
	}
	bs.wroteTask[string(key)] = c
	return nil
}

// Fill loads every step of a task into Steps (readers get whole tasks). A
// writer takes them from the mirror when it has the task.
func (t *Tx) Fill(task *ledger.Task) error {
	lz := lazyOf(task)
	if lz == nil {
		return nil
	}
	if t.rw && !t.db.shared && (t.b == nil || !t.b.rawTask[task.ID]) {
		if steps := t.db.mirror.get(task.ID, lz.n); steps != nil {
			if t.b != nil {
				for i, st := range t.b.wroteSteps[task.ID] {
					steps[i] = st
				}
			}
			for i, st := range lz.got {
				steps[i] = *st
			}
			task.Steps, task.Partial = steps, nil
			return nil
		}
	}
	// A point read of each step, not a scan of the prefix: every commit
	// writes a step record again, and a scan would walk past the versions
	// of it compaction has not dropped yet, so that reading a task would
	// grow with the units it committed. On a shared database (PostgreSQL)
	// each read is a round trip and a walk shows only the current rows:
	// there walkSteps steps or more are read in one walk.
	steps := make([]ledger.StepState, lz.n)
	walk := t.db.shared && toRead(lz, lz.n) >= walkSteps
	if walk {
		if err := t.scanSteps(task.ID, steps, lz); err != nil {
			return err
		}
	}
	for i := range steps {
		if _, ok := lz.got[i]; ok || walk {
			continue
		}
		if err := t.GetJSON(StepKey(task.ID, i), &steps[i]); err != nil {
			if errors.Is(err, ledger.ErrNotFound) {
				return fmt.Errorf("%w: task %s has no record of its step %d of %d", ErrDamaged, task.ID, i, lz.n)
			}
			return fmt.Errorf("step record %q: %w", StepKey(task.ID, i), err)
		}
	}
	for i, st := range lz.got {
		steps[i] = *st
	}
	task.Steps, task.Partial = steps, nil
	if t.rw && !t.db.shared && !task.Status.Terminal() {
		// What the scan saw is what is committed once this transaction
		// is (operations after this one in it update the mirror after).
		id, kept := task.ID, slices.Clone(steps)
		t.After(func(*index.Index) { t.db.mirror.add(id, kept) })
	}
	return nil
}

// scanSteps reads, in one walk of the task's step prefix, the records of
// the steps before len(steps) that lz has not loaded, into steps.
func (t *Tx) scanSteps(id string, steps []ledger.StepState, lz *lazySteps) error {
	prefix := StepPrefix(id)
	it := t.txn.Iterate(IterOptions{Prefix: prefix, Prefetch: len(steps) + 1})
	defer it.Close()
	seen, want := 0, toRead(lz, len(steps))
	for it.Rewind(); it.Valid(); it.Next() {
		i, err := strconv.ParseUint(string(it.Key()[len(prefix):]), 16, 31)
		if err != nil || int(i) >= lz.n {
			return fmt.Errorf("%w: task %s has a step record %q past its %d steps", ErrDamaged, id, it.Key(), lz.n)
		}
		if int(i) >= len(steps) {
			break
		}
		if _, ok := lz.got[int(i)]; ok {
			continue
		}
		if err := it.Value(func(v []byte) error { return json.Unmarshal(v, &steps[i]) }); err != nil {
			return fmt.Errorf("step record %q: %w", it.Key(), err)
		}
		seen++
	}
	if err := it.Err(); err != nil {
		return err
	}
	if seen != want {
		return fmt.Errorf("%w: task %s has %d records of the %d steps wanted", ErrDamaged, id, seen, want)
	}
	return nil
}

// toRead is how many of the steps before n lz has not loaded.
func toRead(lz *lazySteps, n int) int {
	loaded := 0
	for i := range lz.got {
		if i < n {
			loaded++
		}
	}
	return n - loaded
}

// walkSteps is how many step records an operation on a shared database
// must read before it reads them in one walk rather than one by one: a
// walk in a read-write transaction first sends the writes it buffered,
// a round trip of its own.
const walkSteps = 8

// stepsBefore returns the states of the task's steps before step c: the
// ones the operation loaded, and the others read one by one or, on a
// shared database when they are walkSteps or more, in one walk. A record
// that cannot be read fails the operation (t.err) and reads as a zero step.
func (t *Tx) stepsBefore(task *ledger.Task, c int) []ledger.StepState {
	steps := make([]ledger.StepState, c)
	lz := lazyOf(task)
	if lz == nil || toRead(lz, c) < walkSteps {
		for i := range steps {
			steps[i] = t.StepValue(task, i)
		}
		return steps
	}
	if err := t.scanSteps(task.ID, steps, lz); err != nil {
		t.Fail(err)
	}
	for i, st := range lz.got {
		if i < c {
			steps[i] = *st
		}
	}
	return steps
}

// LoadTask reads a whole task (every step) inside a transaction.
func (t *Tx) LoadTask(id string) (*ledger.Task, error) {
	task := new(ledger.Task)
	if err := t.GetJSON(TaskKey(id), task); err != nil {
		return nil, err
	}
	if err := t.Fill(task); err != nil {
		return nil, err
	}
	return task, nil
}

// stepPrefixes keeps, for each task being worked, the states of the steps
// before its cursor, which lease snapshots share (Lease.Snapshot). Those
// steps are complete, and their states do not change until a repair or a
// retry sends the task back over them, which drops what is kept from there
// on. Every lease of a serial pipeline thus gets a snapshot without a copy
// of every step's state.
//
// A prefix grows past its length only by appending, and snapshots hold
// slices no longer than the prefix was when they were taken: growing it
// never writes what a snapshot can see. It grows (in the claiming
// transaction) from the transaction's own view, and keeps the growth only
// once that transaction committed.
type stepPrefixes struct {
	mu sync.Mutex
	m  map[string]*prefixEntry
}

type prefixEntry struct{ steps []ledger.StepState }

// maxPrefixTasks bounds the tasks whose prefix is kept; past it, it starts over.
const maxPrefixTasks = 1024

// Snapshot returns a copy of the task's header for lease snapshots, with
// Steps holding the steps before the cursor. The caller holds the index's
// lock.
func (t *Tx) Snapshot(task *ledger.Task) *ledger.Task {
	snap := task.Header()
	snap.Steps = t.db.prefixes.get(t, task)
	return snap
}

// TruncatePrefix forgets the kept states of step from and the ones after
// it of task id (a repair or retry entered them again); call it once the
// transaction committed.
func (d *DB) TruncatePrefix(id string, from int) { d.prefixes.truncate(id, from) }

// DropPrefix forgets the kept states of a task that is no longer runnable;
// call it once the transaction committed.
func (d *DB) DropPrefix(id string) { d.prefixes.drop(id) }

// LoadedSteps returns the steps of task an operation has loaded (and may
// have changed), by index, and true; false when the task holds its Steps.
func LoadedSteps(task *ledger.Task) (map[int]*ledger.StepState, bool) {
	if lz := lazyOf(task); lz != nil {
		return lz.got, true
	}
	return nil, false
}

func (p *stepPrefixes) get(t *Tx, task *ledger.Task) []ledger.StepState {
	id, c := task.ID, task.Cursor
	if t.db.shared { // another process may have sent the task back (a retry)
		return t.stepsBefore(task, c)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	e := p.m[id]
	if e == nil {
		if p.m == nil || len(p.m) >= maxPrefixTasks {
			p.m = map[string]*prefixEntry{}
		}
		e = &prefixEntry{}
		p.m[id] = e
	}
	n := len(e.steps)
	if n >= c {
		return e.steps[:c:c]
	}
	grown := e.steps
	for i := n; i < c; i++ {
		grown = append(grown, t.StepValue(task, i))
	}
	t.After(func(*index.Index) {
		p.mu.Lock()
		defer p.mu.Unlock()
		if p.m[id] == e && len(e.steps) == n {
			e.steps = grown
		}
	})
	return grown[:c:c]
}

// truncate forgets the kept states of step from and the ones after it (a
// repair or retry entered them again). Runs once the transaction committed.
func (p *stepPrefixes) truncate(id string, from int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if e := p.m[id]; e != nil && len(e.steps) > from {
		// A new array: snapshots may still read the old one.
		p.m[id] = &prefixEntry{steps: slices.Clone(e.steps[:from])}
	}
}

// drop forgets a task that is no longer runnable.
func (p *stepPrefixes) drop(id string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.m, id)
}

// stepMirror keeps every step's state, as committed, of the tasks that a
// write operation returned whole (a commit for a progress display, a
// cancel): such a caller then gets them by a copy instead of a read of
// every step record. An entry is made from a scan in a write transaction
// once it commits, kept up to date by every SaveTask after its transaction
// commits (write transactions and their after-commit updates run one at a
// time, in the group-commit leader), and dropped by any other write of the
// task record. Read-only transactions, which may read older versions, do
// not use it.
type stepMirror struct {
	mu sync.Mutex
	m  map[string][]ledger.StepState
}

// maxMirrorTasks bounds the tasks mirrored; past it, the mirror starts over.
const maxMirrorTasks = 64

// get returns a copy of the task's steps, or nil.
func (m *stepMirror) get(id string, n int) []ledger.StepState {
	m.mu.Lock()
	defer m.mu.Unlock()
	if e, ok := m.m[id]; ok && len(e) == n {
		return slices.Clone(e)
	}
	return nil
}

func (m *stepMirror) add(id string, steps []ledger.StepState) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.m == nil || len(m.m) >= maxMirrorTasks {
		m.m = map[string][]ledger.StepState{}
	}
	m.m[id] = steps
}

// apply records the steps a committed transaction wrote.
func (m *stepMirror) apply(id string, n int, wrote map[int]ledger.StepState) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.m[id]
	if !ok {
		return
	}
	if len(e) != n {
		delete(m.m, id)
		return
	}
	for i, st := range wrote {
		e[i] = st
	}
}

func (m *stepMirror) drop(id string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.m, id)
}
