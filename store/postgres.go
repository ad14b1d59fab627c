package store

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/lhengine/lhengine/ledger"
	"github.com/lhengine/lhengine/store/internal/index"
	"github.com/lhengine/lhengine/store/internal/kv"
	"github.com/lhengine/lhengine/store/internal/pgkv"
)

// PostgresOptions configure OpenPostgres.
type PostgresOptions struct {
	Options
	// Migrate brings the database's schema up to this build's before
	// opening it (as `lhengine store migrate` does); without it a schema
	// that is behind is refused, naming that command.
	Migrate bool
	// Version is the lhengine version this process registers with.
	Version string
	// Beat is how often this process records that it is alive; 0 = 5s. A
	// process not seen for three beats is taken for dead: its leases go
	// back before they expire.
	Beat time.Duration
}

// OpenPostgres opens the store kept in the PostgreSQL database at url
// (postgres://…): the same records, lease protocol and group commit as
// the embedded store, on one table of keys and values (specs/ledger.md,
// "PostgreSQL"). A commit is durable when PostgreSQL's commit returns, so
// nothing waits for a sync of its own.
//
// Any number of processes, on any number of hosts, may have the store open
// at once: each registers (Workers lists them) and records every Beat
// that it is alive; each commit tells the others which tasks it changed
// (LISTEN/NOTIFY), and they read those tasks again into their claim
// indexes; two transactions that conflict cannot both commit (SERIALIZABLE),
// and the one refused runs again. A lease of a process that stopped, or
// was not seen for three beats, or whose pid is gone from this host, is
// taken back at the next claim; any other lease when it expires.
//
// Of Options, Now, Logger, MaxBatch and Planner apply; the rest are
// about Badger's files.
func OpenPostgres(ctx context.Context, url string, o PostgresOptions) (*Store, error) {
	o.setDefaults()
	if o.Beat <= 0 {
		o.Beat = 5 * time.Second
	}
	session := newSessionID()
	be, err := pgkv.Open(ctx, url, session, o.Migrate)
	if err != nil {
		return nil, fmt.Errorf("open store: %w", err)
	}
	s := &Store{now: o.Now, session: session, log: o.Logger,
		plan: o.Planner, idx: index.New(), pg: be, shapes: map[string]string{}}
	s.group.Max, s.group.Run, s.group.Complete = o.MaxBatch, s.runBatch, s.complete
	s.wire(kv.NewOn(be), nil)
	host, _ := os.Hostname()
	s.peers = &peers{be: be, now: o.Now, host: host, stale: 3 * o.Beat}
	s.leases.Alive, s.events.Alive = s.peers.alive, s.peers.alive
	now := o.Now()
	me := pgkv.Worker{Session: session, Host: host, PID: os.Getpid(), Version: o.Version, Started: now, LastSeen: now}
	if err := be.Register(ctx, me, now.Add(-forgetWorkers)); err != nil {
		be.Close()
		return nil, err
	}
	if err := s.peers.refresh(ctx); err != nil {
		be.Close()
		return nil, err
	}
	if err := s.rebuildIndex(); err != nil {
		be.Close()
		return nil, fmt.Errorf("open store: reading runnable tasks: %w", err)
	}
	bg, stop := context.WithCancel(context.WithoutCancel(ctx))
	s.stopPeers = stop
	h := newHeard()
	s.peersDone.Add(3)
	go func() {
		defer s.peersDone.Done()
		s.beat(bg, o.Beat)
	}()
	go func() {
		defer s.peersDone.Done()
		s.applyChanges(bg, h)
	}()
	go func() {
		defer s.peersDone.Done()
		be.Listen(bg, h.add)
	}()
	return s, nil
}

// forgetWorkers is how long a registration stays listed after its process
// stopped or was last seen.
const forgetWorkers = 24 * time.Hour

// closePostgres stops the beat and the listener and records that this
// process stopped, so that the others take its leases back at once.
func (s *Store) closePostgres() error {
	s.stopPeers()
	s.peersDone.Wait()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := s.pg.Stopped(ctx, s.session, s.now())
	s.pg.Close()
	return err
}

// beat records every interval that this process is alive, and reads the
// others' registrations.
func (s *Store) beat(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if err := s.pg.Seen(ctx, s.session, s.now()); err != nil && ctx.Err() == nil {
			s.log.Warn("could not record in the store that this process is alive", "error", err)
		}
		if err := s.peers.refresh(ctx); err != nil && ctx.Err() == nil {
			s.log.Warn("could not read the store's workers", "error", err)
		}
	}
}

