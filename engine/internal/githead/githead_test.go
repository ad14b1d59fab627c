package githead

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// gitRun runs git in dir and returns its trimmed output.
func gitRun(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-c", "user.name=Test", "-c", "user.email=test@example.com", "-c", "init.defaultBranch=main"}, args...)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "HOME="+dir)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "git %v: %s", args, out)
	return strings.TrimSpace(string(out))
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
	gitRun(t, repo, "init", "-q")
	_, err = Read(repo)
	require.ErrorContains(t, err, "no commit yet", "a repository without commits")

	require.NoError(t, os.WriteFile(filepath.Join(repo, "a.txt"), []byte("one\n"), 0o644))
	gitRun(t, repo, "add", "a.txt")
	gitRun(t, repo, "commit", "-q", "-m", "one")
	first, err := Read(repo)
	require.NoError(t, err)
	require.Equal(t, gitRun(t, repo, "rev-parse", "HEAD"), first)

	require.NoError(t, os.WriteFile(filepath.Join(repo, "a.txt"), []byte("two\n"), 0o644))
	gitRun(t, repo, "commit", "-q", "-am", "two")
	second, err := Read(repo)
	require.NoError(t, err)
	require.NotEqual(t, first, second)
	require.Equal(t, gitRun(t, repo, "rev-parse", "HEAD"), second)

	// Refs packed, then a detached HEAD, then a linked work tree.
	gitRun(t, repo, "pack-refs", "--all")
	require.NoFileExists(t, filepath.Join(repo, ".git", "refs", "heads", "main"))
	got, err := Read(repo)
	require.NoError(t, err)
	require.Equal(t, second, got)
	gitRun(t, repo, "checkout", "-q", "--detach", first)
	got, err = Read(repo)
	require.NoError(t, err)
	require.Equal(t, first, got)
	wt := filepath.Join(dir, "wt")
	gitRun(t, repo, "worktree", "add", "-q", "-b", "side", wt, second)
	got, err = Read(wt)
	require.NoError(t, err)
	require.Equal(t, second, got)

	_, err = Read(dir)
	require.ErrorContains(t, err, "no git repository in "+dir)
}
