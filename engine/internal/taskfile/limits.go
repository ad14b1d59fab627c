package taskfile

import (
	"fmt"

	"github.com/hashicorp/hcl/v2"

	"github.com/lhengine/lhengine/engine/internal/hcldecode"
)

// Limits are the task's quotas on what its plugins may make the host keep:
// progress notes and counter names, plugin log lines passed to the engine's
// logger, and the task's stored key/value entries, artifacts and outputs.
// Past a quota a capability call returns the ABI's BUDGET status; a single
// value larger than the whole quota returns TOO_LARGE (specs/task-language.md,
// "Limits"; docs/THREAT-MODEL.md lists every limit of the engine).
//
// Every field holds a value: the task file's, or its Default. Zero means none
// is allowed.
type Limits struct {
	Notes                  int    // progress notes per attempt
	NoteBytes              uint64 // bytes of progress note text per attempt
	CounterNamesPerAttempt int    // distinct progress counter names one attempt may report
	CounterNames           int    // distinct progress counter names of the whole task
	LogPassthrough         uint64 // bytes of plugin log messages passed to the engine's logger per attempt
	KVBytes                uint64 // bytes of key/value entries (keys and values) the task keeps
	ArtifactBytes          uint64 // bytes of distinct artifacts the task stores
	OutputBytes            uint64 // bytes of step outputs the task commits
	WorkspaceBytes         uint64 // bytes of the files in the task's workspace

	DeclRange hcl.Range // the limits block's header; empty when the task has none
}

// Default limits, for a task file that leaves them out.
const (
	DefaultNotes                  = 1000
	DefaultNoteBytes              = 1 << 20
	DefaultCounterNamesPerAttempt = 1000
	DefaultCounterNames           = 1000
	DefaultLogPassthrough         = 1 << 20
	DefaultKVBytes                = 64 << 20
	DefaultArtifactBytes          = 1 << 30
	DefaultOutputBytes            = 256 << 20
	DefaultWorkspaceBytes         = 1 << 30

	// MaxQuotaBytes bounds every byte quota of a limits block.
	MaxQuotaBytes = 1 << 40
	// MaxQuotaCount bounds every count of a limits block.
	MaxQuotaCount = 1_000_000
)

// DefaultLimits returns the limits of a task that declares no limits block.
func DefaultLimits() Limits {
	return Limits{
		Notes:                  DefaultNotes,
		NoteBytes:              DefaultNoteBytes,
		CounterNamesPerAttempt: DefaultCounterNamesPerAttempt,
		CounterNames:           DefaultCounterNames,
		LogPassthrough:         DefaultLogPassthrough,
		KVBytes:                DefaultKVBytes,
		ArtifactBytes:          DefaultArtifactBytes,
		OutputBytes:            DefaultOutputBytes,
		WorkspaceBytes:         DefaultWorkspaceBytes,
	}
}

// LimitsOf returns the limits a step runs under: its task's, or the
// defaults for a step that was not parsed from a task file.
func (s *Step) LimitsOf() Limits {
	if s == nil || s.Limits == nil {
		return DefaultLimits()
	}
	return *s.Limits
}

var limitsSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{
		{Name: "notes"},
		{Name: "note_bytes"},
		{Name: "counter_names_per_attempt"},
		{Name: "counter_names"},
		{Name: "log_passthrough"},
		{Name: "kv_bytes"},
		{Name: "artifact_bytes"},
		{Name: "output_bytes"},
		{Name: "workspace_bytes"},
	},
}

// decodeLimitsBlock decodes a task's limits block over the defaults. Every
// problem is reported on the attribute's expression.
func decodeLimitsBlock(block *hcl.Block) (Limits, hcl.Diagnostics) {
	l := DefaultLimits()
	l.DeclRange = block.DefRange
	content, diags := block.Body.Content(limitsSchema)
	count := func(name string, dst *int) hcldecode.Field {
		return hcldecode.Set(name, dst, hcldecode.IntIn(0, MaxQuotaCount, "Invalid limit",
			fmt.Sprintf("%s must be a whole number from 0 (none allowed) to %d; got %%d.", name, MaxQuotaCount)))
	}
	size := func(name string, dst *uint64) hcldecode.Field {
		return hcldecode.Set(name, dst, hcldecode.Size("Invalid limit", "size", 0, MaxQuotaBytes,
			name+" must be a size from 0 (none allowed) to 1TiB; got %d bytes."))
	}
	return l, append(diags, hcldecode.Fields(content.Attributes,
		count("notes", &l.Notes),
		count("counter_names_per_attempt", &l.CounterNamesPerAttempt),
		count("counter_names", &l.CounterNames),
		size("note_bytes", &l.NoteBytes),
		size("log_passthrough", &l.LogPassthrough),
		size("kv_bytes", &l.KVBytes),
		size("artifact_bytes", &l.ArtifactBytes),
		size("output_bytes", &l.OutputBytes),
		size("workspace_bytes", &l.WorkspaceBytes),
	)...)
}
