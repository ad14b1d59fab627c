package confine

import (
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestGuardCountsWritesInFlight: one writer's room is taken, its write not
// yet landed, when another's reservation passes the quota and the files
// are measured again: the measure must not hand out the first writer's
// room a second time, or two writers together pass the quota.
func TestGuardCountsWritesInFlight(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	g := NewGuard(dir, 100, 0)
	require.NoError(t, g.Reserve(60)) // writer A: its 60 bytes not written yet
	err := g.Reserve(50)              // writer B: measures, and must count A's 60
	require.ErrorIs(t, err, ErrQuota)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "a"), make([]byte, 60), 0o600))
	g.Written(60)
	require.ErrorIs(t, g.Reserve(41), ErrQuota)
	require.NoError(t, g.Reserve(40), "A's bytes, once written, are measured once")
}

// TestGuardHoldsTheQuotaUnderConcurrentWriters: writers of one task write
// at once through the guard until refused; the files never pass the quota.
func TestGuardHoldsTheQuotaUnderConcurrentWriters(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	const quota, chunk = 1 << 20, 4 << 10
	g := NewGuard(dir, quota, 0)
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f, err := os.Create(filepath.Join(dir, string(rune('a'+w))))
			if err != nil {
				t.Error(err)
				return
			}
			defer f.Close()
			buf := make([]byte, chunk)
			for {
				err := g.Reserve(chunk)
				if errors.Is(err, ErrQuota) {
					return
				}
				if err != nil {
					t.Error(err)
					return
				}
				_, err = f.Write(buf)
				g.Written(chunk)
				if err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	used, err := treeBytes(dir)
	require.NoError(t, err)
	require.LessOrEqual(t, used, int64(quota))
	require.Greater(t, used, int64(quota-8*chunk), "the quota is used, not refused early")
}

// TestGuardReserveKeepsFreeSpace: a write that would leave less than the
// reserve free is refused with ENOSPC's error, the next one that fits is not.
func TestGuardReserveKeepsFreeSpace(t *testing.T) {
	t.Parallel()
	g := NewGuard(t.TempDir(), -1, 100<<20)
	free := int64(110 << 20)
	g.free = func(string) (int64, error) { return free, nil }
	err := g.Reserve(20 << 20)
	var re *RefusedError
	require.ErrorAs(t, err, &re)
	require.ErrorIs(t, err, ErrNoSpace)
	require.NoError(t, g.Reserve(5<<20))
}
