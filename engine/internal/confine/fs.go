// Package confine gives access to the files beneath one host directory and
// nothing else, whatever the paths, the symbolic links in the tree, and
// whoever changes the tree at the same time.
//
// Every path is resolved one component at a time relative to an open
// directory descriptor ([os.Root]: openat with O_NOFOLLOW, symbolic links
// read and resolved by the walk, ".." tracked on a stack of descriptors),
// and every change is made by the *at system call on the descriptor of the
// parent directory. Nothing is checked by path and then used by path, so a
// concurrent swap of a directory for a symbolic link cannot redirect an
// operation outside: the walk either sees the link, and resolves it beneath
// the root or refuses it, or holds the directory it already opened.
//
// Symbolic links that stay beneath the root are followed; a link that
// leads outside, directly or through other links, and every absolute link
// (even one naming a place inside) are refused with EPERM. At most eight
// links are followed resolving one path (ELOOP beyond).
//
// The limits that remain are those of [os.Root]: bind mounts, /proc and
// device files beneath the root are reached like anything else, and the
// directory is not protected from the host's own processes (a hard link to
// an outside file placed in the tree by the host is the file itself).
package confine

import (
	"errors"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"time"

	experimentalsys "github.com/tetratelabs/wazero/experimental/sys"
	wsys "github.com/tetratelabs/wazero/sys"
)

// FS is a wazero file system over the tree beneath one host directory (a
// WASI preopen). Paths are those wazero passes: relative to the root,
// slash-separated, cleaned. It is safe for concurrent use, including by
// several module instances sharing the directory.
//
// Each operation opens the root afresh (one openat of its host path, which
// a guest cannot change: it sees only what is beneath), so an FS holds no
// descriptor and needs no Close; files it opens are closed by wazero with
// the module.
type FS struct {
	experimentalsys.UnimplementedFS
	dir     string
	guard   *Guard       // nil: writes are not bounded
	report  func(error)  // told of each write guard refuses; nil: none
	changed *atomic.Bool // set before a change to the tree; nil: none
}

// NewFS returns the file system beneath dir, which must be an existing
// directory. It is checked with one stat: every operation opens the root
// anyway, and an attempt's mounts are made anew for each attempt.
func NewFS(dir string) (*FS, error) {
	fi, err := os.Stat(dir)
	if err != nil {
		return nil, err
	}
	if !fi.IsDir() {
		return nil, &fs.PathError{Op: "open", Path: dir, Err: syscall.ENOTDIR}
	}
	return &FS{dir: dir}, nil
}

// Guarded returns a copy of c whose files' writes (Write, Pwrite, and
// Truncate growing a file) first take room from g, failing with EDQUOT or
// ENOSPC (an error wazero cannot name: the guest sees EIO unless its host
// translates it; see RefusedError.Errno) when g refuses, after telling
// report (when not nil) why, on the goroutine of the write.
func (c *FS) Guarded(g *Guard, report func(error)) *FS {
	out := *c
	out.guard, out.report = g, report
	return &out
}

// Tracked returns a copy of c that sets *changed before anything it does
// may change the tree: opening a file for writing or creating it, and
// every call that makes, removes or renames a name or changes a mode or a
// time, through the file system or a file it opened. It is set whether or
// not the change then succeeds; a tree whose *changed was never set is as
// the guest found it.
func (c *FS) Tracked(changed *atomic.Bool) *FS {
	out := *c
	out.changed = changed
	return &out
}

// change notes that what follows may change the tree.
func (c *FS) change() {
	if c.changed != nil {
		c.changed.Store(true)
	}
}

// String implements fmt.Stringer (wazero names preopens with it).
func (c *FS) String() string { return c.dir }

// open opens the root and cleans p into a name for it.
func (c *FS) open(p string) (*os.Root, string, experimentalsys.Errno) {
	name, errno := clean(p)
	if errno != 0 {
		return nil, "", errno
	}
	r, err := os.OpenRoot(c.dir)
	if err != nil {
		return nil, "", pathErrno(err)
	}
	return r, name, 0
}

