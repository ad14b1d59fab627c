package storedir

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lhengine/lhengine/ledger"
)

// TestFloor: writes are refused below the floor, and a big write that would
// go below it is refused too; a small one fits in the floor's own room.
func TestFloor(t *testing.T) {
	t.Parallel()
	free := int64(200 << 20)
	d := NewFloor("/x", 128<<20, func(string) (int64, error) { return free, nil })
	require.EqualValues(t, 128<<20, d.Bytes())
	require.NoError(t, d.Check())
	require.NoError(t, d.CheckWrite(BigWrite-1))
	require.NoError(t, d.CheckWrite(72<<20))
	err := d.CheckWrite(73 << 20)
	require.ErrorIs(t, err, ledger.ErrNoSpace)
	require.ErrorContains(t, err, "200 MiB free in /x, floor 128 MiB: a write of 73 MiB would go below it")

	free = 100 << 20
	err = d.Check()
	require.ErrorIs(t, err, ledger.ErrNoSpace)
	require.ErrorContains(t, err, "100 MiB free in /x, floor 128 MiB; the store refuses writes until space is freed")

	broken := errors.New("statfs failed")
	require.ErrorIs(t, NewFloor("/x", 1, func(string) (int64, error) { return 0, broken }).Check(), broken)
}

// TestNoFloor: a nil floor, or one of 0 bytes, checks nothing.
func TestNoFloor(t *testing.T) {
	t.Parallel()
	var d *Floor
	require.NoError(t, d.Check())
	require.Zero(t, d.Bytes())
	require.NoError(t, NewFloor("/x", 0, nil).CheckWrite(1<<40))
}
