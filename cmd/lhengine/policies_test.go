package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lhengine/lhengine/api"
	"github.com/lhengine/lhengine/engine"
	"github.com/lhengine/lhengine/internal/testwasm"
)

// policyDir is a folder with a task file beside an (empty) policies/
// directory, and a home path that must never be created.
type policyDir struct {
	dir, task, home string
}

func setupPolicies(t *testing.T) *policyDir {
	t.Helper()
	dir := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "policies"), 0o755))
	task := filepath.Join(dir, "task.hcl")
	require.NoError(t, os.WriteFile(task, []byte(chainTask), 0o644))
	return &policyDir{dir: dir, task: task, home: filepath.Join(dir, "home")}
}

func (p *policyDir) lh(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(context.Background(), append([]string{"--home", p.home}, args...), &out, &errb)
	return code, out.String(), errb.String()
}

func (p *policyDir) write(t *testing.T, rel, text string) string {
	t.Helper()
	path := filepath.Join(p.dir, rel)
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
	require.NoError(t, os.WriteFile(path, []byte(text), 0o644))
	return path
}

func (p *policyDir) requireNoHome(t *testing.T) {
	t.Helper()
	_, err := os.Stat(p.home)
	require.ErrorIs(t, err, os.ErrNotExist, "a policies command created the home")
}

func TestPoliciesLsListsTheLibrary(t *testing.T) {
	t.Parallel()
	p := setupPolicies(t)
	lib := filepath.Join(testwasm.ModuleRoot(t), "policies")

	out := lhOK(t, p, "policies", "ls", "--task", p.task, "--policies", lib)
	for _, want := range []string{"critic-after-draft", "periodic-summary", "single-tool-at-a-time", "context-reset-every-n", "plan-before-execute", "critic-after-draft.hcl:4", "critic-after-draft.hcl:25"} {
		require.Contains(t, out, want)
	}

	out = lhOK(t, p, "-o", "json", "policies", "ls", "--task", p.task, "--policies", lib)
	var list []engine.PolicyInfo
	require.NoError(t, json.Unmarshal([]byte(out), &list))
	names := map[string][]int{}
	for _, x := range list {
		names[x.Name] = append(names[x.Name], x.Version)
		sum := sha256.Sum256([]byte(x.Text))
		require.Equal(t, hex.EncodeToString(sum[:]), x.SHA256, x.Ref())
		require.NotEmpty(t, x.Assumption)
		require.NotEmpty(t, x.Evidence.Text)
		require.Empty(t, x.ShadowedBy)
	}
	require.Len(t, names, 6)
	require.Equal(t, []int{1, 2}, names["critic-after-draft"])
	require.Equal(t, []int{1, 2}, names["plan-before-execute"])
	require.Equal(t, []int{1}, names["compact-notes"])
	p.requireNoHome(t)
}

func TestPoliciesLsShowsShadowing(t *testing.T) {
	t.Parallel()
	p := setupPolicies(t)
	near := p.write(t, "policies/mark.hcl", markPolicy("near"))
	far := p.write(t, "lib/mark.hcl", markPolicy("far"))

	out := lhOK(t, p, "-o", "json", "policies", "ls", "--task", p.task, "--policies", filepath.Join(p.dir, "lib"))
	var list []engine.PolicyInfo
	require.NoError(t, json.Unmarshal([]byte(out), &list))
	require.Len(t, list, 2)
	require.Equal(t, near, list[0].File)
	require.Empty(t, list[0].ShadowedBy)
	require.Equal(t, far, list[1].File)
	require.Equal(t, near+":2", list[1].ShadowedBy)

	out = lhOK(t, p, "policies", "ls", "--task", p.task, "--policies", filepath.Join(p.dir, "lib"))
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 3, out)
	require.Contains(t, lines[0], "SHADOWED BY")
	require.True(t, strings.HasSuffix(strings.TrimSpace(lines[1]), "a test fixture"), out)
	require.True(t, strings.HasSuffix(lines[2], near+":2"), out)

	// show picks the copy a run would: the earlier directory's.
	out = lhOK(t, p, "policies", "show", "mark@1", "--task", p.task, "--policies", filepath.Join(p.dir, "lib"))
	require.Contains(t, out, `mark = "near"`)
	require.NotContains(t, out, `mark = "far"`)
	p.requireNoHome(t)
}

