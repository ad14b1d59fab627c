package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/badger/v4/options"
	"github.com/dgraph-io/badger/v4/table"
	"github.com/dgraph-io/ristretto/v2/z"

	"github.com/lhengine/lhengine/store/internal/logsync"
)

// ErrDamaged: the store's files show that committed data is missing or
// corrupt. Open refuses such a store unless Options.AllowDamaged is set.
var ErrDamaged = errors.New("store is damaged")

// Finding is one problem an integrity check found.
type Finding struct {
	// Check names the check: "manifest", "tables", "high-water", "open",
	// "checksum", "record", "invariant".
	Check string `json:"check"`
	// File is the file concerned, or the key for a record.
	File string `json:"file,omitempty"`
	// Detail says what was found.
	Detail string `json:"detail"`
}

func (f Finding) String() string {
	if f.File != "" {
		return fmt.Sprintf("%s check: %s: %s", f.Check, f.File, f.Detail)
	}
	return fmt.Sprintf("%s check: %s", f.Check, f.Detail)
}

// DamagedError is returned by Open for a store that failed an integrity
// check. It matches ErrDamaged.
type DamagedError struct {
	Dir      string
	Findings []Finding
}

func (e *DamagedError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "store %s is damaged, committed data is missing or corrupt: ", e.Dir)
	for i, f := range e.Findings {
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(f.String())
	}
	b.WriteString(". Restore the home directory from a backup; `lhengine store verify` lists every problem; " +
		"--allow-damaged opens the store as it is (what is missing stays missing)")
	return b.String()
}

func (e *DamagedError) Is(target error) bool { return target == ErrDamaged }

// ---- files ----

const (
	manifestName  = "MANIFEST"
	logHeaderSize = 20 // key id and IV at the start of every .vlog and .mem file
)

