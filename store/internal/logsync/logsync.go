// Package logsync makes a Badger store's commits durable: Logs syncs the
// logs Badger writes a transaction to, through descriptors of its own
// (instead of badger.DB.Sync, which misses logs), and a Coalescer shares
// one sync among every caller that arrives while one runs (the store's
// group commit leaves each batch's sync to it). specs/RATIONALE.md, "Why
// does the store sync Badger's logs itself?" and "Why group commit, and why
// is leadership handed on before the sync?", says why.
package logsync

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
)

// Logs is the disk sync of a store on disk: it syncs Badger's logs
// itself instead of calling badger.DB.Sync (RATIONALE.md, "Why does the
// store sync Badger's logs itself?").
//
// Badger writes a transaction to the write-ahead log of its active memtable
// (NNNNN.mem) and, for each value of valueThreshold bytes or more, to the
// value log (NNNNNN.vlog); both are files it maps into memory. DB.Sync
// msyncs the active memtable's log and the newest value log. logSync
// syncs, through descriptors of its own (on Linux msync(MS_SYNC) of a shared
// file mapping is an fdatasync of the mapped range: the kernel tracks the
// pages written through the mapping as dirty pages of the file, whichever
// descriptor syncs them):
//
//   - every memtable log that may have been written since the previous
//     sync: the one that was the newest then and every newer one. DB.Sync
//     syncs only the newest, so a transaction written just before Badger
//     moved on to a new memtable was left in a log nobody synced until the
//     memtable reached a table;
//   - the value logs the same way, but only when a value may have gone to
//     them since the previous sync (valuesWritten): a value log that did
//     not move needs no sync, and on ext4 an fdatasync of an unchanged file
//     still costs a flush of the disk's cache;
//   - the directory, when a log file appeared since the previous sync.
//
// Badger numbers logs consecutively (the next memtable log is the newest's
// number plus one, and so is the next value log), so a new log is found by
// looking for that one name; a log gone from the directory was flushed to
// a table, which Badger synced before deleting it.
//
// Logs is used by one sync at a time (the Coalescer's); ValuesWritten may
// be called concurrently.
type Logs struct {
	dir    string
	mem    logFamily
	vlog   logFamily
	values atomic.Bool // a value may have gone to the value log since the last sync
	// synced lists the files the latest sync synced, the directory last
	// (Synced).
	synced []string
}

// logFamily is one kind of log file: the memtable logs or the value logs.
type logFamily struct {
	ext   string
	width int
	low   int              // the newest log at the previous sync: the first to sync
	high  int              // the newest log known
	open  map[int]*os.File // descriptors kept from one sync to the next
}

func (f *logFamily) name(fid int) string {
	return fmt.Sprintf("%0*d%s", f.width, fid, f.ext)
}

