package benchrun

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestFsyncFloorReportsAFailedWrite: the fsync floor's file is /dev/full,
// whose every write fails with ENOSPC; the floor refuses to start rather
// than time syncs of a block it never wrote.
func TestFsyncFloorReportsAFailedWrite(t *testing.T) {
	t.Parallel()
	if _, err := os.Stat("/dev/full"); err != nil {
		t.Skip("no /dev/full:", err)
	}
	dir := t.TempDir()
	require.NoError(t, os.Symlink("/dev/full", filepath.Join(dir, "fsync.dat")))
	f, err := newFsyncFloor(dir)
	if f != nil {
		f.close()
	}
	require.ErrorIs(t, err, syscall.ENOSPC)
}
