package taskfile

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestGitHeadFact reads a git_head fact from a repository's files, written
// here as git writes them (githead.Read is held to git itself in its
// package): the commit HEAD's branch points to, a new one when the branch
// moves, and an error naming the fact and the directory where there is no
// repository.
func TestGitHeadFact(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	repo := filepath.Join(dir, "repo")
	require.NoError(t, os.MkdirAll(filepath.Join(repo, ".git", "refs", "heads"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(repo, ".git", "HEAD"), []byte("ref: refs/heads/main\n"), 0o644))
	setMain := func(id string) {
		require.NoError(t, os.WriteFile(filepath.Join(repo, ".git", "refs", "heads", "main"), []byte(id+"\n"), 0o644))
	}
	first, second := strings.Repeat("a1", 20), strings.Repeat("b2", 20)
	setMain(first)
	f := &Fact{Name: "head", Kind: FactGitHead, ResolvedPath: repo}
	got, err := f.Read()
	require.NoError(t, err)
	require.Equal(t, first, got)
	setMain(second)
	got, err = f.Read()
	require.NoError(t, err)
	require.Equal(t, second, got)

	none := &Fact{Name: "head", Kind: FactGitHead, ResolvedPath: filepath.Join(dir, "missing")}
	_, err = none.Read()
	require.ErrorContains(t, err, `fact "head"`)
	require.ErrorContains(t, err, filepath.Join(dir, "missing"))
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
