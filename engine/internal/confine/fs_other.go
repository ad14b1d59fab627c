//go:build !unix

package confine

import (
	"io"
	"io/fs"
	"os"

	experimentalsys "github.com/tetratelabs/wazero/experimental/sys"
)

// Without the *at calls of unix, what os.Root offers is all there is. It
// still keeps every operation beneath the root; what is weaker here:
// O_NOFOLLOW and the file-or-directory test of Unlink and Rmdir are checked
// with Lstat before the operation, so a concurrent swap can make them act
// on another entry beneath the root (never outside it), and appending,
// non-blocking mode and times cannot be changed on an open file (ENOSYS).

const dirFlag = os.O_RDONLY

func sysOflag(experimentalsys.Oflag) int { return 0 }

func openNoFollow(r *os.Root, name string, flag int, perm fs.FileMode) (*os.File, experimentalsys.Errno) {
	if fi, err := r.Lstat(name); err == nil && fi.Mode()&fs.ModeSymlink != 0 {
		return nil, experimentalsys.ELOOP
	}
	f, err := r.OpenFile(name, flag, perm)
	return f, pathErrno(err)
}

func removeIn(r *os.Root, name string, dir bool) experimentalsys.Errno {
	fi, err := r.Lstat(name)
	if err != nil {
		return pathErrno(err)
	}
	switch {
	case dir && !fi.IsDir():
		return experimentalsys.ENOTDIR
	case !dir && fi.IsDir():
		return experimentalsys.EISDIR
	}
	return pathErrno(r.Remove(name))
}

func setAppend(*os.File, bool) experimentalsys.Errno   { return experimentalsys.ENOSYS }
func setNonblock(*os.File, bool) experimentalsys.Errno { return experimentalsys.ENOSYS }

func datasync(f *os.File) experimentalsys.Errno { return experimentalsys.UnwrapOSError(f.Sync()) }

func futimens(*os.File, int64, int64) experimentalsys.Errno { return experimentalsys.ENOSYS }

// readdir reads up to n entries (all when n <= 0) with their types; serial
// numbers are not available (zero).
func readdir(d *os.File, n int) ([]experimentalsys.Dirent, experimentalsys.Errno) {
	entries, err := d.ReadDir(n)
	if err == io.EOF {
		err = nil
	}
	if err != nil {
		return nil, dirErrno(err)
	}
	dirents := make([]experimentalsys.Dirent, 0, len(entries))
	for _, e := range entries {
		dirents = append(dirents, experimentalsys.Dirent{Name: e.Name(), Type: e.Type()})
	}
	return dirents, 0
}
