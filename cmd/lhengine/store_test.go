package main

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lhengine/lhengine/ledger"
	"github.com/lhengine/lhengine/store"
)

func TestStoreVerifyAndAllowDamaged(t *testing.T) {
	t.Parallel()
	b := &cliBundle{dir: t.TempDir()}
	b.home = filepath.Join(b.dir, "home")
	s, err := store.Open(filepath.Join(b.home, "store"), store.Options{})
	require.NoError(t, err)
	task, _, err := s.Submit(context.Background(), ledger.NewTask{Name: "kept", Steps: []ledger.StepState{{Name: "a"}}})
	require.NoError(t, err)
	require.NoError(t, s.Close())

	code, out, stderr := b.lh(t, "store", "verify")
	require.Equal(t, 0, code, stderr)
	require.Contains(t, out, "ok: no damage found")
	require.Contains(t, out, "1 tasks")

	// The mark says syncs happened that the store does not have: rolled back.
	require.NoError(t, os.WriteFile(filepath.Join(b.home, "store.highwater"), []byte("1000\n"), 0o644))
	code, out, _ = b.lh(t, "store", "verify")
	require.Equal(t, 1, code)
	require.Contains(t, out, "DAMAGED: high-water check")
	require.Contains(t, out, "syncs behind")

	code, _, stderr = b.lh(t, "ls")
	require.Equal(t, 1, code)
	require.Contains(t, stderr, "is damaged")
	require.Contains(t, stderr, "--allow-damaged")

	code, out, stderr = b.lh(t, "--allow-damaged", "ls")
	require.Equal(t, 0, code, stderr)
	require.Contains(t, out, task.ID)
}
