package filecheck

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/lhengine/lhengine/store/internal/logsync"
)

// SyncSeqKey holds the number of the store's latest disk sync. Every sync
// writes it first, so the store's value is the last sync whose data is on
// disk. The high-water mark file, outside Badger, remembers the highest
// value ever synced: a store whose value is lower lost synced writes.
var SyncSeqKey = []byte("h/sync")

// EncodeSeq is the stored form of sync number n.
func EncodeSeq(n uint64) []byte { return binary.BigEndian.AppendUint64(nil, n) }

// DecodeSeq reads a sync number EncodeSeq wrote.
func DecodeSeq(b []byte) (uint64, error) {
	if len(b) != 8 {
		return 0, fmt.Errorf("sync sequence is %d bytes, want 8", len(b))
	}
	return binary.BigEndian.Uint64(b), nil
}

// MarkPath is where the high-water mark of the store in dir is kept: a
// sibling of the directory, so that restoring or losing the directory does
// not take the mark with it.
func MarkPath(dir string) string {
	dir = filepath.Clean(dir)
	return filepath.Join(filepath.Dir(dir), filepath.Base(dir)+".highwater")
}

const markHeader = "lhengine store high-water mark: the highest sync of the store known to be on disk\n"

// ReadMark returns the mark, 0 if there is none.
func ReadMark(path string) (uint64, error) {
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

// WriteMark replaces the mark atomically: temporary file, fsync, rename,
// fsync of the directory.
func WriteMark(path string, n uint64) error {
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

// Marker writes the high-water mark after syncs, at most once per interval
// (and at close), never ahead of what a sync has made durable. A nil
// *Marker writes nothing (in-memory or unsynced stores).
type Marker struct {
	path    string
	every   time.Duration
	mu      sync.Mutex // held while writing
	written uint64     // the value in the file
	last    time.Time  // when it was written
}

// NewMarker is the marker of the mark at path, which holds written,
// writing at most every interval.
func NewMarker(path string, every time.Duration, written uint64) *Marker {
	return &Marker{path: path, every: every, written: written}
}

// Advance records that sync n is on disk, writing the mark if the interval
// has passed (or force). A write already under way makes it skip: the next
// sync or Close catches up.
func (m *Marker) Advance(n uint64, force bool) error {
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
	if err := WriteMark(m.path, n); err != nil {
		return err
	}
	m.written, m.last = n, time.Now()
	return nil
}

// CheckMark compares the store's sync sequence with the mark at path.
func CheckMark(path string, stored, mark uint64) *Finding {
	if stored >= mark {
		return nil
	}
	return &Finding{Check: "high-water", File: path, Detail: fmt.Sprintf(
		"the store is %d syncs behind its high-water mark (store at sync %d, mark %d): writes that were synced to disk are missing (files rolled back, restored from an older copy, or lost); if the store was replaced on purpose, delete the mark file",
		mark-stored, stored, mark)}
}