// checkFiles looks at the store directory before Badger opens it: data files
// with no MANIFEST (Badger would start an empty store and delete the
// tables), or a MANIFEST naming tables that are gone. orphans are tables the
// MANIFEST does not name: an interrupted flush or compaction leaves them and
// Badger deletes them at open.
func checkFiles(dir string) (findings []Finding, orphans []string, err error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	var data []string
	tables := map[uint64]string{}
	hasManifest := false
	for _, e := range entries {
		name := e.Name()
		switch {
		case name == manifestName:
			hasManifest = true
		case strings.HasSuffix(name, ".sst"):
			if id, err := strconv.ParseUint(strings.TrimSuffix(name, ".sst"), 10, 64); err == nil {
				tables[id] = name
			}
			data = append(data, name)
		case strings.HasSuffix(name, ".vlog"), strings.HasSuffix(name, ".mem"):
			data = append(data, name)
			// Badger sizes a new log before it writes its header, and
			// cuts a log to 0 bytes only to delete it: a kill leaves 0
			// bytes (see openEmptyLogs), never a size inside the header.
			if fi, err := e.Info(); err == nil && fi.Size() > 0 && fi.Size() < logHeaderSize {
				findings = append(findings, Finding{Check: "log", File: filepath.Join(dir, name),
					Detail: fmt.Sprintf("%d bytes, shorter than a log file's %d-byte header: the file was truncated", fi.Size(), logHeaderSize)})
			}
		}
	}
	if !hasManifest {
		if len(tables) > 0 {
			return append(findings, Finding{Check: "manifest", File: filepath.Join(dir, manifestName),
				Detail: fmt.Sprintf("missing, but %d data files are present (%s); Badger would start an empty store and delete the tables", len(data), abbreviate(data))}), nil, nil
		}
		return findings, nil, nil
	}
	fp, err := os.Open(filepath.Join(dir, manifestName))
	if err != nil {
		return nil, nil, err
	}
	defer fp.Close()
	m, _, err := badger.ReplayManifestFile(fp, 0, badger.DefaultOptions(dir))
	if err != nil {
		return append(findings, Finding{Check: "manifest", File: fp.Name(), Detail: fmt.Sprintf("unreadable: %v", err)}), nil, nil
	}
	var missing []string
	for id := range m.Tables {
		if _, ok := tables[id]; !ok {
			missing = append(missing, fmt.Sprintf("%06d.sst", id))
		}
	}
	for id, name := range tables {
		if _, ok := m.Tables[id]; !ok {
			orphans = append(orphans, name)
		}
	}
	slices.Sort(missing)
	slices.Sort(orphans)
	if len(missing) > 0 {
		findings = append(findings, Finding{Check: "tables", File: fp.Name(),
			Detail: fmt.Sprintf("names %d tables that are missing (%s)", len(missing), abbreviate(missing))})
	}
	ids := make([]uint64, 0, len(m.Tables))
	for id := range m.Tables {
		if _, ok := tables[id]; ok {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	for _, id := range ids {
		path := filepath.Join(dir, tables[id])
		if err := verifyTable(path, m.Tables[id].Compression); err != nil {
			findings = append(findings, Finding{Check: "checksum", File: path, Detail: err.Error()})
		}
	}
	return findings, orphans, nil
}

// verifyTable reads a whole table and checks the checksums of its index and
// of every block. Badger, checking tables at open, does it in goroutines of
// its own, where a damaged index makes it panic beyond any caller's recover.
func verifyTable(path string, c options.CompressionType) (err error) {
	mf, err := z.OpenMmapFile(path, os.O_RDONLY, 0)
	if err != nil {
		return err
	}
	defer func() {
		if r := recover(); r != nil {
			_ = mf.Close(-1)
			err = fmt.Errorf("unreadable table: %s", strings.Join(strings.Fields(fmt.Sprint(r)), " "))
		}
	}()
	bo := badger.DefaultOptions("")
	t, err := table.OpenTable(mf, table.Options{
		ReadOnly: true, BlockSize: bo.BlockSize, BloomFalsePositive: bo.BloomFalsePositive,
		ChkMode: options.OnTableRead, Compression: c,
	})
	if err != nil {
		return firstLine(err)
	}
	return t.Close(-1)
}

// firstLine drops the stack trace Badger's errors carry.
func firstLine(err error) error {
	msg, _, _ := strings.Cut(err.Error(), "\n")
	return errors.New(msg)
}

func abbreviate(names []string) string {
	if len(names) > 5 {
		return strings.Join(names[:5], ", ") + fmt.Sprintf(" and %d more", len(names)-5)
	}
	return strings.Join(names, ", ")
}

// setAside moves files that keep Badger from opening a damaged store into a
// subdirectory, where Badger does not look: the tables of a store without
// MANIFEST (Badger would delete them) and log files cut shorter than their
// header (Badger fails on them). Opening with AllowDamaged keeps them there.
func setAside(dir string, found []Finding) (string, error) {
	var move []string
	for _, f := range found {
		switch f.Check {
		case "manifest":
			entries, err := os.ReadDir(dir)
			if err != nil {
				return "", err
			}
			for _, e := range entries {
				if strings.HasSuffix(e.Name(), ".sst") {
					move = append(move, e.Name())
				}
			}
		case "log":
			move = append(move, filepath.Base(f.File))
		}
	}
	if len(move) == 0 {
		return "", nil
	}
	aside := filepath.Join(dir, "damaged-"+time.Now().UTC().Format("20060102T150405Z"))
	if err := os.MkdirAll(aside, 0o700); err != nil {
		return "", err
	}
	for _, name := range move {
		if err := os.Rename(filepath.Join(dir, name), filepath.Join(aside, name)); err != nil {
			return "", err
		}
	}
	return aside, logsync.SyncDir(dir)
}

// ---- high-water mark ----

// syncSeqKey holds the number of the store's latest disk sync. Every sync
// writes it first, so the store's value is the last sync whose data is on
// disk. The high-water mark file, outside Badger, remembers the highest
// value ever synced: a store whose value is lower lost synced writes.
var syncSeqKey = []byte("h/sync")

func encodeSeq(n uint64) []byte { return binary.BigEndian.AppendUint64(nil, n) }

func decodeSeq(b []byte) (uint64, error) {
	if len(b) != 8 {
		return 0, fmt.Errorf("sync sequence is %d bytes, want 8", len(b))
	}
	return binary.BigEndian.Uint64(b), nil
}

// markPath is where the high-water mark of the store in dir is kept: a
// sibling of the directory, so that restoring or losing the directory does
// not take the mark with it.
func markPath(dir string) string {
	dir = filepath.Clean(dir)
	return filepath.Join(filepath.Dir(dir), filepath.Base(dir)+".highwater")
}

const markHeader = "lhengine store high-water mark: the highest sync of the store known to be on disk\n"

// readMark returns the mark, 0 if there is none.
func readMark(path string) (uint64, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	s := strings.TrimSpace(strings.TrimPrefix(string(b), markHeader))
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("high-water mark %s is unreadable (%q); delete it if the store is known to be whole", path, s)
	}
	return n, nil
}

// writeMark replaces the mark atomically: temporary file, fsync, rename,
// fsync of the directory.
func writeMark(path string, n uint64) error {
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(f, "%s%d\n", markHeader, n)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("write high-water mark %s: %w", path, err)
	}
	return logsync.SyncDir(filepath.Dir(path))
}

