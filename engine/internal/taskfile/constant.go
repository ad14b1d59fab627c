package taskfile

import (
	"github.com/hashicorp/hcl/v2"

	"github.com/lhengine/lhengine/engine/internal/hcldecode"
	"github.com/lhengine/lhengine/internal/bytesize"
)

// DecodeMemory decodes a memory size, a step's or a policy override's: a
// whole number of bytes, or a string such as "64MiB", from MinMemory to
// MaxMemory.
func DecodeMemory(attr *hcl.Attribute) (uint64, hcl.Diagnostics) {
	return hcldecode.Size("Invalid memory size", "memory size", MinMemory, MaxMemory,
		"memory must be between 64KiB (one WebAssembly page) and 4GiB; got %d bytes.")(attr)
}

// parseMemory parses a memory size: a whole number optionally followed by one
// of the units B, KB, MB, GB (powers of 1000) or KiB, MiB, GiB (powers of 1024).
func parseMemory(s string) (uint64, error) { return bytesize.Parse("memory", s) }
