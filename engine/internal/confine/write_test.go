package confine

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestWriteFile: WriteFile creates missing directories and replaces the
// file; a link anywhere in the path refuses it (ErrSymlink) before anything
// is created beyond the link, and so does CheckWrite, which changes
// nothing.
func TestWriteFile(t *testing.T) {
	t.Parallel()
	root, outside, _ := tree(t)

	require.NoError(t, CheckWrite(root, "a/b/c.txt"))
	_, err := os.Stat(filepath.Join(root, "a"))
	require.ErrorIs(t, err, os.ErrNotExist, "CheckWrite creates nothing")
	require.NoError(t, WriteFile(root, "a/b/c.txt", []byte("one"), 0o644))
	require.NoError(t, WriteFile(root, "a/b/c.txt", []byte("two"), 0o644))
	b, err := os.ReadFile(filepath.Join(root, "a", "b", "c.txt"))
	require.NoError(t, err)
	require.Equal(t, "two", string(b))
	entries, err := os.ReadDir(filepath.Join(root, "a", "b"))
	require.NoError(t, err)
	require.Len(t, entries, 1, "no temporary file left")

	for _, p := range []string{"out/new/x.txt", "out/x.txt", "in/x.txt", "in", "abs/x.txt"} {
		require.True(t, errors.Is(CheckWrite(root, p), ErrSymlink), p)
		require.True(t, errors.Is(WriteFile(root, p, []byte("x"), 0o644), ErrSymlink), p)
	}
	for _, p := range []string{"", "/x", "../x", "a/../../x", "."} {
		require.Error(t, CheckWrite(root, p), p)
		require.Error(t, WriteFile(root, p, []byte("x"), 0o644), p)
	}
	require.Error(t, WriteFile(root, "sub", []byte("x"), 0o644), "a directory is not replaced")
	require.Error(t, WriteFile(root, "sub/a.txt/x", []byte("x"), 0o644), "a file is not a directory")
	entries, err = os.ReadDir(outside)
	require.NoError(t, err)
	require.Len(t, entries, 1, "nothing created outside")
	_, err = os.Lstat(filepath.Join(root, "sub", "x.txt"))
	require.ErrorIs(t, err, os.ErrNotExist, "nothing written through the link inside either")
}
