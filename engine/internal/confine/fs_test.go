package confine

import (
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	experimentalsys "github.com/tetratelabs/wazero/experimental/sys"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// tree makes root/{sub/a.txt, in -> sub, out -> ../outside, abs -> absolute
// path of sub} and outside/secret.txt beside root.
func tree(t *testing.T) (root, outside string, c *FS) {
	t.Helper()
	base := t.TempDir()
	root, outside = filepath.Join(base, "root"), filepath.Join(base, "outside")
	for _, d := range []string{root, outside, filepath.Join(root, "sub")} {
		require.NoError(t, os.Mkdir(d, 0o755))
	}
	require.NoError(t, os.WriteFile(filepath.Join(root, "sub", "a.txt"), []byte("inner"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(outside, "secret.txt"), []byte("secret"), 0o644))
	require.NoError(t, os.Symlink("sub", filepath.Join(root, "in")))
	require.NoError(t, os.Symlink("../outside", filepath.Join(root, "out")))
	require.NoError(t, os.Symlink(filepath.Join(root, "sub"), filepath.Join(root, "abs")))
	c, err := NewFS(root)
	require.NoError(t, err)
	return root, outside, c
}

func readAll(t *testing.T, f experimentalsys.File) string {
	t.Helper()
	var out []byte
	buf := make([]byte, 4)
	for {
		n, errno := f.Read(buf)
		require.Zero(t, errno)
		if n == 0 {
			return string(out)
		}
		out = append(out, buf[:n]...)
	}
}

// TestFSPaths: each path operation works beneath the root, follows relative
// links that stay inside, and refuses (EPERM) links out, absolute links and
// paths that climb out.
func TestFSPaths(t *testing.T) {
	t.Parallel()
	root, outside, c := tree(t)

	f, errno := c.OpenFile("in/a.txt", experimentalsys.O_RDONLY, 0)
	require.Zero(t, errno)
	require.Equal(t, "inner", readAll(t, f))
	require.Zero(t, f.Close())

	for _, p := range []string{"out/secret.txt", "abs/a.txt", "../outside/secret.txt", "sub/../../outside/secret.txt", "/etc/passwd"} {
		_, errno := c.OpenFile(p, experimentalsys.O_RDONLY, 0)
		require.Equal(t, experimentalsys.EPERM, errno, p)
		_, errno = c.Stat(p)
		require.Equal(t, experimentalsys.EPERM, errno, p)
		require.Equal(t, experimentalsys.EPERM, c.Mkdir(p+"x", 0o755), p)
		require.Equal(t, experimentalsys.EPERM, c.Chmod(p, 0o600), p)
		require.Equal(t, experimentalsys.EPERM, c.Utimens(p, 0, 0), p)
		require.Equal(t, experimentalsys.EPERM, c.Unlink(p), p)
		require.Equal(t, experimentalsys.EPERM, c.Rename(p, "stolen"), p)
		require.Equal(t, experimentalsys.EPERM, c.Link(p, "stolen"), p)
	}
	_, errno = c.OpenFile("out/new.txt", experimentalsys.O_WRONLY|experimentalsys.O_CREAT, 0o644)
	require.Equal(t, experimentalsys.EPERM, errno)

	// The links themselves are entries of the root.
	st, errno := c.Lstat("out")
	require.Zero(t, errno)
	require.Equal(t, fs.ModeSymlink, st.Mode.Type())
	dst, errno := c.Readlink("out")
	require.Zero(t, errno)
	require.Equal(t, "../outside", dst)
	st, errno = c.Stat("in")
	require.Zero(t, errno)
	require.True(t, st.Mode.IsDir())

	// O_NOFOLLOW refuses a link in the last element.
	_, errno = c.OpenFile("in", experimentalsys.O_RDONLY|experimentalsys.O_NOFOLLOW, 0)
	require.Equal(t, experimentalsys.ELOOP, errno)

	// Changes.
	require.Zero(t, c.Mkdir("new", 0o755))
	require.Equal(t, experimentalsys.EEXIST, c.Mkdir("new", 0o755))
	require.Equal(t, experimentalsys.ENOENT, c.Mkdir("missing/new", 0o755))
	f, errno = c.OpenFile("new/b.txt", experimentalsys.O_WRONLY|experimentalsys.O_CREAT|experimentalsys.O_EXCL, 0o644)
	require.Zero(t, errno)
	_, errno = f.Write([]byte("bee"))
	require.Zero(t, errno)
	require.Zero(t, f.Close())
	require.Zero(t, c.Rename("new/b.txt", "in/b.txt"))
	require.Zero(t, c.Link("sub/b.txt", "hard.txt"))
	require.Zero(t, c.Symlink("hard.txt", "soft"))
	require.Equal(t, experimentalsys.EPERM, c.Symlink("/etc/passwd", "abslink"))
	require.Zero(t, c.Chmod("soft", 0o600))
	require.Zero(t, c.Utimens("soft", time.Unix(1000, 0).UnixNano(), experimentalsys.UTIME_OMIT))
	fi, err := os.Stat(filepath.Join(root, "sub", "b.txt"))
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), fi.Mode().Perm(), "chmod followed the link inside")
	require.Equal(t, experimentalsys.EISDIR, c.Unlink("new"))
	require.Equal(t, experimentalsys.ENOTDIR, c.Rmdir("hard.txt"))
	require.Zero(t, c.Unlink("soft"))
	require.Zero(t, c.Unlink("hard.txt"))
	require.Zero(t, c.Rmdir("new"))
	require.Zero(t, c.Unlink("out"), "removing a link removes the link, not its target")
	b, err := os.ReadFile(filepath.Join(root, "sub", "b.txt"))
	require.NoError(t, err)
	require.Equal(t, "bee", string(b))
	entries, err := os.ReadDir(outside)
	require.NoError(t, err)
	require.Len(t, entries, 1)
}

