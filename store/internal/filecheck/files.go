// Package filecheck checks a store's files where Badger does not: before
// Badger opens them (Check: a MANIFEST naming missing tables, data files
// without a MANIFEST, a table failing its checksums, a log cut inside its
// header; SetAside moves what would keep a damaged store from opening),
// the high-water mark kept beside the store (Marker, CheckMark: a store
// whose sync sequence went back lost synced writes), and the logs a killed
// process leaves empty (OpenEmptyLogs, UnreadableValue). It decides
// nothing: the store says what a finding means (a refusal, or a warning
// with --allow-damaged).
package filecheck

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/badger/v4/options"
	"github.com/dgraph-io/badger/v4/table"
	"github.com/dgraph-io/ristretto/v2/z"
	"github.com/hashicorp/go-hclog"

	"github.com/lhengine/lhengine/store/internal/logsync"
)

// Finding is one problem a check found (store.Finding has the same
// fields).
type Finding struct {
	// Check names the check: "manifest", "tables", "high-water", "open",
	// "checksum", "record", "invariant", "log".
	Check string
	// File is the file concerned, or the key for a record.
	File string
	// Detail says what was found.
	Detail string
}

const (
	// ManifestName is the file Badger writes first.
	ManifestName  = "MANIFEST"
	logHeaderSize = 20 // key id and IV at the start of every .vlog and .mem file
)

// Check looks at the store directory before Badger opens it: data files
// with no MANIFEST (Badger would start an empty store and delete the
// tables), or a MANIFEST naming tables that are gone. orphans are tables the
// MANIFEST does not name: an interrupted flush or compaction leaves them and
// Badger deletes them at open.
func Check(dir string) (findings []Finding, orphans []string, err error) {
	findings, orphans, _, err = check(dir, nil)
	return findings, orphans, err
}

// VerifiedName is the file, beside the store's, naming the tables whose
// checksums an open verified (name, size and modification time of each):
// Badger never changes a table once written, so a later open verifies
// only the tables that are new since (or changed: a table that is not as
// listed is verified again). `lhengine store verify` verifies every one.
const VerifiedName = "tables-verified"

// stamp says which file a table is: its name, size and modification time.
type stamp struct {
	name  string
	size  int64
	mtime int64
}

func (t stamp) String() string { return fmt.Sprintf("%s %d %d", t.name, t.size, t.mtime) }

// readVerified reads the tables an earlier open verified; a list it
// cannot read is empty (every table is verified again).
func readVerified(dir string) map[stamp]bool {
	b, err := os.ReadFile(filepath.Join(dir, VerifiedName))
	if err != nil {
		return nil
	}
	known := map[stamp]bool{}
	for _, line := range strings.Split(string(b), "\n") {
		var t stamp
		if n, err := fmt.Sscanf(line, "%s %d %d", &t.name, &t.size, &t.mtime); err == nil && n == 3 {
			known[t] = true
		}
	}
	return known
}

// writeVerified replaces the list of verified tables (a new file renamed
// over the old: an open cut short leaves one or the other). It is not
// synced: a list lost costs the next open its checks, nothing more.
func writeVerified(dir string, tables []stamp) error {
	var sb strings.Builder
	for _, t := range tables {
		sb.WriteString(t.String() + "\n")
	}
	tmp := filepath.Join(dir, VerifiedName+".new")
	if err := os.WriteFile(tmp, []byte(sb.String()), 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(dir, VerifiedName))
}