// New finds the logs of the store in dir (Badger has opened it). The
// first sync syncs every memtable log there and the newest value log.
//
// The sync finds Badger's logs by the names Badger gives them (memtable.go
// mtFilePath, value.go vlogFilePath). Badger, writable, creates a memtable
// log and a value log at every open, so a store just opened has one of
// each, named so: if not, Badger names its logs differently, the sync
// would sync nothing, and the error keeps the store from opening.
func New(dir string) (*Logs, error) {
	l := &Logs{dir: dir,
		mem:  logFamily{ext: ".mem", width: 5, low: -1, high: -1, open: map[int]*os.File{}},
		vlog: logFamily{ext: ".vlog", width: 6, low: -1, high: -1, open: map[int]*os.File{}},
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	for _, e := range entries {
		for _, f := range []*logFamily{&l.mem, &l.vlog} {
			if !strings.HasSuffix(e.Name(), f.ext) {
				continue
			}
			fid, err := strconv.Atoi(strings.TrimSuffix(e.Name(), f.ext))
			if err != nil || fid < 0 || f.name(fid) != e.Name() {
				return nil, fmt.Errorf("the store's disk sync cannot read the log file name %s (it expects %s): "+
					"this Badger version names its logs differently, and its commits would not be synced", e.Name(), f.name(1))
			}
			if f.low < 0 || fid < f.low {
				f.low = fid
			}
			f.high = max(f.high, fid)
		}
	}
	for _, f := range []*logFamily{&l.mem, &l.vlog} {
		if f.high < 0 {
			return nil, fmt.Errorf("the store's disk sync found no log named like %s in %s, which Badger creates at every open: "+
				"this Badger version names its logs differently, and its commits would not be synced", f.name(1), dir)
		}
	}
	l.vlog.low = l.vlog.high
	l.values.Store(true)
	return l, nil
}

// ValuesWritten notes that a value may have gone to the value log: the next
// sync syncs it. A nil Logs (a store that does not sync) ignores it.
func (l *Logs) ValuesWritten() {
	if l != nil {
		l.values.Store(true)
	}
}

// Sync syncs what a transaction committed before it started may have
// written.
func (l *Logs) Sync() error {
	l.synced = l.synced[:0]
	created, err := l.syncFamily(&l.mem)
	if err != nil {
		return err
	}
	// A value log appears only when a value is written, or when the value
	// log's garbage collection moves values; both set values.
	if l.values.Swap(false) {
		vcreated, err := l.syncFamily(&l.vlog)
		if err != nil {
			l.values.Store(true)
			return err
		}
		created = created || vcreated
	}
	if created {
		if err := SyncDir(l.dir); err != nil {
			return err
		}
		l.synced = append(l.synced, l.dir)
	}
	return nil
}

// syncFamily syncs the family's logs from the newest at the previous sync
// to the newest now, and reports whether a new one appeared.
func (l *Logs) syncFamily(f *logFamily) (created bool, err error) {
	for {
		_, err := os.Lstat(filepath.Join(l.dir, f.name(f.high+1)))
		if errors.Is(err, fs.ErrNotExist) {
			break
		}
		if err != nil {
			return false, err
		}
		f.high++
		created = true
	}
	if f.high < 0 {
		return created, nil
	}
	for fid := max(f.low, 0); fid <= f.high; fid++ {
		fd, ok := f.open[fid]
		if !ok {
			fd, err = os.Open(filepath.Join(l.dir, f.name(fid)))
			if errors.Is(err, fs.ErrNotExist) {
				continue // flushed to a table and deleted
			}
			if err != nil {
				return created, err
			}
			f.open[fid] = fd
		}
		if err := Datasync(fd); err != nil {
			return created, fmt.Errorf("sync %s: %w", fd.Name(), err)
		}
		l.synced = append(l.synced, fd.Name())
	}
	// Only the newest can be written again.
	for fid, fd := range f.open {
		if fid < f.high {
			fd.Close()
			delete(f.open, fid)
		}
	}
	f.low = f.high
	return created, nil
}

// Close releases the descriptors.
func (l *Logs) Close() {
	for _, f := range []*logFamily{&l.mem, &l.vlog} {
		for fid, fd := range f.open {
			fd.Close()
			delete(f.open, fid)
		}
	}
}

// DurabilityWarning is what the store's Open logs about the disk sync on goos, "" where
// a commit reported done is on disk.
//
// On Windows Badger's msync does nothing (ristretto z/mmap_windows.go), and
// the store cannot do it in its place: what a process writes through a
// mapped view reaches the disk with FlushViewOfFile on the view, then
// FlushFileBuffers on the file; FlushFileBuffers alone leaves the view's
// dirty pages, and the views are Badger's, out of the store's reach.
func DurabilityWarning(goos string) string {
	if goos != "windows" {
		return ""
	}
	return "on Windows commits are not crash-safe: Badger does not flush its files to disk there, so committed work " +
		"may be lost if the machine stops (power loss, a system crash); a killed lhengine process loses nothing"
}

// Synced lists the files the latest Sync synced, the directory last.
func (l *Logs) Synced() []string { return l.synced }

// Newest names the newest memtable log and value log the latest Sync knew
// (file names in the store's directory).
func (l *Logs) Newest() (mem, vlog string) { return l.mem.name(l.mem.high), l.vlog.name(l.vlog.high) }

// SyncDir syncs directory dir, so the names of the files created or
// removed in it are on disk.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}
