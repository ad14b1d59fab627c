package testgit_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lhengine/lhengine/internal/testgit"
)

// TestRun: a repository made and committed to, as the test user, on main.
func TestRun(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	testgit.Run(t, dir, "init")
	testgit.Run(t, dir, "commit", "--allow-empty", "-m", "first")
	require.Equal(t, "main", testgit.Run(t, dir, "branch", "--show-current"))
	require.Equal(t, "Test <test@example.com>", testgit.Run(t, dir, "log", "-1", "--format=%an <%ae>"))
}
