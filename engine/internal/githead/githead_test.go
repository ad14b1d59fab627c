package githead

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/lhengine/lhengine/internal/testgit"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// TestRead holds Read to git rev-parse HEAD: after commits, with the refs
// packed, with a detached HEAD, in a linked work tree; and checks its
// errors for a repository without commits and a directory without one.
func TestRead(t *testing.T) {
	t.Parallel()
	_, err := exec.LookPath("git")
	require.NoError(t, err, "the test builds its repositories with git (scripts/deps.sh installs it)")
	dir := t.TempDir()
	repo := filepath.Join(dir, "repo")
	require.NoError(t, os.Mkdir(repo, 0o755))
	testgit.Run(t, repo, "init", "-q")
	_, err = Read(repo)
	require.ErrorContains(t, err, "no commit yet", "a repository without commits")

	require.NoError(t, os.WriteFile(filepath.Join(repo, "a.txt"), []byte("one\n"), 0o644))
	testgit.Run(t, repo, "add", "a.txt")
	testgit.Run(t, repo, "commit", "-q", "-m", "one")
	first, err := Read(repo)
	require.NoError(t, err)
	require.Equal(t, testgit.Run(t, repo, "rev-parse", "HEAD"), first)

	require.NoError(t, os.WriteFile(filepath.Join(repo, "a.txt"), []byte("two\n"), 0o644))
	testgit.Run(t, repo, "commit", "-q", "-am", "two")
	second, err := Read(repo)
	require.NoError(t, err)
	require.NotEqual(t, first, second)
	require.Equal(t, testgit.Run(t, repo, "rev-parse", "HEAD"), second)

	// Refs packed, then a detached HEAD, then a linked work tree.
	testgit.Run(t, repo, "pack-refs", "--all")
	require.NoFileExists(t, filepath.Join(repo, ".git", "refs", "heads", "main"))
	got, err := Read(repo)
	require.NoError(t, err)
	require.Equal(t, second, got)
	testgit.Run(t, repo, "checkout", "-q", "--detach", first)
	got, err = Read(repo)
	require.NoError(t, err)
	require.Equal(t, first, got)
	wt := filepath.Join(dir, "wt")
	testgit.Run(t, repo, "worktree", "add", "-q", "-b", "side", wt, second)
	got, err = Read(wt)
	require.NoError(t, err)
	require.Equal(t, second, got)

	_, err = Read(dir)
	require.ErrorContains(t, err, "no git repository in "+dir)
}
