package plan

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/stretchr/testify/require"
)

func writeTestFile(t *testing.T, path, text string) {
	t.Helper()
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
	require.NoError(t, os.WriteFile(path, []byte(text), 0o644))
}

func testPolicy(name string, version int, key string) string {
	return `
policy "` + name + `" {
  version    = ` + string(rune('0'+version)) + `
  assumption = "a"
  evidence {
    text = "e"
  }
  params = { ` + name + "_" + key + ` = true }
}
`
}

// TestPolicySearchPath resolves policies beside the task, in --policies
// directories and in the home, in that order; NAME@V picks a version,
// NAME the highest found; --policy re-versions and adds, --without drops.
func TestPolicySearchPath(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeTestFile(t, filepath.Join(dir, "task", "task.hcl"), `
task "t" {
  policies = ["a", "b@1"]
  step "s" {
    plugin = "s.wasm"
  }
}`)
	writeTestFile(t, filepath.Join(dir, "task", "s.wasm"), "not checked here")
	writeTestFile(t, filepath.Join(dir, "task", "policies", "a.hcl"), testPolicy("a", 1, "beside")+testPolicy("b", 1, "beside"))
	writeTestFile(t, filepath.Join(dir, "extra", "a.hcl"), testPolicy("a", 2, "extra")+testPolicy("b", 1, "shadowed"))
	writeTestFile(t, filepath.Join(dir, "home", "policies", "c.hcl"), testPolicy("c", 3, "home")+testPolicy("a", 1, "shadowed"))
	noCheck := func(context.Context, string) error { return nil }
	path := filepath.Join(dir, "task", "task.hcl")

	resolve := func(o PolicyOptions) ([]string, hcl.Diagnostics) {
		_, ps, _, diags := ValidateWith(context.Background(), path, o, noCheck)
		var refs []string
		for _, p := range ps {
			refs = append(refs, p.Ref()+" "+filepath.Base(filepath.Dir(p.Filename)))
		}
		return refs, diags
	}
	refs, diags := resolve(PolicyOptions{})
	require.Empty(t, diags)
	require.Equal(t, []string{"a@1 policies", "b@1 policies"}, refs, "beside the task only")

	refs, diags = resolve(PolicyOptions{Dirs: []string{filepath.Join(dir, "extra")}, Home: filepath.Join(dir, "home")})
	require.Empty(t, diags)
	require.Equal(t, []string{"a@2 extra", "b@1 policies"}, refs, "the highest version; the first found of equal ones")

	refs, diags = resolve(PolicyOptions{
		Dirs: []string{filepath.Join(dir, "extra")}, Home: filepath.Join(dir, "home"),
		Add: []string{"a@1", "c"}, Without: []string{"b", "never-selected"},
	})
	require.Empty(t, diags)
	require.Equal(t, []string{"a@1 policies", "c@3 policies"}, refs)

	_, diags = resolve(PolicyOptions{Add: []string{"a@7", "zzz", "bad name"}})
	var got []string
	for _, d := range diags {
		got = append(got, d.Summary)
	}
	require.Equal(t, []string{"Invalid policy reference"}, got, "a bad --policy stops before any file is read")

	_, diags = resolve(PolicyOptions{Add: []string{"a@7", "zzz"}})
	got = nil
	for _, d := range diags {
		got = append(got, d.Summary)
	}
	require.Equal(t, []string{"Unknown policy version", "Unknown policy"}, got)
	require.Equal(t, 3, diags[0].Subject.Start.Line, "re-versioned, the task's element is the subject")
	require.Nil(t, diags[1].Subject, "added on the command line: no place in a file")

	_, diags = resolve(PolicyOptions{Dirs: []string{filepath.Join(dir, "missing")}})
	require.Equal(t, "Cannot read policy directory", diags[0].Summary)

	// A task that selects no policy reads no policy file, broken or not.
	writeTestFile(t, filepath.Join(dir, "task", "policies", "broken.hcl"), "policy {")
	refs, diags = resolve(PolicyOptions{Without: []string{"a", "b"}})
	require.Empty(t, diags)
	require.Empty(t, refs)
	_, diags = resolve(PolicyOptions{})
	require.True(t, diags.HasErrors())
	require.Contains(t, diags[0].Subject.Filename, "broken.hcl")
}

// TestFromManifestUsesPinnedPolicies reads a submission back after its
// policy file is gone: the pinned text is applied.
func TestFromManifestUsesPinnedPolicies(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "task.hcl")
	writeTestFile(t, path, `
task "t" {
  policies = ["a"]
  step "s" {
    plugin = "s.wasm"
  }
}`)
	writeTestFile(t, filepath.Join(dir, "s.wasm"), "x")
	writeTestFile(t, filepath.Join(dir, "policies", "a.hcl"), testPolicy("a", 1, "pinned"))
	sub, err := PrepareWith(context.Background(), path, nil, PolicyOptions{}, func(context.Context, string) error { return nil })
	require.NoError(t, err)
	require.Len(t, sub.Manifest.Policies, 1)
	require.NoError(t, os.RemoveAll(filepath.Join(dir, "policies")))

	sp, err := FromManifest(&sub.Manifest)
	require.NoError(t, err)
	require.JSONEq(t, `{"a_pinned":true}`, string(sp.Task.Steps[0].Params))
	require.Equal(t, []string{"a@1"}, sp.Task.Steps[0].Policies)

	damaged := sub.Manifest
	damaged.Policies = append(damaged.Policies[:0:0], damaged.Policies...)
	damaged.Policies[0].Text += " "
	_, err = FromManifest(&damaged)
	require.ErrorContains(t, err, "Pinned policy damaged")
}