// heard gathers the changes other processes' notices announced until
// applyChanges takes them in: while it reads one lot, notices keep
// arriving and are merged, so a busy store reads each task once per lot
// rather than once per notice.
type heard struct {
	mu    sync.Mutex
	all   bool                    // read every runnable task again
	tasks map[string]*pgkv.Change // by task; Units nil and Whole: the whole task
	wake  chan struct{}           // one token: there is something to take
}

func newHeard() *heard { return &heard{tasks: map[string]*pgkv.Change{}, wake: make(chan struct{}, 1)} }

// add merges cs (nil: anything may have changed) and wakes the applier.
func (h *heard) add(cs []pgkv.Change) {
	h.mu.Lock()
	if cs == nil {
		h.all = true
	}
	for _, c := range cs {
		old := h.tasks[c.Task]
		switch {
		case old == nil:
			h.tasks[c.Task] = &c
		case old.Whole:
		case c.Whole || len(old.Units)+len(c.Units) > unitsRead:
			old.Whole, old.Units = true, nil
		default:
			old.Units = append(old.Units, c.Units...)
		}
	}
	h.mu.Unlock()
	select {
	case h.wake <- struct{}{}:
	default:
	}
}

// take returns what was heard since the last take.
func (h *heard) take() (all bool, cs []*pgkv.Change) {
	h.mu.Lock()
	defer h.mu.Unlock()
	all, h.all = h.all, false
	for _, c := range h.tasks {
		cs = append(cs, c)
	}
	clear(h.tasks)
	return all, cs
}

// unitsRead bounds how many units of one task a lot reads one by one;
// past it (heard.add) the task is read whole.
const unitsRead = 64

// applyChanges takes in what the other processes changed as their notices
// are heard, until ctx ends.
func (s *Store) applyChanges(ctx context.Context, h *heard) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-h.wake:
		}
		all, cs := h.take()
		s.reindex(all, cs)
	}
}

// reindex reads what other processes changed into the claim index, and
// wakes the watchers of Changed. With all, it reads every runnable task
// (notices may have been missed). Otherwise, for each change: a task
// whose shape (status, cursor, live steps and their passes, planning)
// is the one this index last read has only the units named read again;
// any other is read whole.
//
// It holds the index's lock from before its snapshot is taken until the
// index is changed: a commit of this process that lands meanwhile
// applies its index changes after, over what the snapshot showed, instead
// of having them undone by an older view.
func (s *Store) reindex(all bool, cs []*pgkv.Change) {
	s.idx.Mu.Lock()
	defer s.idx.Mu.Unlock()
	if all {
		cs = nil
		seen := map[string]bool{}
		_ = s.view(func(t *kv.Tx) error {
			for _, k := range t.Keys([]byte("a/")) {
				seen[string(k[2:])] = true
			}
			return nil
		})
		for _, id := range s.idx.Active {
			seen[id] = true
		}
		for id := range seen {
			cs = append(cs, &pgkv.Change{Task: id, Whole: true})
		}
	}
	err := s.view(func(t *kv.Tx) error {
		for _, c := range cs {
			if err := s.reindexTask(t, c); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		s.log.Warn("could not read the tasks another process changed", "error", err)
		clear(s.shapes) // read them whole next time
	}
	s.changes.notify()
	s.others.notify()
}

// reindexTask reads change c of a task into the index (reindex).
func (s *Store) reindexTask(t *kv.Tx, c *pgkv.Change) error {
	task := new(ledger.Task)
	err := t.GetJSON(kv.TaskKey(c.Task), task)
	if errors.Is(err, ledger.ErrNotFound) {
		s.idx.RemoveTask(c.Task)
		delete(s.shapes, c.Task)
		return nil
	}
	if err != nil {
		return err
	}
	shape := taskShape(t, task)
	if err := t.Err(); err != nil {
		return err
	}
	if c.Whole || shape != s.shapes[c.Task] || !task.Status.Runnable() {
		x := index.New()
		if err := indexTask(t, c.Task, x); err != nil {
			return err
		}
		s.idx.ReplaceTask(c.Task, x)
		s.wholes++
		s.shapes[c.Task] = shape
		if !task.Status.Runnable() {
			delete(s.shapes, c.Task)
		}
		return nil
	}
	live := map[int]*ledger.StepState{}
	for _, i := range liveSteps(t, task) {
		live[i] = t.Step(task, i)
	}
	for _, cu := range c.Units {
		r := index.Ref{Task: c.Task, Step: cu.Step, Item: cu.Item}
		s.idx.RemoveReady(r)
		delete(s.idx.Leases, r)
		st := live[cu.Step]
		if st == nil {
			continue // not a unit of a live step
		}
		u := new(ledger.Unit)
		if err := t.GetJSON(kv.UnitKey(c.Task, cu.Step, cu.Item), u); errors.Is(err, ledger.ErrNotFound) {
			continue
		} else if err != nil {
			return err
		}
		if u.Pass == st.Pass {
			indexUnit(s.idx, r, u, st)
		}
	}
	return t.Err()
}

// taskShape is what of a runnable task decides which of its units the
// index holds: its status, cursor, live steps and their passes, and
// whether its current step was planned. Two reads of a task with the same
// shape differ, in the index, only by the units written between them.
func taskShape(t *kv.Tx, task *ledger.Task) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %d %t", task.Status, task.Cursor, t.Step(task, task.Cursor).Planned)
	if task.Status.Runnable() {
		for _, i := range liveSteps(t, task) {
			fmt.Fprintf(&b, " %d:%d", i, t.Step(task, i).Pass)
		}
	}
	return b.String()
}

// MigratePostgres brings the schema of the PostgreSQL database at url up
// to this build's, each version in a transaction of its own, and returns
// the versions before and after.
func MigratePostgres(ctx context.Context, url string) (from, to int, err error) {
	return pgkv.MigrateURL(ctx, url)
}

// Workers lists the processes registered in a PostgreSQL store, the
// earliest started first; the embedded store, which one process has open
// at a time, has none to list.
func (s *Store) Workers(ctx context.Context) ([]ledger.Worker, error) {
	if s.pg == nil {
		return nil, nil
	}
	ws, err := s.pg.Workers(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]ledger.Worker, len(ws))
	for i, w := range ws {
		out[i] = ledger.Worker{Session: w.Session, Host: w.Host, PID: w.PID, Version: w.Version,
			Started: w.Started, LastSeen: w.LastSeen, Stopped: w.Stopped, Alive: s.peers.alive(w.Session),
			This: w.Session == s.session}
	}
	return out, nil
}

