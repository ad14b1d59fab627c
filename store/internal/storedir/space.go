// Package storedir keeps what the store guards of its directory outside
// Badger: who may open it (Lock, a flock beside the directory, taken
// before anything in it is read), who may read it (Private: owner-only
// modes whatever the umask), and how full its file system may get (Floor,
// the free-space floor below which writes are refused, since Badger writes
// through memory maps that a full disk turns into SIGBUS).
package storedir

import (
	"fmt"

	"github.com/lhengine/lhengine/ledger"
)

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

// Floor checks the free space of the store's file system against the
// floor. A nil *Floor checks nothing (in-memory stores).
type Floor struct {
	dir   string
	floor int64
	free  func(dir string) (int64, error)
}

// NewFloor is the floor of floor bytes of the file system of dir, whose
// free space free reads (tests replace it).
func NewFloor(dir string, floor int64, free func(dir string) (int64, error)) *Floor {
	return &Floor{dir: dir, floor: floor, free: free}
}

// Bytes is the floor; 0 for a nil Floor.
func (d *Floor) Bytes() int64 {
	if d == nil {
		return 0
	}
	return d.floor
}

// Check returns an error matching ErrNoSpace if free space is below the
// floor.
func (d *Floor) Check() error { return d.CheckWrite(0) }

// BigWrite is the size from which a write must fit above the floor; the
// floor itself has room for smaller ones.
const BigWrite = 1 << 20

// CheckWrite is Check for a transaction about to commit n bytes: the check
// before an operation is queued can see neither how much it, or the batch it
// joins, will write, nor what the transactions committed meanwhile took. A
// write of BigWrite bytes or more must leave the floor free.
func (d *Floor) CheckWrite(n int64) error {
	if d == nil || d.floor <= 0 {
		return nil
	}
	free, err := d.free(d.dir)
	if err != nil {
		return err
	}
	if n < BigWrite {
		n = 0
	}
	if free-n < d.floor {
		return &spaceError{dir: d.dir, free: free, floor: d.floor, write: n}
	}
	return nil
}
