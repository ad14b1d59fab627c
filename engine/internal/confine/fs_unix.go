//go:build unix

package confine

import (
	"io"
	"io/fs"
	"os"
	"path"

	experimentalsys "github.com/tetratelabs/wazero/experimental/sys"
	"golang.org/x/sys/unix"
)

// withFd runs fn on the descriptor of f without changing its mode (as
// f.Fd would).
func withFd(f *os.File, fn func(fd int) error) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var ferr error
	if err := rc.Control(func(fd uintptr) { ferr = fn(int(fd)) }); err != nil {
		return err
	}
	return ferr
}

// sysOflag converts the open flags os has no name for.
func sysOflag(oflag experimentalsys.Oflag) int {
	flag := syncOflag(oflag)
	if oflag&experimentalsys.O_DIRECTORY != 0 {
		flag |= unix.O_DIRECTORY
	}
	if oflag&experimentalsys.O_NOFOLLOW != 0 {
		flag |= unix.O_NOFOLLOW
	}
	if oflag&experimentalsys.O_NONBLOCK != 0 {
		flag |= unix.O_NONBLOCK
	}
	return flag
}

// parentDir opens the directory holding name, resolved beneath r, and
// returns it with the last element of name.
func parentDir(r *os.Root, name string) (*os.File, string, experimentalsys.Errno) {
	dir, base := split(name)
	pf, err := r.OpenFile(dir, dirFlag, 0)
	if err != nil {
		return nil, "", pathErrno(err)
	}
	return pf, base, 0
}

// openNoFollow opens name beneath r with O_NOFOLLOW honoured for its last
// element: a link there fails (ELOOP) instead of being followed.
func openNoFollow(r *os.Root, name string, flag int, perm fs.FileMode) (*os.File, experimentalsys.Errno) {
	pf, base, errno := parentDir(r, name)
	if errno != 0 {
		return nil, errno
	}
	defer pf.Close()
	var fd int
	err := withFd(pf, func(dfd int) (err error) {
		for {
			fd, err = unix.Openat(dfd, base, flag|unix.O_NOFOLLOW|unix.O_CLOEXEC, uint32(perm.Perm()))
			if err != unix.EINTR {
				return err
			}
		}
	})
	if err != nil {
		return nil, experimentalsys.UnwrapOSError(err)
	}
	return os.NewFile(uintptr(fd), path.Join(r.Name(), name)), 0
}

// removeIn removes name beneath r with unlinkat on its parent: a directory
// (rmdir) when dir, anything else otherwise. Only the last element is
// removed: a link there is removed, not followed.
func removeIn(r *os.Root, name string, dir bool) experimentalsys.Errno {
	pf, base, errno := parentDir(r, name)
	if errno != 0 {
		return errno
	}
	defer pf.Close()
	flags := 0
	if dir {
		flags = unix.AT_REMOVEDIR
	}
	err := withFd(pf, func(dfd int) error { return unix.Unlinkat(dfd, base, flags) })
	errno = experimentalsys.UnwrapOSError(err)
	if !dir && errno == experimentalsys.EPERM {
		errno = experimentalsys.EISDIR // what unlink of a directory reports on BSDs
	}
	return errno
}

// setAppend switches O_APPEND on the open file description.
func setAppend(f *os.File, enable bool) experimentalsys.Errno {
	return experimentalsys.UnwrapOSError(withFd(f, func(fd int) error {
		fl, err := unix.FcntlInt(uintptr(fd), unix.F_GETFL, 0)
		if err != nil {
			return err
		}
		if enable {
			fl |= unix.O_APPEND
		} else {
			fl &^= unix.O_APPEND
		}
		_, err = unix.FcntlInt(uintptr(fd), unix.F_SETFL, fl)
		return err
	}))
}

// setNonblock switches O_NONBLOCK on the open file description.
func setNonblock(f *os.File, enable bool) experimentalsys.Errno {
	return experimentalsys.UnwrapOSError(withFd(f, func(fd int) error { return unix.SetNonblock(fd, enable) }))
}

// readdir reads up to n names (all when n <= 0) from the open directory d
// and types each relative to its descriptor (fstatat, no path lookups); an
// entry removed in between is left out.
func readdir(d *os.File, n int) ([]experimentalsys.Dirent, experimentalsys.Errno) {
	names, err := d.Readdirnames(n)
	if err == io.EOF {
		err = nil
	}
	if err != nil {
		return nil, dirErrno(err)
	}
	dirents := make([]experimentalsys.Dirent, 0, len(names))
	err = withFd(d, func(dfd int) error {
		for _, name := range names {
			var st unix.Stat_t
			if err := unix.Fstatat(dfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err == unix.ENOENT {
				continue
			} else if err != nil {
				return err
			}
			dirents = append(dirents, experimentalsys.Dirent{Name: name, Ino: uint64(st.Ino), Type: modeType(uint32(st.Mode))})
		}
		return nil
	})
	if err != nil {
		return nil, dirErrno(err)
	}
	return dirents, 0
}

// modeType is the fs type bits of a stat mode.
func modeType(m uint32) fs.FileMode {
	switch m & unix.S_IFMT {
	case unix.S_IFDIR:
		return fs.ModeDir
	case unix.S_IFLNK:
		return fs.ModeSymlink
	case unix.S_IFIFO:
		return fs.ModeNamedPipe
	case unix.S_IFSOCK:
		return fs.ModeSocket
	case unix.S_IFCHR:
		return fs.ModeDevice | fs.ModeCharDevice
	case unix.S_IFBLK:
		return fs.ModeDevice
	case unix.S_IFREG:
		return 0
	}
	return fs.ModeIrregular
}
