package logsync

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestLogSyncRefusesLogsItCannotName: if the logs the sync relies on are
// not where it looks, Open fails instead of opening a store whose syncs
// would sync nothing.
func TestLogSyncRefusesLogsItCannotName(t *testing.T) {
	t.Parallel()
	cases := map[string][]string{
		"no logs":              {"MANIFEST"},
		"no value log":         {"00001.mem"},
		"no memtable log":      {"000001.vlog"},
		"memtable log renamed": {"000001.mem", "000001.vlog"},
		"value log renamed":    {"00001.mem", "1.vlog"},
	}
	for name, files := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			for _, f := range files {
				require.NoError(t, os.WriteFile(filepath.Join(dir, f), []byte("x"), 0o600))
			}
			l, err := New(dir)
			if err == nil {
				l.Close()
			}
			require.ErrorContains(t, err, "names its logs differently")
		})
	}
	l, err := New(func() string {
		dir := t.TempDir()
		for _, f := range []string{"00003.mem", "00004.mem", "000002.vlog"} {
			require.NoError(t, os.WriteFile(filepath.Join(dir, f), []byte("x"), 0o600))
		}
		return dir
	}())
	require.NoError(t, err)
	require.Equal(t, 4, l.mem.high)
	require.Equal(t, 2, l.vlog.high)
	l.Close()
}

// TestDurabilityWarning: on Windows the store says at open that commits
// are not crash-safe (Badger's msync does nothing there); elsewhere it
// says nothing.
func TestDurabilityWarning(t *testing.T) {
	t.Parallel()
	require.Contains(t, DurabilityWarning("windows"), "not crash-safe")
	for _, goos := range []string{"linux", "darwin", "freebsd"} {
		require.Empty(t, DurabilityWarning(goos))
	}
}
