package filecheck

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dgraph-io/badger/v4"
	"github.com/hashicorp/go-hclog"
	"github.com/stretchr/testify/require"
)

// TestCheckDataWithoutManifest: tables without a MANIFEST are found (Badger
// would start an empty store and delete them), and SetAside moves them where
// Badger does not look.
func TestCheckDataWithoutManifest(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "000001.sst"), []byte("table"), 0o600))
	found, orphans, err := Check(dir)
	require.NoError(t, err)
	require.Empty(t, orphans)
	require.Len(t, found, 1)
	require.Equal(t, "manifest", found[0].Check)
	require.Contains(t, found[0].Detail, "000001.sst")

	aside, err := SetAside(dir, found)
	require.NoError(t, err)
	require.FileExists(t, filepath.Join(aside, "000001.sst"))
	found, _, err = Check(dir)
	require.NoError(t, err)
	require.Empty(t, found, "nothing left for Badger to delete")
}

// TestCheckTruncatedLog: a log cut inside its header is damage; one of 0
// bytes (what a kill leaves) is not.
func TestCheckTruncatedLog(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "000001.vlog"), make([]byte, 7), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "00002.mem"), nil, 0o600))
	found, _, err := Check(dir)
	require.NoError(t, err)
	require.Len(t, found, 1)
	require.Equal(t, "log", found[0].Check)
	require.Equal(t, filepath.Join(dir, "000001.vlog"), found[0].File)
	require.Contains(t, found[0].String(), "7 bytes, shorter than a log file's 20-byte header")
}

// TestCheckMissingTable: a MANIFEST naming a table that is gone is found;
// a whole store is not; a missing directory is nothing to check.
func TestCheckMissingTable(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db, err := badger.Open(badger.DefaultOptions(dir).WithLogger(nil))
	require.NoError(t, err)
	require.NoError(t, db.Update(func(txn *badger.Txn) error { return txn.Set([]byte("k"), []byte("v")) }))
	require.NoError(t, db.Flatten(1))
	require.NoError(t, db.Close())
	found, _, err := Check(dir)
	require.NoError(t, err)
	require.Empty(t, found)
	require.True(t, HasManifest(dir))

	tables, err := filepath.Glob(filepath.Join(dir, "*.sst"))
	require.NoError(t, err)
	require.NotEmpty(t, tables)
	require.NoError(t, os.Remove(tables[0]))
	found, _, err = Check(dir)
	require.NoError(t, err)
	require.Len(t, found, 1)
	require.Equal(t, "tables", found[0].Check)
	require.Contains(t, found[0].Detail, filepath.Base(tables[0]))

	found, orphans, err := Check(filepath.Join(dir, "none"))
	require.NoError(t, err)
	require.Empty(t, found)
	require.Empty(t, orphans)
	require.False(t, HasManifest(filepath.Join(dir, "none")))
}

// TestOpeningFiles: a damaged store is returned as found and left as it
// is unless the opening allows damage; then its files are set aside.
func TestOpeningFiles(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	sst := filepath.Join(dir, "000001.sst")
	require.NoError(t, os.WriteFile(sst, []byte("table"), 0o600))
	o := Opening{Dir: dir, Log: hclog.NewNullLogger()}
	found, err := o.Files()
	require.NoError(t, err)
	require.Len(t, found, 1)
	require.FileExists(t, sst, "refused: left as it is")

	o.ReadOnly, o.AllowDamaged = true, true
	_, err = o.Files()
	require.NoError(t, err)
	require.FileExists(t, sst, "read-only: nothing moved")

	o.ReadOnly = false
	found, err = o.Files()
	require.NoError(t, err)
	require.Len(t, found, 1)
	require.NoFileExists(t, sst, "set aside")
}

