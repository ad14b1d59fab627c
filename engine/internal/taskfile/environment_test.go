package taskfile

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

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

func TestGitHeadFact(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git not installed")
	}
	dir := t.TempDir()
	repo := filepath.Join(dir, "repo")
	require.NoError(t, os.Mkdir(repo, 0o755))
	gitRun(t, repo, "init", "-q")
	_, err := GitHead(repo)
	require.ErrorContains(t, err, "no commit yet", "a repository without commits")

	require.NoError(t, os.WriteFile(filepath.Join(repo, "a.txt"), []byte("one\n"), 0o644))
	gitRun(t, repo, "add", "a.txt")
	gitRun(t, repo, "commit", "-q", "-m", "one")
	f := &Fact{Name: "head", Kind: FactGitHead, ResolvedPath: repo}
	first, err := f.Read()
	require.NoError(t, err)
	require.Equal(t, gitRun(t, repo, "rev-parse", "HEAD"), first)

	require.NoError(t, os.WriteFile(filepath.Join(repo, "a.txt"), []byte("two\n"), 0o644))
	gitRun(t, repo, "commit", "-q", "-am", "two")
	second, err := f.Read()
	require.NoError(t, err)
	require.NotEqual(t, first, second)
	require.Equal(t, gitRun(t, repo, "rev-parse", "HEAD"), second)

	// Refs packed, then a detached HEAD, then a linked work tree.
	gitRun(t, repo, "pack-refs", "--all")
	require.NoFileExists(t, filepath.Join(repo, ".git", "refs", "heads", "main"))
	got, err := f.Read()
	require.NoError(t, err)
	require.Equal(t, second, got)
	gitRun(t, repo, "checkout", "-q", "--detach", first)
	got, err = f.Read()
	require.NoError(t, err)
	require.Equal(t, first, got)
	wt := filepath.Join(dir, "wt")
	gitRun(t, repo, "worktree", "add", "-q", "-b", "side", wt, second)
	got, err = GitHead(wt)
	require.NoError(t, err)
	require.Equal(t, second, got)

	// No repository: a clear error naming the fact and the directory.
	none := &Fact{Name: "head", Kind: FactGitHead, ResolvedPath: filepath.Join(dir, "missing")}
	_, err = none.Read()
	require.ErrorContains(t, err, `fact "head"`)
	require.ErrorContains(t, err, filepath.Join(dir, "missing"))
	_, err = GitHead(dir)
	require.ErrorContains(t, err, "no git repository in "+dir)
}

func TestFileSHA256Fact(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "deploy.yaml")
	require.NoError(t, os.WriteFile(path, []byte("replicas: 2\n"), 0o644))
	f := &Fact{Name: "config", Kind: FactFileSHA256, ResolvedPath: path}
	got, err := f.Read()
	require.NoError(t, err)
	sum := sha256.Sum256([]byte("replicas: 2\n"))
	require.Equal(t, hex.EncodeToString(sum[:]), got)
	require.NoError(t, os.Remove(path))
	_, err = f.Read()
	require.ErrorContains(t, err, `fact "config"`)
}

func TestParseEnvironment(t *testing.T) {
	t.Parallel()
	src := `
task "migrate" {
  environment {
    fact "head"   { git_head = "repo" }
    fact "config" { file_sha256 = "/etc/deploy.yaml" }
    on_drift = "restart:build"
  }
  step "build" { plugin = "p.wasm" }
  step "deploy" { plugin = "p.wasm" }
}`
	task, diags := Parse("/tasks/task.hcl", []byte(src), Options{})
	require.False(t, diags.HasErrors(), diags.Error())
	env := task.Environment
	require.NotNil(t, env)
	require.Equal(t, OnDriftRestart, env.OnDrift)
	require.Equal(t, "build", env.RestartFrom)
	require.Len(t, env.Facts, 2)
	require.Equal(t, FactGitHead, env.Facts[0].Kind)
	require.Equal(t, "/tasks/repo", env.Facts[0].ResolvedPath, "relative to the task file's folder")
	require.Equal(t, "/etc/deploy.yaml", env.Facts[1].ResolvedPath, "absolute kept")

	task, diags = Parse("/tasks/task.hcl", []byte(`task "t" {
  environment {
    fact "head" { git_head = "repo" }
  }
  step "a" { plugin = "p.wasm" }
}`), Options{})
	require.False(t, diags.HasErrors(), diags.Error())
	require.Equal(t, OnDriftPause, task.Environment.OnDrift, "the default")
}

func TestEnvironmentDiagnostics(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, body, want, at string
	}{
		{"misspelt source", `fact "head" { git_hed = "repo" }`, `Did you mean "git_head"?`, "task.hcl:3:19"},
		{"misspelt on_drift", `fact "head" { git_head = "repo" }
    on_drif = "pause"`, `Did you mean "on_drift"?`, "task.hcl:4:5"},
		{"unknown restart step", `fact "head" { git_head = "repo" }
    on_drift = "restart:deplyo"`, `no such step. Did you mean "deploy"?`, "task.hcl:4:16"},
		{"bad on_drift", `fact "head" { git_head = "repo" }
    on_drift = "pasue"`, `Did you mean "pause"?`, "task.hcl:4:16"},
		{"two sources", `fact "head" {
      git_head    = "repo"
      file_sha256 = "f"
    }`, "Fact has more than one source", "task.hcl:5:21"},
		{"no source", `fact "head" {}`, "Fact has no source", "task.hcl:3:5"},
		{"duplicate", `fact "head" { git_head = "a" }
    fact "head" { git_head = "b" }`, "Duplicate fact", "task.hcl:4:10"},
		{"empty path", `fact "head" { git_head = "" }`, "Invalid fact path", "task.hcl:3:30"},
		{"no facts", `on_drift = "pause"`, "Environment has no facts", "task.hcl:2:3"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := "task \"t\" {\n  environment {\n    " + tc.body + "\n  }\n  step \"deploy\" { plugin = \"p.wasm\" }\n}\n"
			_, diags := Parse("task.hcl", []byte(src), Options{})
			require.True(t, diags.HasErrors())
			var b strings.Builder
			require.NoError(t, WriteDiagnostics(&b, map[string][]byte{"task.hcl": []byte(src)}, diags, 0, false))
			require.Contains(t, b.String(), tc.want)
			require.Contains(t, b.String(), tc.at+":")
		})
	}
}
