package store

import "sync"

// changes tells watchers that the ledger changed: every batch of
// transactions that commits closes the current channel and starts a new
// one. A watcher takes Changed(), reads what it needs, and waits on the
// channel it took: a commit that lands between the two still wakes it, and
// any number of commits while it reads wake it once.
type changes struct {
	mu sync.Mutex
	ch chan struct{}
}

func (c *changes) current() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ch == nil {
		c.ch = make(chan struct{})
	}
	return c.ch
}

func (c *changes) notify() {
	c.mu.Lock()
	if c.ch != nil {
		close(c.ch)
		c.ch = nil
	}
	c.mu.Unlock()
}

// Changed returns a channel that is closed when the next transaction
// commits (for a durable change, once it is synced). Take it before reading,
// then wait on it, to miss nothing: an event log follower reads the events
// after the last one it saw each time it is woken.
func (s *Store) Changed() <-chan struct{} { return s.changes.current() }

// OthersChanged returns a channel that is closed once this store has read
// what other processes sharing its database committed (PostgreSQL): an
// idle worker waits on it, besides its poll, to claim the units another
// process's commit made ready at once. On the embedded store, which one
// process has open, it is never closed.
func (s *Store) OthersChanged() <-chan struct{} { return s.others.current() }
