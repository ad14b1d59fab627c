package logsync

import "sync"

// Coalescer coalesces disk syncs. A caller needs a sync that starts after its
// transaction committed; while one sync runs, every batch that commits
// meanwhile waits for it to end and then shares the next one. Without this,
// overlapping batches each paid a sync of their own (two operations per sync
// on a 10,000-unit fan-out).
//
// A failed sync is final: no sync runs after it, and it is the answer of
// every caller whose sync is that one or a later one. A caller whose sync
// succeeded before it hears success, whatever happened since.
type Coalescer struct {
	mu       sync.Mutex
	cond     *sync.Cond
	running  bool
	started  uint64 // syncs started
	done     uint64 // the latest sync that finished
	failedAt uint64 // the sync that failed, 0 if none did
	err      error  // its error
	waiting  int    // callers waiting for a running sync (Waiting)
	calls    int64  // syncs performed
}

// Sync returns once a call of fn that started after Sync was called has
// finished, calling fn itself if no such call is running. It returns the
// error of that call, or of the failed call before it.
func (y *Coalescer) Sync(fn func() error) error {
	y.mu.Lock()
	defer y.mu.Unlock()
	if y.cond == nil {
		y.cond = sync.NewCond(&y.mu)
	}
	target := y.started + 1
	for y.done < target && y.failedAt == 0 {
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
		y.running, y.done = false, mine
		if err != nil {
			y.failedAt, y.err = mine, err
		}
		y.cond.Broadcast()
	}
	if y.failedAt != 0 && y.failedAt <= target {
		return y.err
	}
	return nil
}

// Calls is the number of syncs performed.
func (y *Coalescer) Calls() int64 {
	y.mu.Lock()
	defer y.mu.Unlock()
	return y.calls
}

// Waiting is the number of callers waiting for a running sync.
func (y *Coalescer) Waiting() int {
	y.mu.Lock()
	defer y.mu.Unlock()
	return y.waiting
}
