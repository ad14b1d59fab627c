package store

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/stretchr/testify/require"

	"github.com/lhengine/lhengine/ledger"
	"github.com/lhengine/lhengine/store/internal/filecheck"
	"github.com/lhengine/lhengine/store/internal/kv"
)

// logFids returns the numbers of the store's log files with ext (".mem",
// ".vlog"), ascending.
func logFids(t *testing.T, dir, ext string) []int {
	t.Helper()
	var fids []int
	for _, p := range filesWithSuffix(t, dir, ext) {
		fid, err := strconv.Atoi(strings.TrimSuffix(filepath.Base(p), ext))
		require.NoError(t, err, p)
		fids = append(fids, fid)
	}
	return fids
}

// emptyFile creates a 0-byte file: what a kill leaves of a log Badger was
// creating or deleting.
func emptyFile(t *testing.T, path string) {
	t.Helper()
	require.NoError(t, os.WriteFile(path, nil, 0o600))
}

// writeBig commits a value large enough for the value log.
func writeBig(t *testing.T, f *diskFixture, s *Store, key string) {
	t.Helper()
	big := make([]byte, 200<<10)
	for i := range big {
		big[i] = byte(i*7 + len(key))
	}
	require.NoError(t, s.update(f.ctx, func(t *kv.Tx) error {
		t.Durable = true
		return t.Put([]byte(key), big)
	}))
}

// requireNoEmptyLogs checks that no 0-byte log, and nothing hidden from
// Badger while it was checked, is left in dir.
func requireNoEmptyLogs(t *testing.T, dir string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	for _, e := range entries {
		require.False(t, strings.HasSuffix(e.Name(), filecheck.EmptyLogSuffix), "%s left behind", e.Name())
		if strings.HasSuffix(e.Name(), ".mem") || strings.HasSuffix(e.Name(), ".vlog") {
			fi, err := e.Info()
			require.NoError(t, err)
			require.Positive(t, fi.Size(), "%s is still 0 bytes", e.Name())
		}
	}
}

// TestLogLeftEmptyByAKillIsNotDamage: a kill leaves a log file of 0 bytes
// in two places, and neither lost anything: Badger creates a log file and
// then sizes it (a kill in between leaves the newest log empty), and it
// deletes a log by cutting it to 0 bytes and then removing it (a kill in
// between leaves an older log empty). The store opens, with everything,
// and the next open is as clean.
func TestLogLeftEmptyByAKillIsNotDamage(t *testing.T) {
	t.Parallel()
	cases := map[string]func(t *testing.T, f *diskFixture) *diskFixture{
		"new value log": func(t *testing.T, f *diskFixture) *diskFixture {
			fids := logFids(t, f.dir, ".vlog")
			emptyFile(t, filepath.Join(f.dir, fmt.Sprintf("%06d.vlog", fids[len(fids)-1]+1)))
			return f
		},
		"new memtable log": func(t *testing.T, f *diskFixture) *diskFixture {
			next := 1
			if fids := logFids(t, f.dir, ".mem"); len(fids) > 0 {
				next = fids[len(fids)-1] + 1
			}
			emptyFile(t, filepath.Join(f.dir, fmt.Sprintf("%05d.mem", next)))
			return f
		},
		"value log being deleted": func(t *testing.T, f *diskFixture) *diskFixture {
			// Each open starts a value log; the one before the newest
			// holds only its header, and the next open deletes it.
			s := f.mustOpen(t, Options{})
			require.NoError(t, s.Close())
			fids := logFids(t, f.dir, ".vlog")
			require.GreaterOrEqual(t, len(fids), 2)
			older := filepath.Join(f.dir, fmt.Sprintf("%06d.vlog", fids[len(fids)-2]))
			require.NoError(t, os.Truncate(older, 0))
			return f
		},
		"value log emptied by its garbage collection": func(t *testing.T, f *diskFixture) *diskFixture {
			// A value log whose values all moved on (rewritten or
			// deleted) is deleted by the value log's GC.
			s := f.mustOpen(t, Options{})
			writeBig(t, f, s, "x/big/1")
			require.NoError(t, s.update(f.ctx, func(t *kv.Tx) error {
				t.Durable = true
				return t.Del([]byte("x/big/1"))
			}))
			require.NoError(t, s.Close())
			s = f.mustOpen(t, Options{})
			require.NoError(t, s.Close())
			var withData string
			for _, p := range filesWithSuffix(t, f.dir, ".vlog") {
				if fi, err := os.Stat(p); err == nil && fi.Size() > 100<<10 {
					withData = p
				}
			}
			require.NotEmpty(t, withData)
			require.NoError(t, os.Truncate(withData, 0))
			return f
		},
		"memtable log being deleted": func(t *testing.T, f *diskFixture) *diskFixture {
			// A crash image holds the live memtable's log; the log of a
			// memtable flushed before it was being deleted.
			s := f.mustOpen(t, Options{})
			f.commitTasks(t, s, 1)
			img := crashImage(t, f)
			require.NoError(t, s.Close())
			fids := logFids(t, img.dir, ".mem")
			require.Len(t, fids, 1)
			require.Greater(t, fids[0], 0)
			emptyFile(t, filepath.Join(img.dir, fmt.Sprintf("%05d.mem", fids[0]-1)))
			return img
		},
	}
	for name, leave := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			f := newDiskFixture(t)
			f.build(t, 2)
			f = leave(t, f)
			want := 2
			if name == "memtable log being deleted" {
				want = 3
			}
			rep, err := Verify(f.dir, nil)
			require.NoError(t, err)
			require.Empty(t, rep.Findings, "store verify")
			s, err := f.open(t, Options{})
			require.NoError(t, err, "a kill must never need --allow-damaged")
			require.Equal(t, want, countTasks(t, s))
			f.commitTasks(t, s, 1)
			require.NoError(t, s.Close())
			requireNoEmptyLogs(t, f.dir)
			s = f.mustOpen(t, Options{})
			require.Equal(t, want+1, countTasks(t, s))
			require.NoError(t, s.Close())
		})
	}
}

