package filecheck

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/dgraph-io/badger/v4"

	"github.com/lhengine/lhengine/store/internal/logsync"
)

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
// No kill leaves a log shorter than its header but not empty (Check
// refuses that): a log is sized in one truncate before its header is
// written, and cut back only to the end of its entries.
//
// An empty memtable log is removed, as Badger would remove it: if it was
// not left by a kill but truncated with synced commits in it, the store is
// behind its high-water mark (CheckMark). An empty value log's name and
// place do not tell a kill from a truncation: the newest value log holds
// the values of the process that created it until the next open creates
// another, and any older one may hold values. What tells is whether a
// live value points into it. So the store's Open hides it from Badger
// (renamed NAME.vlog.empty) and, once Badger is open, reads every value of
// the value log (Opening.HiddenLogs): one unreadable means the file held
// values (damage, and the hidden file stays, so every open says so until
// --allow-damaged); none means nothing pointed into it, and it is removed.
// Badger, left to open an empty log itself, would size it and write a
// header into it, after which nothing tells a truncation; read-only, it
// fails on it.

// EmptyLogSuffix marks a value log of 0 bytes hidden from Badger until
// the store's Open has checked that no value points into it.
const EmptyLogSuffix = ".empty"

// OpenEmptyLogs deals with the empty logs in dir before Badger opens it:
// it removes the memtable logs and hides the value logs, and returns the
// hidden value logs (those an earlier open hid and could not clear too).
// A read-only open, which shares the lock with other readers, leaves them
// and fails if Badger would see one.
func OpenEmptyLogs(dir string, readOnly bool) (hidden []string, err error) {
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
		case strings.HasSuffix(name, ".vlog"+EmptyLogSuffix):
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
			Abbreviate(append(mems, vlogs...)))
	}
	for _, name := range mems {
		if err := os.Remove(filepath.Join(dir, name)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, err
		}
	}
	for _, name := range vlogs {
		if err := os.Rename(filepath.Join(dir, name), filepath.Join(dir, name+EmptyLogSuffix)); err != nil {
			return nil, err
		}
		hidden = append(hidden, name+EmptyLogSuffix)
	}
	slices.Sort(hidden)
	return hidden, logsync.SyncDir(dir)
}

// HiddenLogs reads every value of the value log of the store db, which o
// opened after OpenEmptyLogs hid the empty value logs hidden (the store's
// values of threshold bytes or more: the others are in its tables and
// memtable logs), each through read. If all read, no value pointed into
// the hidden logs, and they are removed (unless o is read-only: the next
// open for writing removes them). If one does not, the hidden logs held
// values: the store is damaged, and HiddenLogs returns the findings when o
// does not open it anyway (else it warns and sets the logs aside).
func (o Opening) HiddenLogs(db *badger.DB, hidden []string, threshold int64, read func(*badger.Item) error) ([]Finding, error) {
	if len(hidden) == 0 {
		return nil, nil
	}
	if bad := unreadableValue(db, threshold, read); bad != nil {
		var found []Finding
		for _, name := range hidden {
			found = append(found, Finding{Check: "log", File: filepath.Join(o.Dir, name), Detail: fmt.Sprintf(
				"the value log %s was found empty (0 bytes), and values in the value log cannot be read (%v): the file held values and was truncated; "+
					"a crash leaves a value log empty only when no live value points into it",
				strings.TrimSuffix(name, EmptyLogSuffix), bad)})
		}
		if !o.AllowDamaged {
			return found, nil
		}
		return nil, o.damaged(found)
	}
	if o.ReadOnly {
		return nil, nil
	}
	for _, name := range hidden {
		if err := os.Remove(filepath.Join(o.Dir, name)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("open store %s: %w", o.Dir, err)
		}
	}
	return nil, logsync.SyncDir(o.Dir)
}

// unreadableValue returns why the first value of the value log that
// cannot be read could not, or nil if every one reads.
func unreadableValue(db *badger.DB, threshold int64, read func(*badger.Item) error) (bad error) {
	err := db.View(func(txn *badger.Txn) (err error) {
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
			if item.ValueSize() < threshold/2 {
				continue
			}
			key = item.KeyCopy(key[:0])
			if err := read(item); err != nil {
				return fmt.Errorf("key %q: %w", key, FirstLine(err))
			}
		}
		return nil
	})
	if bad == nil {
		bad = err
	}
	return bad
}

// HasEmptyLogs reports whether dir holds a log a kill left empty, or one an
// earlier open hid: only an open for writing clears them.
func HasEmptyLogs(dir string) bool {
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		name := e.Name()
		if strings.HasSuffix(name, ".vlog"+EmptyLogSuffix) {
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
