package plan

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lhengine/lhengine/engine/internal/policylang"
	"github.com/lhengine/lhengine/ledger"
)

// TestRememberedSpecIsTheManifestsSpec: the spec a submitting process
// keeps is the one a process with only the manifest reads: the same
// steps, policies, parameters and variables (read back from the pinned
// JSON).
func TestRememberedSpecIsTheManifestsSpec(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "task.hcl")
	writeTestFile(t, path, `
task "t" {
  policies = ["a"]
  variable "n" {
    type    = number
    default = 1
  }
  variable "who" {
    type = string
  }
  step "s" {
    plugin = "s.wasm"
    input  = { n = var.n, who = var.who }
  }
  step "u" {
    plugin   = "s.wasm"
    for_each = range(var.n)
    input    = step.s.output
  }
}`)
	writeTestFile(t, filepath.Join(dir, "s.wasm"), "x")
	writeTestFile(t, filepath.Join(dir, "policies", "a.hcl"), testPolicy("a", 1, "pinned"))
	sub, err := PrepareWith(context.Background(), path, map[string]string{"n": "3.50", "who": "ada"}, PolicyOptions{},
		func(context.Context, string) error { return nil })
	require.NoError(t, err)

	c := NewCache()
	require.NoError(t, c.Remember("T1", sub))
	var remembered *Spec
	remembered, err = c.Spec((ledger.Reader)(nil), "T1") // cached: the reader is not used
	require.NoError(t, err)
	fromManifest, err := FromManifest(&sub.Manifest)
	require.NoError(t, err)

	require.Equal(t, len(fromManifest.Task.Steps), len(remembered.Task.Steps))
	for i, s := range fromManifest.Task.Steps {
		r := remembered.Task.Steps[i]
		require.Equal(t, s.Name, r.Name)
		require.Equal(t, s.PluginPath, r.PluginPath)
		require.Equal(t, s.Policies, r.Policies)
		require.JSONEq(t, string(s.Params), string(r.Params))
		require.Equal(t, s.ForEach != nil, r.ForEach != nil)
	}
	require.Equal(t, len(fromManifest.Vars), len(remembered.Vars))
	for k, v := range fromManifest.Vars {
		require.True(t, v.RawEquals(remembered.Vars[k]), "variable %s: %#v vs %#v", k, v, remembered.Vars[k])
	}
}

// TestEveryBoundsAgree: the task language accepts every = N up to the
// bound the ledger accepts at submit, so a task that validates is never
// refused by the store for it.
func TestEveryBoundsAgree(t *testing.T) {
	t.Parallel()
	require.Equal(t, ledger.MaxEvery, policylang.MaxEvery)
}
