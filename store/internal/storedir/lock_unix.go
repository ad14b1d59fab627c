//go:build unix

package storedir

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"

	"github.com/lhengine/lhengine/ledger"
	"github.com/lhengine/lhengine/store/internal/filecheck"
)

// Lock is the store's own lock, taken before anything in the directory
// is looked at. Badger's lock is taken only inside badger.Open, after the
// integrity checks have read the files: without this one, a process
// checking a store that another is creating or writing sees files in the
// middle of being written (a log file of 0 bytes) and calls them damaged.
// A read-only open takes it shared: it may run beside other readers, never
// beside a writer.
type Lock struct{ f *os.File }

// LockPath is the lock file of the store in dir, beside it like the
// high-water mark.
func LockPath(dir string) string {
	dir = filepath.Clean(dir)
	return filepath.Join(filepath.Dir(dir), filepath.Base(dir)+".lock")
}

// Acquire takes the lock of the store in dir, shared or exclusive, without
// waiting: a store locked against it is ErrInUse.
func Acquire(dir string, shared bool) (*Lock, error) {
	path := LockPath(dir)
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("open store %s: %w", dir, err)
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open store %s: lock: %w", dir, err)
	}
	how := syscall.LOCK_EX
	if shared {
		how = syscall.LOCK_SH
	}
	for {
		err = syscall.Flock(int(f.Fd()), how|syscall.LOCK_NB)
		if !errors.Is(err, syscall.EINTR) {
			break
		}
	}
	if err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("%w: %s (%s is locked)", ledger.ErrInUse, dir, path)
		}
		return nil, fmt.Errorf("open store %s: lock: %w", dir, err)
	}
	return &Lock{f: f}, nil
}

// Release lets go of the lock (closing the file drops the flock). A nil
// or released Lock does nothing.
func (l *Lock) Release() {
	if l != nil && l.f != nil {
		l.f.Close()
		l.f = nil
	}
}

// Private makes the store in dir owner-only, whatever the umask it was
// created under: its directory 0700, so that no other user can reach
// anything in it, and its files, the lock and the high-water mark beside
// it 0600. Badger creates its files with the process's umask (0644 under
// the usual 022): those it creates while the store is open are reachable
// through the directory by nobody else, and made 0600 at the next open.
// opened reports that the directory was open to other users (a store
// created before this rule, or changed by hand).
func Private(dir string) (opened bool, err error) {
	fi, err := os.Stat(dir)
	if err != nil {
		return false, err
	}
	if fi.Mode().Perm()&0o077 != 0 {
		if err := os.Chmod(dir, 0o700); err != nil {
			return false, err
		}
		opened = true
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return opened, err
	}
	paths := []string{LockPath(dir), filecheck.MarkPath(dir)}
	for _, e := range entries {
		paths = append(paths, filepath.Join(dir, e.Name()))
	}
	for _, p := range paths {
		fi, err := os.Lstat(p)
		if errors.Is(err, os.ErrNotExist) {
			continue // deleted by Badger meanwhile, or never written
		}
		if err != nil {
			return opened, err
		}
		if fi.Mode().Type()&os.ModeSymlink != 0 || fi.Mode().Perm()&0o077 == 0 {
			continue
		}
		if err := os.Chmod(p, fi.Mode().Perm()&^0o077); err != nil && !errors.Is(err, os.ErrNotExist) {
			return opened, err
		}
	}
	return opened, nil
}
