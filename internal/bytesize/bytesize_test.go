package bytesize

import (
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestParse(t *testing.T) {
	for in, want := range map[string]uint64{
		"0": 0, "512": 512, "512B": 512, "1KB": 1000, "1KiB": 1024, " 64MiB ": 64 << 20,
		"2 GB": 2_000_000_000, "3GiB": 3 << 30, "18446744073709551615": 1<<64 - 1,
	} {
		got, err := Parse("size", in)
		require.NoError(t, err, in)
		require.Equal(t, want, got, in)
	}
	for in, msg := range map[string]string{
		"":                     "must be a whole number followed by a unit",
		"-1MiB":                "must be a whole number",
		"1.5GiB":               "must be a whole number",
		"64mib":                `"mib" is not a size unit`,
		"16TiB":                `"TiB" is not a size unit`,
		"18446744073709551616": "too large",
		"17179869184GiB":       "too large",
	} {
		_, err := Parse("size", in)
		require.ErrorContains(t, err, msg, in)
	}
	_, err := Parse("memory", "1XB")
	require.ErrorContains(t, err, "not a memory unit")
}

// FuzzParse: any text gives a size or an error, and a size is the number
// written times its unit.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"64MiB", "1 KB", "0", "99999999999999999999GiB", "1e3", "٣MiB"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := Parse("size", s)
		if err != nil {
			return
		}
		digits := strings.TrimSpace(s)
		digits = digits[:len(digits)-len(strings.TrimLeft(digits, "0123456789"))]
		d, perr := strconv.ParseUint(digits, 10, 64)
		if perr != nil || d > n || (d == 0) != (n == 0) {
			t.Fatalf("Parse(%q) = %d from digits %q", s, n, digits)
		}
	})
}
