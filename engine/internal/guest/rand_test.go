package guest

import (
	"encoding/json"
	"io"
	"testing"

	"github.com/stretchr/testify/require"
)

// readRand returns the first n bytes of the random_get stream of req,
// read in chunks of chunk bytes.
func readRand(t *testing.T, req Request, n, chunk int) []byte {
	t.Helper()
	r := fakeRand{seed: Seed(req)}
	got := make([]byte, 0, n)
	buf := make([]byte, chunk)
	for len(got) < n {
		k, err := io.ReadFull(&r, buf[:min(chunk, n-len(got))])
		require.NoError(t, err)
		got = append(got, buf[:k]...)
	}
	return got
}

// TestRandPerAttempt checks that every work unit and every attempt of it
// gets a random stream of its own, that the same attempt always gets the
// same stream however it is read, and that the input does not change it
// (a replay with the same identity replays the same bytes).
func TestRandPerAttempt(t *testing.T) {
	t.Parallel()
	base := Request{TaskID: "01JTASK", TaskName: "t", Step: "each", Attempt: 1,
		Item: &Item{Index: 0}, Input: json.RawMessage(`{}`)}
	variants := map[string]Request{"base": base}
	v := base
	v.TaskID = "01JOTHER"
	variants["other task"] = v
	v = base
	v.Step = "other"
	variants["other step"] = v
	v = base
	v.Item = &Item{Index: 1}
	variants["other item"] = v
	v = base
	v.Item = nil
	variants["no item"] = v
	v = base
	v.Attempt = 2
	variants["next attempt"] = v
	v = base
	v.Repair = &Repair{Count: 1}
	variants["after a repair"] = v

	const n = 4096 + 77
	seen := map[string]string{}
	for name, req := range variants {
		got := string(readRand(t, req, n, n))
		other, dup := seen[got]
		require.False(t, dup, "%s and %s get the same bytes", name, other)
		seen[got] = name
		for _, chunk := range []int{1, 7, 8, 1000, 4096} {
			require.Equal(t, got, string(readRand(t, req, n, chunk)), "%s in reads of %d bytes", name, chunk)
		}
	}
	same := base
	same.Input = json.RawMessage(`{"other":"input"}`)
	same.TaskName = "renamed"
	require.Equal(t, readRand(t, base, 64, 64), readRand(t, same, 64, 64))
}