// TestPoliciesShowMatchesManifest submits a task with a policy and checks
// that show prints the text the manifest pins, with the same sha256; then
// edits the file and diffs it against the task's pinned version.
func TestPoliciesShowMatchesManifest(t *testing.T) {
	t.Parallel()
	b := setupCLI(t, policyTask)
	policyFile := filepath.Join(b.dir, "policies", "mark.hcl")
	require.NoError(t, os.MkdirAll(filepath.Dir(policyFile), 0o755))
	require.NoError(t, os.WriteFile(policyFile, []byte(markPolicy("old")), 0o644))
	taskFile := filepath.Join(b.dir, "task.hcl")

	out := lhOK(t, b, "policies", "show", "mark", "--task", taskFile)
	shown := out
	out = lhOK(t, b, "-o", "json", "policies", "show", "mark", "--task", taskFile)
	var info engine.PolicyInfo
	require.NoError(t, json.Unmarshal([]byte(out), &info))
	require.Contains(t, shown, info.Text+"\n")
	require.Contains(t, shown, info.SHA256)
	require.Contains(t, shown, "mark.mark@STEP")
	require.Contains(t, shown, `after "b"`)
	require.Contains(t, shown, "a test fixture")
	_, err := os.Stat(b.home)
	require.ErrorIs(t, err, os.ErrNotExist)

	id := submit(t, b, taskFile)
	out = lhOK(t, b, "-o", "json", "manifest", id)
	var m api.Manifest
	require.NoError(t, json.Unmarshal([]byte(out), &m))
	require.Len(t, m.Policies, 1)
	require.Equal(t, info.SHA256, m.Policies[0].SHA256)
	require.Equal(t, info.Text, m.Policies[0].Text)
	sum := sha256.Sum256([]byte(info.Text))
	require.Equal(t, m.Policies[0].SHA256, hex.EncodeToString(sum[:]))

	out = lhOK(t, b, "policies", "diff", "mark@1", id, "--task", taskFile)
	require.Contains(t, out, "have the same text")

	require.NoError(t, os.WriteFile(policyFile, []byte(markPolicy("new")), 0o644))
	out = lhOK(t, b, "policies", "diff", "mark@1", id, "--task", taskFile)
	require.Contains(t, out, "+++ mark@1 task "+id)
	require.Contains(t, out, `-    input  = { mode = "echo", mark = "new", from = step.anchor.output.n }`)
	require.Contains(t, out, `+    input  = { mode = "echo", mark = "old", from = step.anchor.output.n }`)
}

func TestPoliciesDiffVersions(t *testing.T) {
	t.Parallel()
	p := setupPolicies(t)
	lib := filepath.Join(testwasm.ModuleRoot(t), "policies")
	out := lhOK(t, p, "policies", "diff", "critic-after-draft@1", "critic-after-draft@2", "--policies", lib)
	lines := strings.Split(out, "\n")
	require.True(t, strings.HasPrefix(lines[0], "--- critic-after-draft@1 "), out)
	require.True(t, strings.HasPrefix(lines[1], "+++ critic-after-draft@2 "), out)
	for _, want := range []string{
		"-  version    = 1\n", "+  version    = 2\n",
		"-      max          = 2\n", "+      max          = 3\n",
		"+  steps  = \"critic-after-draft.*\"\n",
		" policy \"critic-after-draft\" {\n",
		"@@ -4,",
	} {
		require.Contains(t, out, want)
	}
	require.NotContains(t, out, "-  insert \"critic\" {")
	p.requireNoHome(t)
}

func TestPoliciesBrokenFile(t *testing.T) {
	t.Parallel()
	p := setupPolicies(t)
	p.write(t, "policies/good.hcl", markPolicy("ok"))
	p.write(t, "policies/bad.hcl", `policy "bad" {
  version    = 0
  assumption = "x"
  evidence {
    text = "none"
  }
}
`)
	for _, args := range [][]string{
		{"policies", "ls"},
		{"policies", "show", "mark"},
		{"policies", "diff", "mark@1", "mark@1"},
	} {
		code, out, errOut := p.lh(t, append(args, "--task", p.task)...)
		require.Equal(t, 1, code, args)
		require.Empty(t, out, args)
		require.Contains(t, errOut, "Invalid policy version", args)
		require.Contains(t, errOut, "bad.hcl:2:16", args)
	}
	code, _, errOut := p.lh(t, "policies", "ls", "--policies", filepath.Join(p.dir, "missing"))
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "Cannot read policy directory")
	code, _, errOut = p.lh(t, "policies", "show", "nosuch", "--task", filepath.Join(t.TempDir(), "t.hcl"))
	require.Equal(t, 1, code)
	require.Contains(t, errOut, `no policy "nosuch"`)
	p.requireNoHome(t)
}

// TestValidateAppliesTheChosenPolicies: validate checks what a run with the
// same --policy flags would run, steps the policies insert included, and
// reports their mistakes in the policy file.
func TestValidateAppliesTheChosenPolicies(t *testing.T) {
	t.Parallel()
	b := setupCLI(t, chainTask)
	require.NoError(t, os.MkdirAll(filepath.Join(b.dir, "policies"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(b.dir, "policies", "check.hcl"), []byte(`
policy "check" {
  version    = 1
  assumption = "a"
  evidence {
    text = "e"
  }
  insert "look" {
    after  = "greet"
    plugin = "../step.wasm"
    input  = { seen = step.nosuch.output }
  }
}
`), 0o644))
	task := filepath.Join(b.dir, "task.hcl")
	code, out, errOut := b.lh(t, "validate", task)
	require.Equal(t, exitOK, code, errOut)
	require.Contains(t, out, "is valid")

	code, _, errOut = b.lh(t, "validate", task, "--policy", "check@1")
	require.Equal(t, exitFailed, code)
	require.Contains(t, errOut, "check.hcl:11:")
	require.Contains(t, errOut, "nosuch")

	code, _, errOut = b.lh(t, "validate", task, "--policy", "check@1", "--without", "check")
	require.Equal(t, exitOK, code, errOut)

	code, _, errOut = b.lh(t, "validate", task, "--policy", "absent")
	require.Equal(t, exitFailed, code)
	require.Contains(t, errOut, "absent")
	_, err := os.Stat(b.home)
	require.ErrorIs(t, err, os.ErrNotExist, "validate creates no home")
}
