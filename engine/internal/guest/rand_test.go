package guest

import (
	"io"
	"math/rand"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestFakeRand checks the guest's random source gives exactly the bytes of
// a math/rand source seeded with 42 (wazero's default, which the ABI's
// "seeded source" has always been), however the reads are split, across
// the end of the shared prefix too.
func TestFakeRand(t *testing.T) {
	const n = 3*fakeRandShared + 77
	want := make([]byte, n)
	rand.New(rand.NewSource(42)).Read(want)
	for _, chunk := range []int{1, 7, 8, 32, 1000, fakeRandShared, fakeRandShared + 1, n} {
		var r fakeRand
		got := make([]byte, 0, n)
		buf := make([]byte, chunk)
		for len(got) < n {
			k, err := io.ReadFull(&r, buf[:min(chunk, n-len(got))])
			require.NoError(t, err)
			got = append(got, buf[:k]...)
		}
		require.Equal(t, want, got, "reads of %d bytes", chunk)
	}
}
