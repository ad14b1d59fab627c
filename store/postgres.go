package store

import (
	"context"
	"fmt"
	"os"
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
		plan: o.Planner, idx: index.New(), pg: be}
	s.group.Max, s.group.Run, s.group.Complete = o.MaxBatch, s.runBatch, s.complete
	s.wire(kv.NewOn(be), nil)
	host, _ := os.Hostname()
	s.peers = &peers{be: be, now: o.Now, host: host, stale: 3 * o.Beat}
	s.leases.Alive = s.peers.alive
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
	s.peersDone.Add(2)
	go func() {
		defer s.peersDone.Done()
		s.beat(bg, o.Beat)
	}()
	go func() {
		defer s.peersDone.Done()
		be.Listen(bg, s.reindex)
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

// reindex reads tasks other processes changed into the claim index (all
// runnable ones when tasks is nil: notices may have been missed), and
// wakes the watchers of Changed.
//
// It holds the index's lock from before its snapshot is taken until the
// tasks are replaced: a commit of this process that lands meanwhile
// applies its index changes after, over what the snapshot showed, instead
// of having them undone by an older view.
func (s *Store) reindex(tasks []string) {
	s.idx.Mu.Lock()
	defer s.idx.Mu.Unlock()
	err := s.view(func(t *kv.Tx) error {
		if tasks == nil {
			for _, k := range t.Keys([]byte("a/")) {
				tasks = append(tasks, string(k[2:]))
			}
			tasks = append(tasks, s.idx.Active...)
		}
		for _, id := range tasks {
			x := index.New()
			if err := indexTask(t, id, x); err != nil {
				return err
			}
			s.idx.ReplaceTask(id, x)
		}
		return nil
	})
	if err != nil {
		s.log.Warn("could not read the tasks another process changed", "error", err)
	}
	s.changes.notify()
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
