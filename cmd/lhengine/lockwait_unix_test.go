//go:build unix

package main

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// waitUnlocked waits until nothing holds the lock of home's store: the
// commands this test ran have exited, but in a test binary whose other
// tests start processes all the time, a child forked and not yet exec'd
// may still hold a copy of a descriptor for a moment (flock locks belong
// to the open file, not the process). It takes and drops the lock,
// blocking, within a minute.
func waitUnlocked(t *testing.T, home string) {
	t.Helper()
	f, err := os.OpenFile(filepath.Join(home, "store.lock"), os.O_RDWR|os.O_CREATE, 0o600)
	require.NoError(t, err)
	defer f.Close()
	locked := make(chan error, 1)
	go func() { locked <- syscall.Flock(int(f.Fd()), syscall.LOCK_EX) }()
	select {
	case err := <-locked:
		require.NoError(t, err)
		require.NoError(t, syscall.Flock(int(f.Fd()), syscall.LOCK_UN))
	case <-time.After(time.Minute):
		t.Fatalf("the store of %s stayed locked for a minute after its commands exited", home)
	}
}
