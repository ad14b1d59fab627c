package store

import (
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lhengine/lhengine/store/internal/kv"
)

// logDigests returns a checksum of the content of each memtable and value
// log in dir, by file name.
func logDigests(t *testing.T, dir string) map[string]uint32 {
	t.Helper()
	out := map[string]uint32{}
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	table := crc32.MakeTable(crc32.Castagnoli)
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".mem") && !strings.HasSuffix(e.Name(), ".vlog") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if os.IsNotExist(err) {
			continue // flushed meanwhile
		}
		require.NoError(t, err)
		out[filepath.Join(dir, e.Name())] = crc32.Checksum(b, table)
	}
	return out
}

// TestSyncCoversEveryWrittenLog checks the store's own sync of Badger's
// logs against what the files show: before each sync, every memtable or
// value log whose content changed since the previous sync must be among
// the files the sync syncs. The writes make Badger move to new memtables
// and new value logs, and a value log that did not change is not synced.
func TestSyncCoversEveryWrittenLog(t *testing.T) {
	t.Parallel()
	f := newDiskFixture(t)
	var s *Store
	var last map[string]uint32
	var syncs, vlogSyncs, multiMem, multiVlog, dirSyncs int
	s = f.mustOpen(t, Options{memTable: 1 << 20, vlogFile: 1 << 20, syncFn: func(sync func() error) error {
		now := logDigests(t, f.dir)
		if err := sync(); err != nil {
			return err
		}
		synced := s.logs.Synced()
		if last != nil { // the first sync syncs every log there is
			for name, sum := range now {
				if old, ok := last[name]; !ok || old != sum {
					if fi, err := os.Stat(name); os.IsNotExist(err) || (err == nil && fi.Size() == 0) {
						// Flushed to a table (which Badger synced) and
						// deleted, or cut to 0 bytes on the way, meanwhile.
						continue
					}
					require.Contains(t, synced, name, "sync %d: %s changed since the previous sync but was not synced (synced: %v)", syncs, name, synced)
				}
			}
		}
		last = now
		syncs++
		var mems, vlogs int
		for _, name := range synced {
			switch {
			case strings.HasSuffix(name, ".mem"):
				mems++
			case strings.HasSuffix(name, ".vlog"):
				vlogs++
			case name == f.dir:
				dirSyncs++
			}
		}
		if vlogs > 0 {
			vlogSyncs++
		}
		if mems > 1 {
			multiMem++
		}
		if vlogs > 1 {
			multiVlog++
		}
		return nil
	}})
	write := func(key string, size int) {
		t.Helper()
		val := make([]byte, size)
		for i := range val {
			val[i] = byte(i*7 + len(key))
		}
		require.NoError(t, s.update(f.ctx, func(t *kv.Tx) error {
			t.Durable = true
			return t.Put([]byte(key), val)
		}))
	}
	// Small values: the memtable's log only, past two memtables.
	for i := range 200 {
		write(fmt.Sprintf("x/small/%d", i), 12<<10)
	}
	require.Equal(t, 1, vlogSyncs, "only the first sync syncs the value log while no value went there")
	require.Positive(t, multiMem, "a sync after Badger moved to a new memtable syncs the previous memtable's log too")
	// Values for the value log, past two value log files.
	for i := range 24 {
		write(fmt.Sprintf("x/big/%d", i), kv.ValueThreshold+i)
	}
	require.Equal(t, 25, vlogSyncs, "every write of a value of the threshold or more syncs the value log")
	require.Positive(t, multiVlog, "a sync after Badger moved to a new value log syncs the previous one too")
	require.Positive(t, dirSyncs, "a new log file's name is synced")
	// Small again: the value log is left alone.
	for i := range 10 {
		write(fmt.Sprintf("x/small/again/%d", i), 100)
	}
	require.Equal(t, 25, vlogSyncs)

	// Everything reads back after a reopen.
	require.NoError(t, s.Close())
	s = f.mustOpen(t, Options{})
	defer s.Close()
	require.NoError(t, s.view(func(t *kv.Tx) error {
		for _, key := range []string{"x/small/199", "x/big/23", "x/small/again/9"} {
			if _, err := t.GetRaw([]byte(key)); err != nil {
				return fmt.Errorf("%s: %w", key, err)
			}
		}
		return nil
	}))
}

// badgerNamesChecked is the Badger version whose log file names (memtable.go
// mtFilePath, value.go vlogFilePath) and log file handling (z.OpenMmapFile,
// MmapFile.Delete: see filecheck.OpenEmptyLogs) the store's sync and Open
// were checked against.
const badgerNamesChecked = "v4.9.6"

// TestLogSyncKnowsThisBadgersLogs pins the sync's knowledge of Badger's
// log files to the Badger version in go.mod: a store just opened has a
// memtable log and a value log, and the sync finds exactly the newest of
// each as Badger named them. Moving to another Badger version fails here
// until its file names and its creating and deleting of logs are checked
// again (then change badgerNamesChecked).
func TestLogSyncKnowsThisBadgersLogs(t *testing.T) {
	t.Parallel()
	mod, err := os.ReadFile(filepath.Join("..", "go.mod"))
	require.NoError(t, err)
	var version string
	for _, line := range strings.Split(string(mod), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "github.com/dgraph-io/badger/v4" {
			version = f[1]
		}
	}
	require.Equal(t, badgerNamesChecked, version,
		"go.mod moved to another Badger: check its log file names and how it creates and deletes logs against store/internal/logsync and store/internal/filecheck")

	f := newDiskFixture(t)
	s := f.mustOpen(t, Options{})
	defer s.Close()
	f.commitTasks(t, s, 1)
	mem, vlog := s.logs.Newest()
	for ext, known := range map[string]string{".mem": mem, ".vlog": vlog} {
		var newest string
		for _, p := range filesWithSuffix(t, f.dir, ext) {
			newest = max(newest, filepath.Base(p))
		}
		require.NotEmpty(t, newest, "Badger keeps a %s log open", ext)
		require.Equal(t, newest, known, "the sync's newest %s log", ext)
	}
	// The commits' sync synced the memtable log they were written to.
	require.Contains(t, s.logs.Synced(), filepath.Join(f.dir, mem))
}
