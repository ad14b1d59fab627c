package store

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/hashicorp/go-hclog"

	"github.com/lhengine/lhengine/store/internal/filecheck"
	"github.com/lhengine/lhengine/store/internal/scrub"
)

// Report is what Verify found in a store.
type Report struct {
	Dir      string    `json:"dir"`
	Tables   int       `json:"tables"`   // tables whose checksums were verified
	Keys     int       `json:"keys"`     // records read
	Bytes    int64     `json:"bytes"`    // bytes of values read
	Tasks    int       `json:"tasks"`    // task records
	Sync     uint64    `json:"sync"`     // the store's sync sequence
	Mark     uint64    `json:"mark"`     // the high-water mark beside it
	Findings []Finding `json:"findings"` // empty for a whole store
}

// Damaged reports whether any check failed.
func (r *Report) Damaged() bool { return len(r.Findings) > 0 }

// Verify scrubs the store in dir: it checks the files against the MANIFEST
// and every table's checksums, opens the store (read-only if it was closed;
// else taking its lock, so not while an engine has it open, and replaying
// its write-ahead log as any open does), compares its sync
// sequence with the high-water mark, reads every record (so every block
// and value checksum is checked) and decodes it, and checks the ledger's
// cross-references: every runnable task has a runnable task record, every
// unit and effect journal entry belongs to a task. A store without MANIFEST
// or with missing or damaged tables is not opened: Badger would drop them.
func Verify(dir string, logger hclog.Logger) (*Report, error) {
	if logger == nil {
		logger = hclog.NewNullLogger()
	}
	if _, err := os.Stat(dir); err != nil {
		return nil, fmt.Errorf("verify store: %w", err)
	}
	rep := &Report{Dir: dir}
	found, _, err := filecheck.Check(dir)
	if err != nil {
		return nil, fmt.Errorf("verify store %s: %w", dir, err)
	}
	rep.Tables = countSuffix(dir, ".sst")
	rep.Findings = append(rep.Findings, findings(found)...)
	if len(found) > 0 {
		return rep, nil
	}
	// Read-only when the store was closed; a store that was not has a
	// write-ahead log to replay, which needs the lock (and Badger, refusing
	// a read-only open for it, leaves goroutines behind), and may have logs
	// a kill left empty to clear (filecheck.OpenEmptyLogs). Replaying writes, so then
	// the free-space floor applies.
	o := Options{Logger: logger, AllowDamaged: true, ReadOnly: true, MinFreeBytes: -1, filesChecked: true}
	if countSuffix(dir, ".mem") > 0 || filecheck.HasEmptyLogs(dir) {
		o.ReadOnly, o.NoSync, o.MinFreeBytes = false, true, 0
	}
	s, err := Open(dir, o)
	var de *DamagedError
	if errors.As(err, &de) {
		rep.Findings = append(rep.Findings, de.Findings...)
		return rep, nil
	}
	if err != nil {
		return nil, fmt.Errorf("verify store: %w", err)
	}
	defer s.Close()

	// Open compared the sync sequence with the mark (an unreadable one
	// fails the open); a damaged open keeps what it found.
	rep.Sync, rep.Mark = s.opened.sync, s.opened.mark
	if f := s.opened.finding; f != nil {
		rep.Findings = append(rep.Findings, Finding(*f))
	}
	res := scrub.Records(s.db, s.ReplayIndex)
	rep.Keys, rep.Bytes, rep.Tasks = res.Keys, res.Bytes, res.Tasks
	rep.Findings = append(rep.Findings, findings(res.Findings)...)
	return rep, nil
}

func countSuffix(dir, suffix string) int {
	entries, _ := os.ReadDir(dir)
	n := 0
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), suffix) {
			n++
		}
	}
	return n
}
