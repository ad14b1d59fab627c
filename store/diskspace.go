package store

import (
	"fmt"

	"github.com/lhengine/lhengine/ledger"
)

// DefaultMinFreeBytes is the free-space floor when Options.MinFreeBytes is 0.
// Badger writes its write-ahead log, value log and tables through memory
// maps of files it extends without allocating them; if the disk fills up,
// the first write to an unallocated page kills the process with SIGBUS. The
// floor covers what Badger may allocate on its own after one more write: a
// memtable flush (16 MiB) and a level-0 compaction (up to five flushed tables
// and the level-1 tables they overlap).
const DefaultMinFreeBytes = 128 << 20

// spaceError is ErrNoSpace with the figures.
type spaceError struct {
	dir                string
	free, floor, write int64
}

func (e *spaceError) Error() string {
	if e.write > 0 && e.free >= e.floor {
		return fmt.Sprintf("%v: %d MiB free in %s, floor %d MiB: a write of %d MiB would go below it; the store refuses it (reads still work)",
			ledger.ErrNoSpace, e.free>>20, e.dir, e.floor>>20, (e.write+1<<20-1)>>20)
	}
	return fmt.Sprintf("%v: %d MiB free in %s, floor %d MiB; the store refuses writes until space is freed (reads still work)",
		ledger.ErrNoSpace, e.free>>20, e.dir, e.floor>>20)
}

func (e *spaceError) Is(target error) bool { return target == ledger.ErrNoSpace }

// MinFreeBytes is the store's free-space floor (Options.MinFreeBytes): 0
// when it enforces none (in memory, or the check disabled).
func (s *Store) MinFreeBytes() int64 {
	if s == nil || s.space == nil {
		return 0
	}
	return s.space.floor
}

// diskSpace checks the free space of the store's file system against the
// floor. A nil *diskSpace checks nothing (in-memory stores).
type diskSpace struct {
	dir   string
	floor int64
	free  func(dir string) (int64, error) // tests replace it
}

// check returns a *spaceError if free space is below the floor.
func (d *diskSpace) check() error { return d.checkWrite(0) }

// bigWrite is the size from which a write must fit above the floor; the
// floor itself has room for smaller ones.
const bigWrite = 1 << 20

// checkWrite is check for a transaction about to commit n bytes: the check
// before an operation is queued can see neither how much it, or the batch it
// joins, will write, nor what the transactions committed meanwhile took. A
// write of bigWrite bytes or more must leave the floor free.
func (d *diskSpace) checkWrite(n int64) error {
	if d == nil || d.floor <= 0 {
		return nil
	}
	free, err := d.free(d.dir)
	if err != nil {
		return err
	}
	if n < bigWrite {
		n = 0
	}
	if free-n < d.floor {
		return &spaceError{dir: d.dir, free: free, floor: d.floor, write: n}
	}
	return nil
}