// TestFSFile: what a guest does with an open file and directory.
func TestFSFile(t *testing.T) {
	t.Parallel()
	root, _, c := tree(t)

	f, errno := c.OpenFile("sub/a.txt", experimentalsys.O_RDWR, 0)
	require.Zero(t, errno)
	defer f.Close()
	buf := make([]byte, 3)
	n, errno := f.Pread(buf, 2)
	require.Zero(t, errno)
	require.Equal(t, "ner", string(buf[:n]))
	off, errno := f.Seek(0, io.SeekEnd)
	require.Zero(t, errno)
	require.Equal(t, int64(5), off)
	require.Zero(t, f.SetAppend(true))
	require.True(t, f.IsAppend())
	_, errno = f.Seek(0, io.SeekStart)
	require.Zero(t, errno)
	_, errno = f.Write([]byte("!"))
	require.Zero(t, errno)
	require.Zero(t, f.Truncate(6))
	require.Zero(t, f.Sync())
	require.Zero(t, f.Datasync())
	require.Zero(t, f.Utimens(experimentalsys.UTIME_OMIT, time.Unix(2000, 0).UnixNano()))
	st, errno := f.Stat()
	require.Zero(t, errno)
	require.Equal(t, int64(6), st.Size)
	require.Equal(t, time.Unix(2000, 0).UnixNano(), st.Mtim)
	b, err := os.ReadFile(filepath.Join(root, "sub", "a.txt"))
	require.NoError(t, err)
	require.Equal(t, "inner!", string(b), "appended at the end after SetAppend")
	isDir, errno := f.IsDir()
	require.Zero(t, errno)
	require.False(t, isDir)

	d, errno := c.OpenFile(".", experimentalsys.O_RDONLY|experimentalsys.O_DIRECTORY, 0)
	require.Zero(t, errno)
	defer d.Close()
	names := func() []string {
		var names []string
		for {
			ents, errno := d.Readdir(2)
			require.Zero(t, errno)
			for _, e := range ents {
				require.NotZero(t, e.Ino, e.Name)
				names = append(names, e.Name+":"+e.Type.String())
			}
			if len(ents) < 2 {
				sort.Strings(names)
				return names
			}
		}
	}
	want := []string{"abs:L---------", "in:L---------", "out:L---------", "sub:d---------"}
	require.Equal(t, want, names())
	_, errno = d.Seek(0, io.SeekStart)
	require.Zero(t, errno)
	require.Equal(t, want, names(), "a rewind reads the directory again")
	_, errno = d.Seek(1, io.SeekStart)
	require.Equal(t, experimentalsys.EISDIR, errno)
	_, errno = d.Write([]byte("x"))
	require.Equal(t, experimentalsys.EISDIR, errno)
	_, errno = c.OpenFile(".", experimentalsys.O_RDWR|experimentalsys.O_DIRECTORY, 0)
	require.Equal(t, experimentalsys.EISDIR, errno)
}

