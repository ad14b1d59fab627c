package read

import (
	"strconv"
	"strings"
	"testing"

	"github.com/lhengine/lhengine/store/internal/kv"
)

// FuzzAttemptKeySuffix: the item and attempt a fan-out's output read takes
// from an attempt key are those the key was made with, and a suffix the
// store does not write is refused, never misread.
func FuzzAttemptKeySuffix(f *testing.F) {
	f.Add(0, 1, "00000000/00000001")
	f.Add(99999, 3, "0001869f/00000003")
	f.Add(1<<31-1, 1<<31-1, "x/1")
	f.Add(5, 2, "/")
	f.Fuzz(func(t *testing.T, item, attempt int, raw string) {
		if item >= 0 && attempt >= 0 && item < 1<<31 && attempt < 1<<31 {
			key := kv.AttemptKey("01J", 1, item, attempt)
			got, ok := parseAttemptSuffix(key[len(kv.AttemptPrefix("01J", 1)):])
			if !ok || got != (unitAttempt{item, attempt}) {
				t.Fatalf("attempt key %s read as %v, %v", key, got, ok)
			}
		}
		if got, ok := parseAttemptSuffix([]byte(raw)); ok && !sameHexPair(raw, got) {
			t.Fatalf("%q read as %v", raw, got)
		}
	})
}

// sameHexPair reports whether raw is "A/B" with A and B the hex (any
// leading zeros or letter case) of a's item and attempt.
func sameHexPair(raw string, a unitAttempt) bool {
	x, y, ok := strings.Cut(raw, "/")
	if !ok {
		return false
	}
	i, err1 := strconv.ParseUint(x, 16, 64)
	j, err2 := strconv.ParseUint(y, 16, 64)
	return err1 == nil && err2 == nil && int(i) == a.item && int(j) == a.attempt
}
