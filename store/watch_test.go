package store

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lhengine/lhengine/ledger"
)

func TestChangedIsClosedByTheNextCommit(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ch := b.s.Changed()
	select {
	case <-ch:
		t.Fatal("closed before anything committed")
	default:
	}
	require.True(t, ch == b.s.Changed(), "watchers before a commit share one channel")
	task := b.submit(t, plainSteps("a"))
	select {
	case <-ch:
	default:
		t.Fatal("a submission did not wake the watcher")
	}
	next := b.s.Changed()
	select {
	case <-next:
		t.Fatal("the next channel is closed before the next commit")
	default:
	}
	b.done(t, b.claim1(t, "w"), `{}`)
	<-next
	_ = task
}

func TestUnitsUpToReadsAPage(t *testing.T) {
	t.Parallel()
	b := setup(t, fanOutPlanner(5))
	task := b.submit(t, []ledger.StepState{{Name: "each", FanOut: true, Limit: 5}})
	_ = task
	require.NoError(t, b.s.Read(func(r ledger.Reader) error {
		all, err := r.Units(task.ID, 0)
		require.NoError(t, err)
		page, err := r.UnitsUpTo(task.ID, 0, 3)
		require.NoError(t, err)
		require.Len(t, page, 3)
		require.Equal(t, all[:3], page)
		none, err := r.UnitsUpTo(task.ID, 0, 0)
		require.NoError(t, err)
		require.Empty(t, none)
		return nil
	}))
}

// TestASecondOpenNeverJudgesFilesInUse: a store another process has open
// may have files in the middle of being written (a new log of 0 bytes); a
// second open is refused as in use before it looks at them, never called
// damaged.
func TestASecondOpenNeverJudgesFilesInUse(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s, err := Open(dir, Options{})
	require.NoError(t, err)
	defer s.Close()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "000099.mem"), nil, 0o644))
	for _, ro := range []bool{false, true} {
		_, err = Open(dir, Options{ReadOnly: ro})
		require.ErrorIs(t, err, ledger.ErrInUse, "read-only %v", ro)
		var de *DamagedError
		require.False(t, errors.As(err, &de))
	}
	require.NoError(t, os.Remove(filepath.Join(dir, "000099.mem")))
}