// TestTrackedSetsChangedBeforeAnyChange: reads, stats, listings and
// opening for reading leave the flag unset; every call that may change the
// tree sets it, whether it then succeeds or not (the calls run in any
// order, so some find what they name gone).
func TestTrackedSetsChangedBeforeAnyChange(t *testing.T) {
	t.Parallel()
	_, _, plain := tree(t)
	var changed atomic.Bool
	c := plain.Tracked(&changed)

	f, errno := c.OpenFile("sub/a.txt", experimentalsys.O_RDONLY, 0)
	require.Zero(t, errno)
	require.Equal(t, "inner", readAll(t, f))
	_, errno = f.Stat()
	require.Zero(t, errno)
	require.Zero(t, f.Close())
	d, errno := c.OpenFile("sub", experimentalsys.O_RDONLY|experimentalsys.O_DIRECTORY, 0)
	require.Zero(t, errno)
	_, errno = d.Readdir(-1)
	require.Zero(t, errno)
	_, errno = c.Stat("in/a.txt")
	require.Zero(t, errno)
	_, errno = c.Lstat("in")
	require.Zero(t, errno)
	_, errno = c.Readlink("in")
	require.Zero(t, errno)
	require.False(t, changed.Load(), "reading changes nothing")

	changes := map[string]func(){
		"open for writing":  func() { closeIfOpen(c.OpenFile("sub/a.txt", experimentalsys.O_WRONLY, 0)) },
		"open read-write":   func() { closeIfOpen(c.OpenFile("sub/a.txt", experimentalsys.O_RDWR, 0)) },
		"create":            func() { closeIfOpen(c.OpenFile("new.txt", experimentalsys.O_CREAT, 0o644)) },
		"truncate at open":  func() { closeIfOpen(c.OpenFile("sub/a.txt", experimentalsys.O_TRUNC, 0)) },
		"append":            func() { closeIfOpen(c.OpenFile("sub/a.txt", experimentalsys.O_APPEND, 0)) },
		"mkdir":             func() { c.Mkdir("d", 0o755) },
		"chmod":             func() { c.Chmod("sub/a.txt", 0o600) },
		"rename":            func() { c.Rename("sub/a.txt", "sub/b.txt") },
		"rmdir":             func() { c.Rmdir("nothing") },
		"unlink":            func() { c.Unlink("nothing") },
		"link":              func() { c.Link("sub/a.txt", "hard") },
		"symlink":           func() { c.Symlink("sub", "link") },
		"utimens":           func() { c.Utimens("sub", 1, 1) },
		"utimens of a file": func() { d.Utimens(1, 1) },
		"refused out of it": func() { c.Unlink("out/secret.txt") },
	}
	for name, change := range changes {
		changed.Store(false)
		change()
		require.True(t, changed.Load(), name)
	}
	require.Zero(t, d.Close())
}

// closeIfOpen closes what OpenFile opened, if it did.
func closeIfOpen(f experimentalsys.File, errno experimentalsys.Errno) {
	if errno == 0 {
		f.Close()
	}
}
