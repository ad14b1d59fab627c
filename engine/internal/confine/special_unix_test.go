//go:build unix

package confine

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	experimentalsys "github.com/tetratelabs/wazero/experimental/sys"
	"golang.org/x/sys/unix"
)

// TestWriteFileOverFIFO: a named pipe a guest left in the workspace never
// blocks a write. At the last element it is replaced (the write renames a
// temporary file over it and opens nothing by that name); on the way it is
// refused as a directory would be that is not one (O_DIRECTORY fails before
// the pipe is opened). Were either opened, the test would hang.
func TestWriteFileOverFIFO(t *testing.T) {
	t.Parallel()
	root, _, _ := tree(t)
	require.NoError(t, unix.Mkfifo(filepath.Join(root, "pipe"), 0o644))

	require.NoError(t, CheckWrite(root, "pipe"))
	require.NoError(t, WriteFile(root, "pipe", []byte("data"), 0o600))
	fi, err := os.Lstat(filepath.Join(root, "pipe"))
	require.NoError(t, err)
	require.True(t, fi.Mode().IsRegular(), "the pipe was replaced by the file")

	require.NoError(t, unix.Mkfifo(filepath.Join(root, "dpipe"), 0o644))
	require.ErrorIs(t, CheckWrite(root, "dpipe/x.txt"), unix.ENOTDIR)
	require.ErrorIs(t, WriteFile(root, "dpipe/x.txt", []byte("data"), 0o600), unix.ENOTDIR)
}

// TestFSHardLinkOut: a guest cannot make a hard link to a file outside. A
// name that leads out is refused, and a hard link of a link that leads out
// is a second link (linkat does not follow it), refused when followed.
func TestFSHardLinkOut(t *testing.T) {
	t.Parallel()
	root, outside, c := tree(t)
	require.Equal(t, experimentalsys.EPERM, c.Link("out/secret.txt", "hard"))
	require.Equal(t, experimentalsys.EPERM, c.Link("sub/../../outside/secret.txt", "hard"))

	require.Zero(t, c.Symlink("../outside/secret.txt", "s"))
	require.Zero(t, c.Link("s", "hard"))
	st, errno := c.Lstat("hard")
	require.Zero(t, errno)
	require.Equal(t, os.ModeSymlink, st.Mode.Type(), "the link itself was linked")
	_, errno = c.OpenFile("hard", experimentalsys.O_RDONLY, 0)
	require.Equal(t, experimentalsys.EPERM, errno)
	_, errno = c.OpenFile("hard", experimentalsys.O_WRONLY|experimentalsys.O_TRUNC, 0)
	require.Equal(t, experimentalsys.EPERM, errno)

	var in, out unix.Stat_t
	require.NoError(t, unix.Lstat(filepath.Join(root, "hard"), &in))
	require.NoError(t, unix.Stat(filepath.Join(outside, "secret.txt"), &out))
	require.NotEqual(t, out.Ino, in.Ino)
	b, err := os.ReadFile(filepath.Join(outside, "secret.txt"))
	require.NoError(t, err)
	require.Equal(t, "secret", string(b))
}

// TestFSDotDotAtRoot: ".." at the root climbs nowhere, however it is
// spelled or reached through links made by the guest.
func TestFSDotDotAtRoot(t *testing.T) {
	t.Parallel()
	_, _, c := tree(t)
	require.Zero(t, c.Symlink("..", "up"))
	require.Zero(t, c.Symlink("sub/..", "here"))
	for _, p := range []string{"..", "../", "./..", "sub/../..", "up", "up/outside/secret.txt"} {
		_, errno := c.OpenFile(p, experimentalsys.O_RDONLY, 0)
		require.Equal(t, experimentalsys.EPERM, errno, p)
		_, errno = c.Stat(p)
		require.Equal(t, experimentalsys.EPERM, errno, p)
	}
	// here/.. is the root's own parent only by name: it stays the root,
	// where there is no outside/.
	_, errno := c.OpenFile("here/../outside/secret.txt", experimentalsys.O_RDONLY, 0)
	require.Equal(t, experimentalsys.ENOENT, errno)
	st, errno := c.Stat("here")
	require.Zero(t, errno)
	require.True(t, st.Mode.IsDir())
	f, errno := c.OpenFile("sub/..", experimentalsys.O_RDONLY|experimentalsys.O_DIRECTORY, 0)
	require.Zero(t, errno)
	require.Zero(t, f.Close())
}

// TestFileSetFlags: SetNonblock and SetAppend change the open file
// description and what the file reports, and fail on a closed file.
func TestFileSetFlags(t *testing.T) {
	t.Parallel()
	_, _, c := tree(t)
	wf, errno := c.OpenFile("sub/a.txt", experimentalsys.O_RDWR, 0)
	require.Zero(t, errno)
	f := wf.(*file)
	fl := func() int {
		t.Helper()
		var v int
		require.NoError(t, withFd(f.f, func(fd int) (err error) {
			v, err = unix.FcntlInt(uintptr(fd), unix.F_GETFL, 0)
			return err
		}))
		return v
	}
	require.Zero(t, f.SetNonblock(true))
	require.True(t, f.IsNonblock())
	require.NotZero(t, fl()&unix.O_NONBLOCK)
	require.Zero(t, f.SetAppend(true))
	require.True(t, f.IsAppend())
	require.NotZero(t, fl()&unix.O_APPEND)
	require.Zero(t, f.SetNonblock(false))
	require.False(t, f.IsNonblock())
	require.Zero(t, fl()&unix.O_NONBLOCK)
	require.True(t, f.IsAppend(), "the other flag is kept")
	require.Zero(t, f.Close())
	require.Equal(t, experimentalsys.EBADF, f.SetNonblock(true))
	require.Equal(t, experimentalsys.EBADF, f.SetAppend(false))
}

// TestSysOflag: the flags os has no name for reach the open call.
func TestSysOflag(t *testing.T) {
	t.Parallel()
	require.Zero(t, sysOflag(0))
	require.Equal(t, unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_NONBLOCK,
		sysOflag(experimentalsys.O_DIRECTORY|experimentalsys.O_NOFOLLOW|experimentalsys.O_NONBLOCK))
	require.NotZero(t, sysOflag(experimentalsys.O_DSYNC))
	require.NotZero(t, sysOflag(experimentalsys.O_RSYNC))
}