// TestTruncatedLogIsStillDamage: a log file that held data and was cut
// (to 0 bytes, or into its header) is refused, whether or not it is the
// newest, and stays refused at every open until --allow-damaged.
func TestTruncatedLogIsStillDamage(t *testing.T) {
	t.Parallel()
	// valueLog returns the value log holding the big value.
	valueLog := func(t *testing.T, dir string) string {
		for _, p := range filesWithSuffix(t, dir, ".vlog") {
			if fi, err := os.Stat(p); err == nil && fi.Size() > 100<<10 {
				return p
			}
		}
		require.FailNow(t, "no value log holds the value")
		return ""
	}
	cases := map[string]struct {
		reopen bool  // open and close once more: the value's log is no longer the newest
		size   int64 // what the value's log is cut to
		detail string
	}{
		"newest value log emptied":   {size: 0, detail: "values in the value log cannot be read"},
		"older value log emptied":    {reopen: true, size: 0, detail: "values in the value log cannot be read"},
		"value log cut into header":  {reopen: true, size: 10, detail: "shorter than a log file's 20-byte header"},
		"newest log cut into header": {size: 7, detail: "shorter than a log file's 20-byte header"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			f := newDiskFixture(t)
			f.build(t, 1)
			s := f.mustOpen(t, Options{})
			writeBig(t, f, s, "x/big/1")
			require.NoError(t, s.Close())
			if c.reopen {
				s = f.mustOpen(t, Options{})
				require.NoError(t, s.Close())
			}
			vlog := valueLog(t, f.dir)
			fids := logFids(t, f.dir, ".vlog")
			newest := fmt.Sprintf("%06d.vlog", fids[len(fids)-1]) == filepath.Base(vlog)
			require.Equal(t, !c.reopen, newest)
			require.NoError(t, os.Truncate(vlog, c.size))

			for range 2 {
				_, err := f.open(t, Options{})
				de := requireDamaged(t, err, "log")
				require.Contains(t, de.Error(), filepath.Base(vlog))
				require.Contains(t, de.Error(), c.detail)
			}
			rep, err := Verify(f.dir, nil)
			require.NoError(t, err)
			require.Contains(t, checksOf(rep), "log", "%v", rep.Findings)

			var logs bytes.Buffer
			s, err = f.open(t, Options{AllowDamaged: true, Logger: hclog.New(&hclog.LoggerOptions{Output: &logs, Level: hclog.Warn})})
			require.NoError(t, err)
			require.Contains(t, logs.String(), "damaged")
			require.Equal(t, 1, countTasks(t, s), "what is left is there")
			require.NoError(t, s.Close())
		})
	}
}

// TestReadOnlyOpenOfAnEmptyLog: a read-only open may not remove the empty
// log a kill left (Badger, read-only, cannot open it); it says so, and
// store verify, which opens for writing when it must, reports nothing.
func TestReadOnlyOpenOfAnEmptyLog(t *testing.T) {
	t.Parallel()
	f := newDiskFixture(t)
	f.build(t, 1)
	fids := logFids(t, f.dir, ".vlog")
	emptyFile(t, filepath.Join(f.dir, fmt.Sprintf("%06d.vlog", fids[len(fids)-1]+1)))
	_, err := f.open(t, Options{ReadOnly: true})
	require.Error(t, err)
	require.NotErrorIs(t, err, ErrDamaged)
	require.Contains(t, err.Error(), "left empty by an interrupted process")
	rep, err := Verify(f.dir, nil)
	require.NoError(t, err)
	require.Empty(t, rep.Findings)
	s, err := f.open(t, Options{ReadOnly: true})
	require.NoError(t, err, "verify's writable open cleared it")
	require.Equal(t, 1, countTasks(t, s))
	require.NoError(t, s.Close())
}

// TestStoreNeverCreatedOnAFullDisk: a store with nothing in it yet, on a
// disk below the free-space floor, is not created; the error says that it
// holds no tasks yet and why it cannot be created, not Badger's words.
func TestStoreNeverCreatedOnAFullDisk(t *testing.T) {
	t.Parallel()
	f := newDiskFixture(t)
	full := func(string) (int64, error) { return 10 << 20, nil }
	for range 2 { // a fresh directory, then the one the first open made
		_, err := f.open(t, Options{MinFreeBytes: 64 << 20, freeFn: full})
		require.ErrorIs(t, err, ledger.ErrNoSpace)
		require.Contains(t, err.Error(), "holds no tasks yet")
		require.Contains(t, err.Error(), "10 MiB free in "+f.dir+", floor 64 MiB")
		require.NotContains(t, err.Error(), "manifest")
	}
	s := f.mustOpen(t, Options{})
	require.Equal(t, 0, countTasks(t, s))
	require.NoError(t, s.Close())
}
