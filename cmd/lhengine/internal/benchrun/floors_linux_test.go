package benchrun

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

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

// TestParseStat: the busy time of /proc/stat's first line is every field
// but idle and iowait, in ticks of 1/100 s; a line of another shape is an
// error.
func TestParseStat(t *testing.T) {
	t.Parallel()
	busy, err := parseStat([]byte("cpu  100 20 30 5000 70 1 2 3 0 0\ncpu0 1 2 3 4 5 6 7 8 0 0\n"))
	require.NoError(t, err)
	require.Equal(t, 1560*time.Millisecond, busy) // 100+20+30+1+2+3 ticks
	_, err = parseStat([]byte("intr 1 2 3\n"))
	require.Error(t, err)
	_, err = parseStat([]byte("cpu 1 2 x 4 5 6 7 8\n"))
	require.Error(t, err)
	s := sampleCPU()
	require.True(t, s.ok)
	require.Positive(t, s.busy)
}