// marker writes the high-water mark after syncs, at most once per interval
// (and at close), never ahead of what a sync has made durable.
type marker struct {
	path    string
	every   time.Duration
	mu      sync.Mutex // held while writing
	written uint64     // the value in the file
	last    time.Time  // when it was written
}

// advance records that sync n is on disk, writing the mark if the interval
// has passed. A write already under way makes it skip: the next sync or
// Close catches up.
func (m *marker) advance(n uint64, force bool) error {
	if m == nil {
		return nil
	}
	if force {
		m.mu.Lock()
	} else if !m.mu.TryLock() {
		return nil
	}
	defer m.mu.Unlock()
	if n <= m.written || (!force && time.Since(m.last) < m.every) {
		return nil
	}
	if err := writeMark(m.path, n); err != nil {
		return err
	}
	m.written, m.last = n, time.Now()
	return nil
}

// checkMark compares the store's sync sequence with the mark.
func checkMark(path string, stored, mark uint64) *Finding {
	if stored >= mark {
		return nil
	}
	return &Finding{Check: "high-water", File: path, Detail: fmt.Sprintf(
		"the store is %d syncs behind its high-water mark (store at sync %d, mark %d): writes that were synced to disk are missing (files rolled back, restored from an older copy, or lost); if the store was replaced on purpose, delete the mark file",
		mark-stored, stored, mark)}
}

// ---- logs a kill left empty ----

// A kill of the process (not of the machine: what a process wrote through
// a mapping is in the kernel's page cache and outlives it) leaves a log
// file of 0 bytes at two moments of Badger's work, and at no other
// (badger v4 memtable.go and value.go, ristretto z/file.go):
//
//   - Creating a log. z.OpenMmapFile creates the file, then truncates it
//     to its full size, and Badger writes the log's 20-byte header through
//     the mapping. Killed between the create and the truncate, the log is
//     empty, and it held nothing. Badger creates a memtable log at every
//     open and when a memtable fills, a value log at every open and when
//     one fills.
//   - Deleting a log. MmapFile.Delete truncates the file to 0 bytes, then
//     removes it. Killed in between, the log is empty, and what it held is
//     elsewhere: Badger deletes a memtable log once its memtable is in a
//     table the MANIFEST names, or when it held nothing; a value log when
//     it holds only its header and is not the newest (at every open, the
//     one the process before created), or when the value log's garbage
//     collection has moved every live value out of it.
//
// No kill leaves a log shorter than its header but not empty (checkFiles
// refuses that): a log is sized in one truncate before its header is
// written, and cut back only to the end of its entries.
//
// An empty memtable log is removed, as Badger would remove it: if it was
// not left by a kill but truncated with synced commits in it, the store is
// behind its high-water mark (checkHighWater). An empty value log's name
// and place do not tell a kill from a truncation: the newest value log
// holds the values of the process that created it until the next open
// creates another, and any older one may hold values. What tells is
// whether a live value points into it. So Open hides it from Badger
// (renamed NAME.vlog.empty) and, once Badger is open, reads every value of
// the value log (checkHiddenLogs): one unreadable means the file held
// values (damage, and the hidden file stays, so every open says so until
// --allow-damaged); none means nothing pointed into it, and it is removed.
// Badger, left to open an empty log itself, would size it and write a
// header into it, after which nothing tells a truncation; read-only, it
// fails on it.

// emptyLogSuffix marks a value log of 0 bytes hidden from Badger until
// Open has checked that no value points into it.
const emptyLogSuffix = ".empty"

