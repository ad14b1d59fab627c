// Package group is the store's group commit: concurrent state changes
// are gathered by whichever caller arrives first (the leader) into
// batches, each of which the store runs in one transaction and makes
// durable with one disk sync, so N concurrent commits cost about one sync,
// not N. Leadership passes on as soon as a batch's transaction has
// committed, so the next batch's transaction overlaps this one's sync
// (specs/RATIONALE.md, "Why group commit, and why is leadership handed on
// before the sync?"). An early operation's caller hears back once its
// transaction committed and waits for the sync through a Durability.
//
// The package knows nothing of transactions: a Queue's Run runs a batch
// and says whether it must be synced, its Complete syncs it and finishes
// its operations.
package group

import (
	"context"
	"slices"
	"sync"
)

// Op is one state change waiting for a transaction: Fn, as the store's
// Run takes it.
type Op[T any] struct {
	Fn T
	// Err is the operation's outcome, which Run and Complete set.
	Err error
	// SyncErr is, for an early operation whose caller has heard back
	// already, the failure of its sync (Complete sets it, never Err).
	SyncErr error

	done chan struct{} // closed when Fn's transaction committed (or failed) and, if it must be, synced
	lead chan struct{} // signalled when this op's goroutine must lead the next batch
	// An early op's caller hears back when its transaction committed
	// (committed closes), and waits for done itself through a Durability.
	early     bool
	committed chan struct{}
	// queued, when set, is called once the op has its place in the queue:
	// ops run, and commit, in the order they were queued.
	queued func()
}

// NewOp is an operation running fn.
func NewOp[T any](fn T) *Op[T] {
	return &Op[T]{Fn: fn, done: make(chan struct{}), lead: make(chan struct{}, 1)}
}

// Early reports whether o's caller hears back before its sync.
func (o *Op[T]) Early() bool { return o.early }

// Finish releases the operation's caller (Complete calls it once the
// operation is over, synced if it had to be).
func (o *Op[T]) Finish() { close(o.done) }

// A Queue gathers operations into batches of at most Max. Run runs a
// batch's operations (setting each one's Err) and reports whether any must
// be synced; Complete makes a batch durable when it must be and finishes
// its operations. Run is called by one leader at a time, in order;
// Complete of one batch may run beside Run of the next.
type Queue[T any] struct {
	Max      int
	Run      func(batch []*Op[T]) (sync bool)
	Complete func(batch []*Op[T], sync bool)

	mu      sync.Mutex // guards queue and leading
	queue   []*Op[T]
	leading bool
	// completing counts the syncs a leader handed to a goroutine of its own
	// to answer an early operation at once (Early); Wait waits.
	completing sync.WaitGroup
}

// Do runs fn in a batch and returns its outcome once it is complete
// (synced, if it must be).
func (q *Queue[T]) Do(fn T) error { return q.DoThen(fn, nil) }

// DoThen is Do that calls queued (unless nil) once fn has its place in
// the queue: operations run, and commit, in the order they were queued,
// so a caller that holds a lock to order its operations may release it
// then rather than after the commit.
func (q *Queue[T]) DoThen(fn T, queued func()) error {
	o := NewOp(fn)
	o.queued = queued
	return q.run(o)
}

// Early runs fn in a batch and returns as soon as its transaction
// committed, before its sync: the Durability says when it is on disk.
func (q *Queue[T]) Early(fn T) (Durability[T], error) { return q.EarlyThen(fn, nil) }

// EarlyThen is Early that calls queued as DoThen does.
func (q *Queue[T]) EarlyThen(fn T, queued func()) (Durability[T], error) {
	o := NewOp(fn)
	o.early, o.committed, o.queued = true, make(chan struct{}), queued
	if err := q.run(o); err != nil {
		return Durability[T]{}, err
	}
	return Durability[T]{o: o}, nil
}

// Wait waits for the syncs that leaders left running beside their early
// operations' callers.
func (q *Queue[T]) Wait() { q.completing.Wait() }

// run queues o and waits for its transaction (and, unless o is early, its
// sync), leading batches while o's has not run.
func (q *Queue[T]) run(o *Op[T]) error {
	q.mu.Lock()
	q.queue = append(q.queue, o)
	if o.queued != nil {
		o.queued()
	}
	if q.leading {
		q.mu.Unlock()
		select {
		case <-o.done:
			return o.Err
		case <-o.committed: // nil unless o is early
			return o.Err
		case <-o.lead:
		}
		q.mu.Lock()
	} else {
		q.leading = true
	}
	// This goroutine leads: run the queue in batches until o's batch has
	// run. Leadership passes on as soon as that batch's transaction has
	// committed, so the next batch's transaction overlaps this one's sync.
	for {
		n := min(len(q.queue), q.Max)
		batch := q.queue[:n:n]
		q.queue = q.queue[n:]
		mine := slices.Contains(batch, o)
		q.mu.Unlock()
		sync := q.Run(batch)
		for _, b := range batch {
			if b.early {
				close(b.committed)
			}
		}
		q.mu.Lock()
		if mine {
			if len(q.queue) > 0 {
				q.queue[0].lead <- struct{}{}
			} else {
				q.leading = false
			}
			q.mu.Unlock()
			if o.early {
				// The caller goes on; this batch's sync goes on beside it.
				q.completing.Add(1)
				go func() {
					defer q.completing.Done()
					q.Complete(batch, sync)
				}()
				return o.Err
			}
			q.Complete(batch, sync)
			return o.Err
		}
		q.mu.Unlock()
		q.Complete(batch, sync)
		q.mu.Lock()
	}
}

// Durability is an operation whose transaction committed and whose sync
// may still be under way (Queue.Early). The zero value is on disk already.
type Durability[T any] struct{ o *Op[T] }

var closedDone = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// Done is closed once the operation is on disk, or the sync failed.
func (d Durability[T]) Done() <-chan struct{} {
	if d.o == nil {
		return closedDone
	}
	return d.o.done
}

// Wait waits for Done and returns the sync's failure (the operation's
// SyncErr), or ctx's error if ctx ends first.
func (d Durability[T]) Wait(ctx context.Context) error {
	select {
	case <-d.Done():
	case <-ctx.Done():
		return ctx.Err()
	}
	if d.o == nil {
		return nil
	}
	return d.o.SyncErr
}
