package store

import (
	"sync"

	"github.com/dgraph-io/badger/v4"
)

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

// scanFrom is scan starting at the first key at or after start: a follower
// reads the events after the last it saw without walking the ones before.
func (t *tx) scanFrom(prefix, start []byte, fn func(key, val []byte) (bool, error)) error {
	opts := badger.DefaultIteratorOptions
	opts.Prefix = prefix
	opts.PrefetchSize = 64
	it := t.txn.NewIterator(opts)
	defer it.Close()
	for it.Seek(start); it.ValidForPrefix(prefix); it.Next() {
		item := it.Item()
		var more bool
		err := itemValue(item, func(v []byte) error {
			var err error
			more, err = fn(item.Key(), v)
			return err
		})
		if err != nil || !more {
			return err
		}
	}
	return nil
}