// clean turns a path from wazero into a name beneath the root: "." for the
// root itself, EPERM for anything absolute or climbing out.
func clean(p string) (string, experimentalsys.Errno) {
	if p == "" || p == "/" {
		return ".", 0
	}
	if path.IsAbs(p) {
		return "", experimentalsys.EPERM
	}
	name := path.Clean(p)
	if name == ".." || len(name) > 2 && name[:3] == "../" {
		return "", experimentalsys.EPERM
	}
	return name, 0
}

// pathErrno maps an error of a path operation to an Errno. An error that
// carries no system error number is os.Root refusing the path (it leads
// outside, or through an absolute link): EPERM.
func pathErrno(err error) experimentalsys.Errno {
	if err == nil {
		return 0
	}
	var en syscall.Errno
	if errors.As(err, &en) {
		return experimentalsys.UnwrapOSError(en)
	}
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return experimentalsys.ENOENT
	case errors.Is(err, fs.ErrExist):
		return experimentalsys.EEXIST
	case errors.Is(err, fs.ErrInvalid):
		return experimentalsys.EINVAL
	}
	return experimentalsys.EPERM
}

// OpenFile implements experimentalsys.FS.
func (c *FS) OpenFile(p string, flag experimentalsys.Oflag, perm fs.FileMode) (experimentalsys.File, experimentalsys.Errno) {
	if flag&experimentalsys.O_DIRECTORY != 0 && flag&(experimentalsys.O_WRONLY|experimentalsys.O_RDWR) != 0 {
		return nil, experimentalsys.EISDIR
	}
	if flag&(experimentalsys.O_WRONLY|experimentalsys.O_RDWR|experimentalsys.O_CREAT|experimentalsys.O_TRUNC|experimentalsys.O_APPEND) != 0 {
		c.change()
	}
	r, name, errno := c.open(p)
	if errno != 0 {
		return nil, errno
	}
	defer r.Close()
	var f *os.File
	if flag&experimentalsys.O_NOFOLLOW != 0 {
		// os.Root follows a link in the last element; the guest asked
		// not to: open it in its parent without following.
		f, errno = openNoFollow(r, name, osFlag(flag), perm)
	} else {
		var err error
		f, err = r.OpenFile(name, osFlag(flag), perm)
		errno = pathErrno(err)
	}
	if errno != 0 {
		return nil, errno
	}
	fl := newFile(f, flag)
	fl.guard, fl.report, fl.changed = c.guard, c.report, c.changed
	return fl, 0
}

// osFlag converts wazero's open flags (what wazero's own directory file
// system does).
func osFlag(oflag experimentalsys.Oflag) int {
	var flag int
	switch oflag & (experimentalsys.O_RDONLY | experimentalsys.O_RDWR | experimentalsys.O_WRONLY) {
	case experimentalsys.O_RDONLY:
		flag |= os.O_RDONLY
	case experimentalsys.O_RDWR:
		flag |= os.O_RDWR
	case experimentalsys.O_WRONLY:
		flag |= os.O_WRONLY
	}
	if oflag&experimentalsys.O_APPEND != 0 {
		flag |= os.O_APPEND
	}
	if oflag&experimentalsys.O_CREAT != 0 {
		flag |= os.O_CREATE
	}
	if oflag&experimentalsys.O_EXCL != 0 {
		flag |= os.O_EXCL
	}
	if oflag&experimentalsys.O_SYNC != 0 {
		flag |= os.O_SYNC
	}
	if oflag&experimentalsys.O_TRUNC != 0 {
		flag |= os.O_TRUNC
	}
	return flag | sysOflag(oflag)
}

// Lstat implements experimentalsys.FS.
func (c *FS) Lstat(p string) (wsys.Stat_t, experimentalsys.Errno) {
	return c.stat(p, (*os.Root).Lstat)
}

// Stat implements experimentalsys.FS.
func (c *FS) Stat(p string) (wsys.Stat_t, experimentalsys.Errno) {
	return c.stat(p, (*os.Root).Stat)
}

// stat is Stat or Lstat, by the os.Root method given.
func (c *FS) stat(p string, fn func(*os.Root, string) (fs.FileInfo, error)) (wsys.Stat_t, experimentalsys.Errno) {
	r, name, errno := c.open(p)
	if errno != 0 {
		return wsys.Stat_t{}, errno
	}
	defer r.Close()
	fi, err := fn(r, name)
	if err != nil {
		return wsys.Stat_t{}, pathErrno(err)
	}
	return wsys.NewStat_t(fi), 0
}