// openEmptyLogs deals with the empty logs in dir before Badger opens it:
// it removes the memtable logs and hides the value logs, and returns the
// hidden value logs (those an earlier open hid and could not clear too).
// A read-only open, which shares the lock with other readers, leaves them
// and fails if Badger would see one.
func openEmptyLogs(dir string, readOnly bool) (hidden []string, err error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var mems, vlogs []string
	for _, e := range entries {
		name := e.Name()
		switch {
		case strings.HasSuffix(name, ".vlog"+emptyLogSuffix):
			hidden = append(hidden, name)
			continue
		case strings.HasSuffix(name, ".mem"), strings.HasSuffix(name, ".vlog"):
		default:
			continue
		}
		fi, err := e.Info()
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if fi.Size() != 0 || !fi.Mode().IsRegular() {
			continue
		}
		if strings.HasSuffix(name, ".mem") {
			mems = append(mems, name)
		} else {
			vlogs = append(vlogs, name)
		}
	}
	if len(mems)+len(vlogs) == 0 {
		return hidden, nil
	}
	if readOnly {
		return nil, fmt.Errorf("%s: log files left empty by an interrupted process, which only an open for writing clears (`lhengine store verify` does)",
			abbreviate(append(mems, vlogs...)))
	}
	for _, name := range mems {
		if err := os.Remove(filepath.Join(dir, name)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, err
		}
	}
	for _, name := range vlogs {
		if err := os.Rename(filepath.Join(dir, name), filepath.Join(dir, name+emptyLogSuffix)); err != nil {
			return nil, err
		}
		hidden = append(hidden, name+emptyLogSuffix)
	}
	slices.Sort(hidden)
	return hidden, logsync.SyncDir(dir)
}

// checkHiddenLogs reads every value of the value log of the open store
// (the store's values of valueThreshold bytes or more: the others are in
// its tables and memtable logs). If all read, no value pointed into the
// hidden empty value logs, and they are removed. If one does not, the
// hidden logs held values: the store is damaged.
func (s *Store) checkHiddenLogs(hidden []string, o Options) error {
	if len(hidden) == 0 {
		return nil
	}
	if bad := s.unreadableValue(); bad != nil {
		var found []Finding
		for _, name := range hidden {
			found = append(found, Finding{Check: "log", File: filepath.Join(s.dir, name), Detail: fmt.Sprintf(
				"the value log %s was found empty (0 bytes), and values in the value log cannot be read (%v): the file held values and was truncated; "+
					"a crash leaves a value log empty only when no live value points into it",
				strings.TrimSuffix(name, emptyLogSuffix), bad)})
		}
		// store verify (filesChecked) reports them as they are.
		if !o.AllowDamaged || o.filesChecked {
			return &DamagedError{Dir: s.dir, Findings: found}
		}
		for _, f := range found {
			s.log.Warn("opening a damaged store", "dir", s.dir, "finding", f.String())
		}
		if s.readOnly {
			return nil
		}
		aside, err := setAside(s.dir, found)
		if err != nil {
			return fmt.Errorf("open store %s: setting damaged files aside: %w", s.dir, err)
		}
		s.log.Warn("damaged files set aside; the store opens without them", "dir", aside)
		return nil
	}
	if s.readOnly {
		return nil // the next open for writing removes them
	}
	for _, name := range hidden {
		if err := os.Remove(filepath.Join(s.dir, name)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("open store %s: %w", s.dir, err)
		}
	}
	return logsync.SyncDir(s.dir)
}

// unreadableValue returns why the first value of the value log that
// cannot be read could not, or nil if every one reads.
func (s *Store) unreadableValue() (bad error) {
	err := s.db.View(func(txn *badger.Txn) (err error) {
		opts := badger.DefaultIteratorOptions
		opts.PrefetchValues = false
		it := txn.NewIterator(opts)
		defer it.Close()
		var key []byte
		defer func() {
			if r := recover(); r != nil {
				bad = fmt.Errorf("key %q: %s", key, strings.Join(strings.Fields(fmt.Sprint(r)), " "))
			}
		}()
		for it.Rewind(); it.Valid(); it.Next() {
			item := it.Item()
			// ValueSize estimates a pointed-to value's size from its
			// record's; half the threshold leaves room for the estimate.
			if item.ValueSize() < valueThreshold/2 {
				continue
			}
			key = item.KeyCopy(key[:0])
			if err := itemValue(item, func([]byte) error { return nil }); err != nil {
				return fmt.Errorf("key %q: %w", key, firstLine(err))
			}
		}
		return nil
	})
	if bad == nil {
		bad = err
	}
	return bad
}

// hasManifest reports whether Badger has created the store in dir (a
// MANIFEST is the first file it writes).
func hasManifest(dir string) bool {
	_, err := os.Stat(filepath.Join(dir, manifestName))
	return err == nil
}

// hasEmptyLogs reports whether dir holds a log a kill left empty, or one an
// earlier open hid: only an open for writing clears them.
func hasEmptyLogs(dir string) bool {
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		name := e.Name()
		if strings.HasSuffix(name, ".vlog"+emptyLogSuffix) {
			return true
		}
		if strings.HasSuffix(name, ".mem") || strings.HasSuffix(name, ".vlog") {
			if fi, err := e.Info(); err == nil && fi.Size() == 0 {
				return true
			}
		}
	}
	return false
}
