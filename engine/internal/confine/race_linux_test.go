package confine

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
	experimentalsys "github.com/tetratelabs/wazero/experimental/sys"
	"golang.org/x/sys/unix"
)

// flipper swaps root/d, a directory, with root/swap, a link to ../outside,
// atomically (renameat2 RENAME_EXCHANGE) until stop is closed; done is
// closed when it has returned, err holds what ended it early.
type flipper struct {
	stop, done chan struct{}
	err        error
}

func startFlipper(t *testing.T, root string) *flipper {
	t.Helper()
	require.NoError(t, os.Mkdir(filepath.Join(root, "d"), 0o755))
	require.NoError(t, os.Symlink("../outside", filepath.Join(root, "swap")))
	f := &flipper{stop: make(chan struct{}), done: make(chan struct{})}
	d, swap := filepath.Join(root, "d"), filepath.Join(root, "swap")
	go func() {
		defer close(f.done)
		for {
			select {
			case <-f.stop:
				return
			default:
			}
			if err := unix.Renameat2(unix.AT_FDCWD, d, unix.AT_FDCWD, swap, unix.RENAME_EXCHANGE); err != nil {
				f.err = err
				return
			}
		}
	}()
	return f
}

func (f *flipper) finish(t *testing.T) {
	t.Helper()
	close(f.stop)
	<-f.done
	require.NoError(t, f.err)
}

func requireOutsideUntouched(t *testing.T, outside string) {
	t.Helper()
	entries, err := os.ReadDir(outside)
	require.NoError(t, err)
	require.Len(t, entries, 1, "nothing created outside")
	b, err := os.ReadFile(filepath.Join(outside, "secret.txt"))
	require.NoError(t, err)
	require.Equal(t, "secret", string(b))
}

// TestWriteFileRace: 2,000 writes to d/new/fN.txt while d is swapped with a
// link out of the root create nothing outside: each either lands inside or
// is refused as going through a link (ErrSymlink), whatever d is by the
// time the refusal is explained.
func TestWriteFileRace(t *testing.T) {
	t.Parallel()
	root, outside, _ := tree(t)
	f := startFlipper(t, root)
	var others []error
	for i := 0; i < 2000; i++ {
		if err := WriteFile(root, "d/new/f"+strconv.Itoa(i)+".txt", []byte("x"), 0o644); err != nil && !errors.Is(err, ErrSymlink) {
			others = append(others, err)
		}
	}
	f.finish(t)
	require.Empty(t, others, "a write refused only for the link it met (ErrSymlink)")
	requireOutsideUntouched(t, outside)
}

// TestFSRace: reads, creations, changes, hard links and removals through
// d, 2,000 rounds while d is swapped with a link out of the root, never
// reach outside.
func TestFSRace(t *testing.T) {
	t.Parallel()
	root, outside, c := tree(t)
	keep := filepath.Join(outside, "keep")
	require.NoError(t, os.Mkdir(keep, 0o755))
	f := startFlipper(t, root)
	leaks := 0
	buf := make([]byte, 16)
	for i := 0; i < 2000; i++ {
		if file, errno := c.OpenFile("d/secret.txt", experimentalsys.O_RDONLY, 0); errno == 0 {
			n, _ := file.Read(buf)
			if string(buf[:n]) == "secret" {
				leaks++
			}
			file.Close()
		}
		if file, errno := c.OpenFile("d/new.txt", experimentalsys.O_WRONLY|experimentalsys.O_CREAT, 0o644); errno == 0 {
			file.Close()
		}
		c.Mkdir("d/dir", 0o755)
		c.Symlink("x", "d/link")
		c.Rename("sub/a.txt", "d/a.txt")
		c.Rename("d/a.txt", "sub/a.txt")
		c.Unlink("d/secret.txt")
		c.Rmdir("d/keep")
		c.Readlink("d/link")
		c.Chmod("d/secret.txt", 0o600)
		c.Utimens("d/secret.txt", 0, 0)
		c.Link("d/secret.txt", "stolen")
		c.Link("sub/a.txt", "d/hard")
	}
	f.finish(t)
	require.Zero(t, leaks)
	var in, out unix.Stat_t
	if unix.Lstat(filepath.Join(root, "stolen"), &in) == nil {
		require.NoError(t, unix.Stat(filepath.Join(outside, "secret.txt"), &out))
		require.False(t, in.Dev == out.Dev && in.Ino == out.Ino, "no hard link to the file outside was made inside")
	}
	require.DirExists(t, keep, "rmdir did not reach outside")
	require.NoError(t, os.Remove(keep))
	requireOutsideUntouched(t, outside)
	fi, err := os.Stat(filepath.Join(outside, "secret.txt"))
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o644), fi.Mode().Perm())
}
