package store

import (
	"fmt"
	"strings"

	"github.com/lhengine/lhengine/store/internal/filecheck"
	"github.com/lhengine/lhengine/store/internal/kv"
)

// ErrDamaged: the store's files show that committed data is missing or
// corrupt. Open refuses such a store unless Options.AllowDamaged is set.
var ErrDamaged = kv.ErrDamaged

// Finding is one problem an integrity check found.
type Finding struct {
	// Check names the check: "manifest", "tables", "high-water", "open",
	// "checksum", "record", "invariant", "log".
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

// findings are the store's findings of the file checks' (internal/filecheck).
func findings(fs []filecheck.Finding) []Finding {
	var out []Finding
	for _, f := range fs {
		out = append(out, Finding(f))
	}
	return out
}
