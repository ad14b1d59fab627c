// Package bytesize reads the sizes people write in task files and on the
// command line: a whole number and a unit, "64MiB", "512KiB", "2GB".
package bytesize

import (
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
)

var pattern = regexp.MustCompile(`^([0-9]+)\s*([A-Za-z]*)$`)

var units = map[string]uint64{
	"":    1,
	"B":   1,
	"KB":  1000,
	"MB":  1000 * 1000,
	"GB":  1000 * 1000 * 1000,
	"KiB": 1 << 10,
	"MiB": 1 << 20,
	"GiB": 1 << 30,
}

// Parse parses a whole number optionally followed by one of the units B, KB,
// MB, GB (powers of 1000) or KiB, MiB, GiB (powers of 1024). name is what the
// error message calls the size ("memory", "--memory-limit").
func Parse(name, s string) (uint64, error) {
	m := pattern.FindStringSubmatch(strings.TrimSpace(s))
	if m == nil {
		return 0, fmt.Errorf("%s must be a whole number followed by a unit, such as \"64MiB\" or \"512KiB\"; %q is not one", name, s)
	}
	unit, ok := units[m[2]]
	if !ok {
		noun := "size"
		if name == "memory" {
			noun = "memory"
		}
		return 0, fmt.Errorf("%q is not a %s unit; use B, KB, MB, GB (powers of 1000) or KiB, MiB, GiB (powers of 1024)", m[2], noun)
	}
	n, err := strconv.ParseUint(m[1], 10, 64)
	if err != nil || n > math.MaxUint64/unit {
		return 0, fmt.Errorf("%q is too large", s)
	}
	return n * unit, nil
}