// Mkdir implements experimentalsys.FS.
func (c *FS) Mkdir(p string, perm fs.FileMode) experimentalsys.Errno {
	c.change()
	r, name, errno := c.open(p)
	if errno != 0 {
		return errno
	}
	defer r.Close()
	if errno := pathErrno(r.Mkdir(name, perm)); errno != experimentalsys.ENOTDIR {
		return errno
	}
	return experimentalsys.ENOENT // as wazero reports a missing parent
}

// Chmod implements experimentalsys.FS. A link in the last element is
// followed beneath the root; should it be swapped for a link while the
// call runs, the link itself is changed (see os.Root), never a file
// outside.
func (c *FS) Chmod(p string, perm fs.FileMode) experimentalsys.Errno {
	c.change()
	r, name, errno := c.open(p)
	if errno != 0 {
		return errno
	}
	defer r.Close()
	return pathErrno(r.Chmod(name, perm))
}

// Rename implements experimentalsys.FS.
func (c *FS) Rename(from, to string) experimentalsys.Errno {
	c.change()
	r, fromName, errno := c.open(from)
	if errno != 0 {
		return errno
	}
	defer r.Close()
	toName, errno := clean(to)
	if errno != 0 {
		return errno
	}
	if fromName == toName {
		return 0
	}
	return pathErrno(r.Rename(fromName, toName))
}

// Rmdir implements experimentalsys.FS.
func (c *FS) Rmdir(p string) experimentalsys.Errno {
	c.change()
	r, name, errno := c.open(p)
	if errno != 0 {
		return errno
	}
	defer r.Close()
	return removeIn(r, name, true)
}

// Unlink implements experimentalsys.FS.
func (c *FS) Unlink(p string) experimentalsys.Errno {
	c.change()
	r, name, errno := c.open(p)
	if errno != 0 {
		return errno
	}
	defer r.Close()
	return removeIn(r, name, false)
}

// Link implements experimentalsys.FS. Neither name's last element is
// followed.
func (c *FS) Link(oldPath, newPath string) experimentalsys.Errno {
	c.change()
	r, oldName, errno := c.open(oldPath)
	if errno != 0 {
		return errno
	}
	defer r.Close()
	newName, errno := clean(newPath)
	if errno != 0 {
		return errno
	}
	return pathErrno(r.Link(oldName, newName))
}

// Symlink implements experimentalsys.FS. The target is not checked when
// the link is made but every time it is followed; an absolute target is
// refused (EPERM), as wazero's directory file system does.
func (c *FS) Symlink(oldPath, linkName string) experimentalsys.Errno {
	if path.IsAbs(oldPath) {
		return experimentalsys.EPERM
	}
	c.change()
	r, name, errno := c.open(linkName)
	if errno != 0 {
		return errno
	}
	defer r.Close()
	return pathErrno(r.Symlink(oldPath, name))
}

// Readlink implements experimentalsys.FS.
func (c *FS) Readlink(p string) (string, experimentalsys.Errno) {
	r, name, errno := c.open(p)
	if errno != 0 {
		return "", errno
	}
	defer r.Close()
	dst, err := r.Readlink(name)
	if err != nil {
		return "", pathErrno(err)
	}
	return filepath.ToSlash(dst), 0
}

// Utimens implements experimentalsys.FS, following a link in the last
// element beneath the root (with the race Chmod has).
func (c *FS) Utimens(p string, atim, mtim int64) experimentalsys.Errno {
	if atim == experimentalsys.UTIME_OMIT && mtim == experimentalsys.UTIME_OMIT {
		return 0
	}
	c.change()
	r, name, errno := c.open(p)
	if errno != 0 {
		return errno
	}
	defer r.Close()
	return pathErrno(r.Chtimes(name, nanosTime(atim), nanosTime(mtim)))
}

// nanosTime is the time for os.Root.Chtimes: zero (leave unchanged) for
// UTIME_OMIT.
func nanosTime(ns int64) time.Time {
	if ns == experimentalsys.UTIME_OMIT {
		return time.Time{}
	}
	return time.Unix(0, ns)
}

// split returns the parent of name and its last element.
func split(name string) (dir, base string) {
	dir, base = path.Split(name)
	if dir == "" {
		dir = "."
	}
	return dir, base
}