// PostgresWorkers lists the processes registered in the PostgreSQL store
// at url, the earliest started first, without registering this one: a
// process is alive by the rule its peers apply (OpenPostgres), with the
// default beat.
func PostgresWorkers(ctx context.Context, url string) ([]ledger.Worker, error) {
	be, err := pgkv.Open(ctx, url, "", false)
	if err != nil {
		return nil, fmt.Errorf("open store: %w", err)
	}
	defer be.Close()
	host, _ := os.Hostname()
	p := &peers{be: be, now: time.Now, host: host, stale: 3 * 5 * time.Second}
	if err := p.refresh(ctx); err != nil {
		return nil, err
	}
	ws, err := be.Workers(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]ledger.Worker, len(ws))
	for i, w := range ws {
		out[i] = ledger.Worker{Session: w.Session, Host: w.Host, PID: w.PID, Version: w.Version,
			Started: w.Started, LastSeen: w.LastSeen, Stopped: w.Stopped, Alive: p.alive(w.Session)}
	}
	return out, nil
}

// peers are the other processes of a PostgreSQL store, as last read.
type peers struct {
	be    *pgkv.Backend
	now   func() time.Time
	host  string
	stale time.Duration

	mu     sync.Mutex
	byName map[string]pgkv.Worker
}

func (p *peers) refresh(ctx context.Context) error {
	ws, err := p.be.Workers(ctx)
	if err != nil {
		return err
	}
	m := make(map[string]pgkv.Worker, len(ws))
	for _, w := range ws {
		m[w.Session] = w
	}
	p.mu.Lock()
	p.byName = m
	p.mu.Unlock()
	return nil
}

// alive reports whether session's process may still run: it has not
// stopped, it was seen within stale, and, on this host, its pid is there.
// A session not read yet is alive: its leases' expiry decides.
func (p *peers) alive(session string) bool {
	p.mu.Lock()
	w, ok := p.byName[session]
	p.mu.Unlock()
	switch {
	case !ok:
		return true
	case !w.Stopped.IsZero(), w.LastSeen.Before(p.now().Add(-p.stale)):
		return false
	case w.Host == p.host && w.PID != os.Getpid():
		return processAlive(w.PID)
	}
	return true
}
