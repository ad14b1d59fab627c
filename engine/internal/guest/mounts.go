package guest

import (
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/tetratelabs/wazero"
	experimentalsys "github.com/tetratelabs/wazero/experimental/sys"
	"github.com/tetratelabs/wazero/experimental/sysfs"
	wsys "github.com/tetratelabs/wazero/sys"
)

// Mount makes the host directory HostDir visible to the guest at GuestDir
// (a WASI preopen), read-only when ReadOnly is set.
//
// The guest cannot leave a mount: wazero refuses paths that climb out with
// "..", an absolute path outside every mount matches no preopen, and every
// path is resolved on the host, following symbolic links one at a time,
// and refused (EPERM) when a link leads outside the mount. The check and
// the use are two steps, so a mount must not be writable by anything that
// races the guest with symlinks of its own (another attempt sharing it, a
// host process).
type Mount struct {
	HostDir  string
	GuestDir string
	ReadOnly bool
}

// mountConfig is the filesystem of an attempt: nil for none.
func mountConfig(mounts []Mount) (wazero.FSConfig, error) {
	if len(mounts) == 0 {
		return nil, nil
	}
	cfg := wazero.NewFSConfig()
	seen := map[string]bool{}
	for _, m := range mounts {
		guestDir := m.GuestDir
		if guestDir == "" || !strings.HasPrefix(guestDir, "/") {
			return nil, fmt.Errorf("mount %q: guest directory %q must be an absolute path", m.HostDir, m.GuestDir)
		}
		guestDir = path.Clean(guestDir)
		if seen[guestDir] {
			return nil, fmt.Errorf("mount %q: guest directory %q is mounted twice", m.HostDir, guestDir)
		}
		seen[guestDir] = true
		root, err := filepath.Abs(m.HostDir)
		if err == nil {
			root, err = filepath.EvalSymlinks(root)
		}
		if err != nil {
			return nil, fmt.Errorf("mount %q: %w", m.HostDir, err)
		}
		if fi, err := os.Stat(root); err != nil {
			return nil, fmt.Errorf("mount %q: %w", m.HostDir, err)
		} else if !fi.IsDir() {
			return nil, fmt.Errorf("mount %q: not a directory", m.HostDir)
		}
		var fsys experimentalsys.FS = &confinedFS{FS: sysfs.DirFS(root), root: root}
		if m.ReadOnly {
			fsys = &sysfs.ReadFS{FS: fsys}
		}
		// What WithDirMount and WithReadOnlyDirMount do, with confinement.
		cfg = cfg.(sysfs.FSConfig).WithSysFSMount(fsys, guestDir)
	}
	return cfg, nil
}

// confinedFS is a directory filesystem that refuses paths resolving, through
// symbolic links, outside its root.
type confinedFS struct {
	experimentalsys.FS
	root string // absolute, symlinks resolved
}

// maxLinks bounds the symbolic links followed resolving one path.
const maxLinks = 40

// check resolves rel (a path relative to the root, as wazero passes it:
// cleaned, no leading "..") on the host and reports EPERM when it leads
// outside the root. The last element is followed only when followLast.
func (c *confinedFS) check(rel string, followLast bool) experimentalsys.Errno {
	todo := splitPath(rel)
	cur := c.root
	links := 0
	for len(todo) > 0 {
		elem := todo[0]
		todo = todo[1:]
		switch elem {
		case ".":
			continue
		case "..":
			cur = filepath.Dir(cur)
			if !c.inside(cur) {
				return experimentalsys.EPERM
			}
			continue
		}
		next := filepath.Join(cur, elem)
		if len(todo) == 0 && !followLast {
			return 0
		}
		fi, err := os.Lstat(next)
		if err != nil {
			// Nothing further exists to lead anywhere: what is created
			// is created here.
			return 0
		}
		if fi.Mode()&fs.ModeSymlink == 0 {
			cur = next
			continue
		}
		if links++; links > maxLinks {
			return experimentalsys.ELOOP
		}
		target, err := os.Readlink(next)
		if err != nil {
			return experimentalsys.UnwrapOSError(err)
		}
		if filepath.IsAbs(target) {
			target = filepath.Clean(target)
			if !c.inside(target) {
				return experimentalsys.EPERM
			}
			rest, _ := filepath.Rel(c.root, target)
			cur = c.root
			todo = append(splitPath(filepath.ToSlash(rest)), todo...)
			continue
		}
		todo = append(splitPath(filepath.ToSlash(target)), todo...)
	}
	return 0
}

