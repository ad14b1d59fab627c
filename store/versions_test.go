package store

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lhengine/lhengine/ledger"
)

// TestTaskVersionsMoveWithEveryChange: a claim, a commit (which changes a
// step record) and a new task each show as a new version; a read does not.
func TestTaskVersionsMoveWithEveryChange(t *testing.T) {
	t.Parallel()
	b := setup(t)
	versions := func() []ledger.TaskVersion {
		var vs []ledger.TaskVersion
		require.NoError(t, b.s.Read(func(r ledger.Reader) error {
			var err error
			vs, err = r.TaskVersions()
			return err
		}))
		return vs
	}
	a := b.submit(t, plainSteps("x", "y"))
	v0 := versions()
	require.Len(t, v0, 1)
	require.Equal(t, a.ID, v0[0].ID)
	require.Equal(t, v0, versions(), "reading changes nothing")

	l := b.claim1(t, "w")
	v1 := versions()
	require.Greater(t, v1[0].Version, v0[0].Version)
	_, err := b.s.Commit(b.ctx, ledger.Result{Lease: l, Output: json.RawMessage(`1`)})
	require.NoError(t, err)
	v2 := versions()
	require.Greater(t, v2[0].Version, v1[0].Version)

	b.clock.Add(time.Second) // ids sort by their time
	c := b.submit(t, plainSteps("z"))
	v3 := versions()
	require.Equal(t, []string{a.ID, c.ID}, []string{v3[0].ID, v3[1].ID}, "oldest first")
	require.Equal(t, v2[0], v3[0], "the other task did not change")
}