// check is Check, verifying only the tables not in known; verified are the
// tables the MANIFEST names that passed, or were known.
func check(dir string, known map[stamp]bool) (findings []Finding, orphans []string, verified []stamp, err error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil, nil, nil
	}
	if err != nil {
		return nil, nil, nil, err
	}
	var data []string
	tables := map[uint64]string{}
	stamps := map[string]stamp{}
	hasManifest := false
	for _, e := range entries {
		name := e.Name()
		switch {
		case name == ManifestName:
			hasManifest = true
		case strings.HasSuffix(name, ".sst"):
			if id, err := strconv.ParseUint(strings.TrimSuffix(name, ".sst"), 10, 64); err == nil {
				tables[id] = name
				if fi, err := e.Info(); err == nil {
					stamps[name] = stamp{name, fi.Size(), fi.ModTime().UnixNano()}
				}
			}
			data = append(data, name)
		case strings.HasSuffix(name, ".vlog"), strings.HasSuffix(name, ".mem"):
			data = append(data, name)
			// Badger sizes a new log before it writes its header, and
			// cuts a log to 0 bytes only to delete it: a kill leaves 0
			// bytes (see OpenEmptyLogs), never a size inside the header.
			if fi, err := e.Info(); err == nil && fi.Size() > 0 && fi.Size() < logHeaderSize {
				findings = append(findings, Finding{Check: "log", File: filepath.Join(dir, name),
					Detail: fmt.Sprintf("%d bytes, shorter than a log file's %d-byte header: the file was truncated", fi.Size(), logHeaderSize)})
			}
		}
	}
	if !hasManifest {
		if len(tables) > 0 {
			return append(findings, Finding{Check: "manifest", File: filepath.Join(dir, ManifestName),
				Detail: fmt.Sprintf("missing, but %d data files are present (%s); Badger would start an empty store and delete the tables", len(data), Abbreviate(data))}), nil, nil, nil
		}
		return findings, nil, nil, nil
	}
	fp, err := os.Open(filepath.Join(dir, ManifestName))
	if err != nil {
		return nil, nil, nil, err
	}
	defer fp.Close()
	m, _, err := badger.ReplayManifestFile(fp, 0, badger.DefaultOptions(dir))
	if err != nil {
		return append(findings, Finding{Check: "manifest", File: fp.Name(), Detail: fmt.Sprintf("unreadable: %v", err)}), nil, nil, nil
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
			Detail: fmt.Sprintf("names %d tables that are missing (%s)", len(missing), Abbreviate(missing))})
	}
	ids := make([]uint64, 0, len(m.Tables))
	for id := range m.Tables {
		if _, ok := tables[id]; ok {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	for _, id := range ids {
		name := tables[id]
		st, ok := stamps[name]
		if ok && known[st] {
			verified = append(verified, st)
			continue
		}
		path := filepath.Join(dir, name)
		if err := verifyTable(path, m.Tables[id].Compression); err != nil {
			findings = append(findings, Finding{Check: "checksum", File: path, Detail: err.Error()})
		} else if ok {
			verified = append(verified, st)
		}
	}
	return findings, orphans, verified, nil
}

// An Opening is an open of the store in Dir, as the checks see it:
// whether a damaged store opens anyway (with a warning on Log, and its
// damaged files set aside unless ReadOnly).
type Opening struct {
	Dir          string
	AllowDamaged bool
	ReadOnly     bool
	Log          hclog.Logger
}

// Files is Check before an open. It returns what Check found; a damaged
// store that o does not open is left as it is, for the caller to refuse.
// Orphan tables are warned of.
//
// A table an earlier open verified, and that is as it was then, is not
// verified again (VerifiedName): an open costs the checks of the tables
// written since, not of the whole store.
func (o Opening) Files() ([]Finding, error) {
	dir := o.Dir
	found, orphans, verified, err := check(dir, readVerified(dir))
	if err != nil {
		return nil, fmt.Errorf("open store %s: %w", dir, err)
	}
	if len(found) == 0 && !o.ReadOnly && verified != nil {
		if err := writeVerified(dir, verified); err != nil {
			o.Log.Warn("the list of verified tables could not be written; the next open verifies them again", "dir", dir, "error", err)
		}
	}
	if len(found) > 0 && !o.AllowDamaged {
		return found, nil
	}
	if err := o.damaged(found); err != nil {
		return nil, err
	}
	if len(orphans) > 0 {
		o.Log.Warn("tables not named in the MANIFEST (left by an interrupted flush or compaction) will be deleted",
			"dir", dir, "tables", Abbreviate(orphans))
	}
	return found, nil
}

// damaged warns of each finding of a damaged store o opens anyway and,
// unless read-only, sets its damaged files aside.
func (o Opening) damaged(found []Finding) error {
	for _, f := range found {
		o.Log.Warn("opening a damaged store", "dir", o.Dir, "finding", f.String())
	}
	if len(found) == 0 || o.ReadOnly {
		return nil
	}
	aside, err := SetAside(o.Dir, found)
	if err != nil {
		return fmt.Errorf("open store %s: setting damaged files aside: %w", o.Dir, err)
	}
	if aside != "" {
		o.Log.Warn("damaged files set aside; the store opens without them", "dir", aside)
	}
	return nil
}

func (f Finding) String() string {
	if f.File != "" {
		return fmt.Sprintf("%s check: %s: %s", f.Check, f.File, f.Detail)
	}
	return fmt.Sprintf("%s check: %s", f.Check, f.Detail)
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
		return FirstLine(err)
	}
	return t.Close(-1)
}

// FirstLine drops the stack trace Badger's errors carry.
func FirstLine(err error) error {
	msg, _, _ := strings.Cut(err.Error(), "\n")
	return errors.New(msg)
}

// Abbreviate lists names, the first five and how many more.
func Abbreviate(names []string) string {
	if len(names) > 5 {
		return strings.Join(names[:5], ", ") + fmt.Sprintf(" and %d more", len(names)-5)
	}
	return strings.Join(names, ", ")
}

// SetAside moves files that keep Badger from opening a damaged store into a
// subdirectory, where Badger does not look: the tables of a store without
// MANIFEST (Badger would delete them) and log files cut shorter than their
// header (Badger fails on them). Opening with AllowDamaged keeps them there.
// It returns the subdirectory, "" when nothing was moved.
func SetAside(dir string, found []Finding) (string, error) {
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

// HasManifest reports whether Badger has created the store in dir (a
// MANIFEST is the first file it writes).
func HasManifest(dir string) bool {
	_, err := os.Stat(filepath.Join(dir, ManifestName))
	return err == nil
}
