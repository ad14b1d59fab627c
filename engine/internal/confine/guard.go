package confine

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sync"
	"syscall"

	"github.com/lhengine/lhengine/internal/diskfree"
)

// ErrQuota: a write would take the files beneath a guarded directory past
// its quota (Guard). The guest sees EDQUOT.
var ErrQuota = errors.New("disk quota exceeded")

// ErrNoSpace: a write would take the free space of a guarded directory's
// file system below its reserve (Guard). The guest sees ENOSPC.
var ErrNoSpace = errors.New("no space left on device")

// A Guard bounds what writes through the file systems that share it (FS.
// Guarded) and WriteFile callers that ask it (Reserve) add beneath one
// directory: a quota on the bytes of the files there, and a reserve of
// free space its file system keeps. It is safe for concurrent use.
//
// The quota counts the sizes of the regular files beneath the directory,
// measured by a walk (no link followed) on the first write, plus every
// byte written since: an overwrite, a truncation or a removal counts as
// nothing freed until a write would pass the quota, which walks the tree
// again and refuses only if the measured size still leaves no room. The
// reserve asks the file system for its free space before the first write
// and again after every reserveStep bytes written, so writes of several
// guards at once may dip into the reserve by reserveStep each.
type Guard struct {
	dir     string
	quota   int64 // < 0: none
	reserve int64 // 0: none
	free    func(dir string) (int64, error)

	mu       sync.Mutex
	measured bool
	used     int64 // bytes beneath dir: measured, plus written since
	inflight int64 // bytes reserved whose write has not ended (Written): not yet in a measure
	tokens   int64 // bytes that may be written before free space is asked again
}

// reserveStep is how many bytes a Guard lets be written between two looks
// at the file system's free space.
const reserveStep = 1 << 20

// NewGuard returns a guard of dir: quota bytes of files beneath it (< 0:
// no quota), reserve bytes of its file system kept free (0: none).
func NewGuard(dir string, quota, reserve int64) *Guard {
	return &Guard{dir: dir, quota: quota, reserve: reserve, free: diskfree.Bytes}
}

// RefusedError is a write a Guard refused: Is matches ErrQuota or
// ErrNoSpace.
type RefusedError struct {
	err          error // ErrQuota or ErrNoSpace
	dir          string
	write, limit int64
	have         int64 // bytes used (quota) or free (reserve)
}

func (e *RefusedError) Error() string {
	if e.err == ErrQuota {
		return fmt.Sprintf("%v: a write of %d bytes would take the files in the workspace from %d bytes past their quota of %d (limits.workspace_bytes)",
			e.err, e.write, e.have, e.limit)
	}
	return fmt.Sprintf("%v: a write of %d bytes would leave less than %d MiB free on the file system of the workspace (%d MiB free); the engine keeps that room for its store",
		e.err, e.write, e.limit>>20, e.have>>20)
}

func (e *RefusedError) Is(target error) bool { return target == e.err }

// Errno is the error number the guest sees: EDQUOT or ENOSPC.
func (e *RefusedError) Errno() syscall.Errno {
	if e.err == ErrQuota {
		return syscall.EDQUOT
	}
	return syscall.ENOSPC
}

// Reserve takes room for n more bytes beneath the directory, or returns a
// *RefusedError (or the error measuring failed with) and takes nothing.
// Once the write it let through has ended, the caller calls Written(n). A
// nil Guard allows everything.
func (g *Guard) Reserve(n int64) error {
	if g == nil || n <= 0 {
		return nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.quota >= 0 {
		if !g.measured || g.used+n > g.quota {
			used, err := treeBytes(g.dir)
			if err != nil {
				return err
			}
			// Writes reserved and still under way may not show in the
			// files yet: count them, or a concurrent writer's measure
			// would hand out their room a second time.
			g.used, g.measured = used+g.inflight, true
		}
		if g.used+n > g.quota {
			return &RefusedError{err: ErrQuota, dir: g.dir, write: n, limit: g.quota, have: g.used}
		}
	}
	if g.reserve > 0 && n > g.tokens {
		free, err := g.free(g.dir)
		if err != nil {
			return err
		}
		if free-n < g.reserve {
			g.tokens = 0
			return &RefusedError{err: ErrNoSpace, dir: g.dir, write: n, limit: g.reserve, have: free}
		}
		g.tokens = max(min(free-g.reserve, reserveStep), n)
	}
	g.tokens -= n
	g.used += n
	g.inflight += n
	return nil
}

// Written ends the write of n bytes that Reserve let through, whatever
// its outcome: from now on a measure of the files sees what it wrote. A
// nil Guard ignores it.
func (g *Guard) Written(n int64) {
	if g == nil || n <= 0 {
		return
	}
	g.mu.Lock()
	g.inflight -= n
	g.mu.Unlock()
}

// treeBytes is the sum of the sizes of the regular files beneath dir,
// walked without following links.
func treeBytes(dir string) (int64, error) {
	r, err := os.OpenRoot(dir)
	if err != nil {
		return 0, err
	}
	defer r.Close()
	var total int64
	err = fs.WalkDir(r.FS(), ".", func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil // removed while walking
			}
			return err
		}
		if d.Type().IsRegular() {
			if info, err := d.Info(); err == nil {
				total += info.Size()
			}
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("measuring the workspace: %w", err)
	}
	return total, nil
}