// TestMark: the mark is written atomically beside the store, read back,
// and a store behind it is a finding; an unreadable mark is an error.
func TestMark(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "store")
	path := MarkPath(dir + "/")
	require.Equal(t, dir+".highwater", path)
	n, err := ReadMark(path)
	require.NoError(t, err)
	require.Zero(t, n, "no mark yet")

	m := NewMarker(path, 0, 0)
	require.NoError(t, m.Advance(7, false))
	n, err = ReadMark(path)
	require.NoError(t, err)
	require.EqualValues(t, 7, n)
	require.NoError(t, m.Advance(5, true), "never goes back")
	n, _ = ReadMark(path)
	require.EqualValues(t, 7, n)
	require.NoError(t, (*Marker)(nil).Advance(9, true), "a nil marker writes nothing")

	require.Nil(t, CheckMark(path, 7, 7))
	require.Nil(t, CheckMark(path, 8, 7))
	f := CheckMark(path, 4, 7)
	require.NotNil(t, f)
	require.Equal(t, "high-water", f.Check)
	require.Contains(t, f.Detail, "3 syncs behind")

	seq, err := DecodeSeq(EncodeSeq(1 << 40))
	require.NoError(t, err)
	require.EqualValues(t, uint64(1<<40), seq)
	_, err = DecodeSeq([]byte{1})
	require.Error(t, err)

	require.NoError(t, os.WriteFile(path, []byte("twelve"), 0o600))
	_, err = ReadMark(path)
	require.ErrorContains(t, err, "unreadable")
}

// TestOpenEmptyLogs: an empty memtable log is removed, an empty value log
// hidden (and found again by the next open), logs with data are left;
// a read-only open refuses to clear them.
func TestOpenEmptyLogs(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for name, size := range map[string]int{"00001.mem": 0, "000001.vlog": 0, "000002.vlog": 64, "00002.mem": 64} {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), make([]byte, size), 0o600))
	}
	require.True(t, HasEmptyLogs(dir))
	_, err := OpenEmptyLogs(dir, true)
	require.ErrorContains(t, err, "only an open for writing clears")

	hidden, err := OpenEmptyLogs(dir, false)
	require.NoError(t, err)
	require.Equal(t, []string{"000001.vlog" + EmptyLogSuffix}, hidden)
	require.NoFileExists(t, filepath.Join(dir, "00001.mem"))
	require.FileExists(t, filepath.Join(dir, "00002.mem"))
	require.FileExists(t, filepath.Join(dir, "000002.vlog"))
	require.True(t, HasEmptyLogs(dir), "a hidden log stays until it is checked")

	again, err := OpenEmptyLogs(dir, true)
	require.NoError(t, err)
	require.Equal(t, hidden, again)
}

// TestHiddenLogs: when every value reads, the hidden logs are removed;
// when one does not, they held values: a finding, or with damage allowed
// the logs set aside.
func TestHiddenLogs(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db, err := badger.Open(badger.DefaultOptions(dir).WithLogger(nil).WithValueThreshold(1024))
	require.NoError(t, err)
	defer db.Close()
	require.NoError(t, db.Update(func(txn *badger.Txn) error { return txn.Set([]byte("big"), make([]byte, 4096)) }))
	hide := func() []string {
		name := "000009.vlog" + EmptyLogSuffix
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), nil, 0o600))
		return []string{name}
	}
	ok := func(*badger.Item) error { return nil }
	bad := func(*badger.Item) error { return os.ErrClosed }
	o := Opening{Dir: dir, Log: hclog.NewNullLogger()}

	found, err := o.HiddenLogs(db, hide(), 1024, ok)
	require.NoError(t, err)
	require.Empty(t, found)
	require.False(t, HasEmptyLogs(dir), "removed")

	found, err = o.HiddenLogs(db, hide(), 1024, bad)
	require.NoError(t, err)
	require.Len(t, found, 1)
	require.Equal(t, "log", found[0].Check)
	require.True(t, strings.Contains(found[0].Detail, "000009.vlog was found empty"), found[0].Detail)
	require.True(t, HasEmptyLogs(dir), "left for every open to report")

	o.AllowDamaged = true
	found, err = o.HiddenLogs(db, []string{"000009.vlog" + EmptyLogSuffix}, 1024, bad)
	require.NoError(t, err)
	require.Empty(t, found)
	require.False(t, HasEmptyLogs(dir), "set aside")
}

func TestAbbreviate(t *testing.T) {
	t.Parallel()
	require.Equal(t, "a, b", Abbreviate([]string{"a", "b"}))
	require.Equal(t, "1, 2, 3, 4, 5 and 2 more", Abbreviate([]string{"1", "2", "3", "4", "5", "6", "7"}))
}
