package hostcall

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lhengine/lhengine/engine/internal/guest"
	"github.com/lhengine/lhengine/engine/internal/taskfile"
)

// TestFileEffectThroughLinkCreatesNothingOutside: a file effect whose path
// goes through a relative link out of the workspace is denied, and
// creates no directory outside on the way (the missing directories of the
// path were once created before the link was noticed).
func TestFileEffectThroughLinkCreatesNothingOutside(t *testing.T) {
	t.Parallel()
	a := setup(t, &taskfile.Step{Name: "write", Effects: map[string]*taskfile.EffectGrant{"file": {Kind: "file", Mode: "resend"}}})
	ctx := context.Background()
	outside := filepath.Join(filepath.Dir(a.Workspace), "outside")
	require.NoError(t, os.Mkdir(outside, 0o755))
	require.NoError(t, os.Symlink("../outside", filepath.Join(a.Workspace, "out")))
	require.NoError(t, os.Mkdir(filepath.Join(a.Workspace, "real"), 0o755))
	require.NoError(t, os.Symlink("../out", filepath.Join(a.Workspace, "real", "back")))
	for i, p := range []string{"out/new/x.txt", "out/x.txt", "real/back/new/x.txt", "out"} {
		_, err := a.Call(ctx, "effect.do", []byte(`{"key":"k`+string(rune('0'+i))+`","kind":"file","request":{"path":"`+p+`","content":"data"}}`))
		require.Equal(t, guest.StatusDenied, status(t, err), "%s: %v", p, err)
	}
	entries, err := os.ReadDir(outside)
	require.NoError(t, err)
	require.Empty(t, entries, "nothing created outside the workspace")
	_, err = os.Lstat(filepath.Join(a.Workspace, "real", "back", "new"))
	require.ErrorIs(t, err, os.ErrNotExist)
}
