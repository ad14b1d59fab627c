//go:build unix

package confine

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"

	"golang.org/x/sys/unix"
)

// openDirAt opens the directory elem in the directory dfd without
// following a link; ErrSymlink when elem is one. A link there fails the
// open with ELOOP, or with ENOTDIR (Linux checks O_DIRECTORY first), as
// does a file; which it was is asked after, and should elem be a directory
// by then, it was swapped in since and the open is tried again.
func openDirAt(dfd int, elem string) (int, error) {
	for swaps := 0; ; {
		fd, err := unix.Openat(dfd, elem, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		switch err {
		case nil:
			return fd, nil
		case unix.EINTR:
			continue
		case unix.ELOOP:
			return -1, ErrSymlink // one element opened with O_NOFOLLOW: a link
		case unix.ENOTDIR:
			var st unix.Stat_t
			if unix.Fstatat(dfd, elem, &st, unix.AT_SYMLINK_NOFOLLOW) == nil {
				switch st.Mode & unix.S_IFMT {
				case unix.S_IFLNK:
					return -1, ErrSymlink
				case unix.S_IFDIR:
					if swaps++; swaps < maxSwaps {
						continue
					}
				}
			}
		}
		return -1, err
	}
}

// maxSwaps bounds how many times openDirAt tries again an element that
// others keep changing.
const maxSwaps = 100

// walk opens the directory of elems[:len(elems)-1] beneath dir, one
// element at a time, creating missing ones when create. With !create a
// missing element ends the walk early: ok is false, and no descriptor is
// returned.
func walk(dir string, elems []string, create bool) (fd int, ok bool, err error) {
	fd, err = unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, false, &os.PathError{Op: "open", Path: dir, Err: err}
	}
	for i, elem := range elems[:len(elems)-1] {
		if create {
			if err := unix.Mkdirat(fd, elem, 0o755); err != nil && err != unix.EEXIST {
				unix.Close(fd)
				return -1, false, fmt.Errorf("creating %s: %w", strings.Join(elems[:i+1], "/"), err)
			}
		}
		next, err := openDirAt(fd, elem)
		unix.Close(fd)
		if !create && errors.Is(err, unix.ENOENT) {
			return -1, false, nil
		}
		if err != nil {
			return -1, false, fmt.Errorf("%s: %w", strings.Join(elems[:i+1], "/"), err)
		}
		fd = next
	}
	return fd, true, nil
}

func checkWrite(dir string, elems []string) error {
	fd, ok, err := walk(dir, elems, false)
	if err != nil || !ok {
		return err
	}
	defer unix.Close(fd)
	return checkLast(fd, elems)
}

// checkLast refuses a last element (in the directory fd) that is a link or
// a directory.
func checkLast(fd int, elems []string) error {
	var st unix.Stat_t
	elem := strings.Join(elems, "/")
	switch err := unix.Fstatat(fd, elems[len(elems)-1], &st, unix.AT_SYMLINK_NOFOLLOW); {
	case err == unix.ENOENT:
		return nil
	case err != nil:
		return fmt.Errorf("%s: %w", elem, err)
	case st.Mode&unix.S_IFMT == unix.S_IFLNK:
		return fmt.Errorf("%s: %w", elem, ErrSymlink)
	case st.Mode&unix.S_IFMT == unix.S_IFDIR:
		return fmt.Errorf("%s: %w", elem, unix.EISDIR)
	}
	return nil
}

func writeFile(dir string, elems []string, data []byte, perm fs.FileMode) error {
	dfd, _, err := walk(dir, elems, true)
	if err != nil {
		return err
	}
	defer unix.Close(dfd)
	base := elems[len(elems)-1]
	if err := checkLast(dfd, elems); err != nil {
		return err
	}
	tmp := tempName()
	tfd, err := unix.Openat(dfd, tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, uint32(perm.Perm()))
	if err != nil {
		return fmt.Errorf("creating a temporary file: %w", err)
	}
	werr := writeSynced(os.NewFile(uintptr(tfd), tmp), data)
	if werr == nil {
		// A link put at base since checkLast is replaced, not followed:
		// renameat acts on the entry in this directory.
		werr = unix.Renameat(dfd, tmp, dfd, base)
	}
	if werr != nil {
		unix.Unlinkat(dfd, tmp, 0)
		return fmt.Errorf("writing %s: %w", strings.Join(elems, "/"), werr)
	}
	if err := unix.Fsync(dfd); err != nil {
		return fmt.Errorf("syncing the directory of %s: %w", strings.Join(elems, "/"), err)
	}
	return nil
}