func (c *confinedFS) inside(p string) bool {
	return p == c.root || strings.HasPrefix(p, c.root+string(filepath.Separator)) || c.root == string(filepath.Separator)
}

func splitPath(p string) []string {
	var out []string
	for _, e := range strings.Split(p, "/") {
		if e != "" {
			out = append(out, e)
		}
	}
	return out
}

// OpenFile implements experimentalsys.FS.
func (c *confinedFS) OpenFile(p string, flag experimentalsys.Oflag, perm fs.FileMode) (experimentalsys.File, experimentalsys.Errno) {
	if errno := c.check(p, flag&experimentalsys.O_NOFOLLOW == 0); errno != 0 {
		return nil, errno
	}
	return c.FS.OpenFile(p, flag, perm)
}

// Lstat implements experimentalsys.FS.
func (c *confinedFS) Lstat(p string) (wsys.Stat_t, experimentalsys.Errno) {
	if errno := c.check(p, false); errno != 0 {
		return wsys.Stat_t{}, errno
	}
	return c.FS.Lstat(p)
}

// Stat implements experimentalsys.FS.
func (c *confinedFS) Stat(p string) (wsys.Stat_t, experimentalsys.Errno) {
	if errno := c.check(p, true); errno != 0 {
		return wsys.Stat_t{}, errno
	}
	return c.FS.Stat(p)
}

// Mkdir implements experimentalsys.FS.
func (c *confinedFS) Mkdir(p string, perm fs.FileMode) experimentalsys.Errno {
	if errno := c.check(p, false); errno != 0 {
		return errno
	}
	return c.FS.Mkdir(p, perm)
}

// Chmod implements experimentalsys.FS.
func (c *confinedFS) Chmod(p string, perm fs.FileMode) experimentalsys.Errno {
	if errno := c.check(p, true); errno != 0 {
		return errno
	}
	return c.FS.Chmod(p, perm)
}

// Rename implements experimentalsys.FS.
func (c *confinedFS) Rename(from, to string) experimentalsys.Errno {
	if errno := c.check(from, false); errno != 0 {
		return errno
	}
	if errno := c.check(to, false); errno != 0 {
		return errno
	}
	return c.FS.Rename(from, to)
}

// Rmdir implements experimentalsys.FS.
func (c *confinedFS) Rmdir(p string) experimentalsys.Errno {
	if errno := c.check(p, false); errno != 0 {
		return errno
	}
	return c.FS.Rmdir(p)
}

// Unlink implements experimentalsys.FS.
func (c *confinedFS) Unlink(p string) experimentalsys.Errno {
	if errno := c.check(p, false); errno != 0 {
		return errno
	}
	return c.FS.Unlink(p)
}

// Link implements experimentalsys.FS.
func (c *confinedFS) Link(oldPath, newPath string) experimentalsys.Errno {
	if errno := c.check(oldPath, false); errno != 0 {
		return errno
	}
	if errno := c.check(newPath, false); errno != 0 {
		return errno
	}
	return c.FS.Link(oldPath, newPath)
}

// Symlink implements experimentalsys.FS. The link may point anywhere: it is
// checked when it is followed.
func (c *confinedFS) Symlink(oldPath, linkName string) experimentalsys.Errno {
	if errno := c.check(linkName, false); errno != 0 {
		return errno
	}
	return c.FS.Symlink(oldPath, linkName)
}

// Readlink implements experimentalsys.FS.
func (c *confinedFS) Readlink(p string) (string, experimentalsys.Errno) {
	if errno := c.check(p, false); errno != 0 {
		return "", errno
	}
	return c.FS.Readlink(p)
}

// Utimens implements experimentalsys.FS.
func (c *confinedFS) Utimens(p string, atim, mtim int64) experimentalsys.Errno {
	if errno := c.check(p, true); errno != 0 {
		return errno
	}
	return c.FS.Utimens(p, atim, mtim)
}
