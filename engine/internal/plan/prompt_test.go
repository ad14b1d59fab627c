package plan

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lhengine/lhengine/ledger"
)

// TestPromptsArePinnedAtSubmit: the manifest pins each prompt's text and
// sha256; a spec read from the manifest after the prompt file was edited
// or deleted evaluates the pinned text, as does the spec the submitting
// process keeps.
func TestPromptsArePinnedAtSubmit(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "task.hcl")
	writeTestFile(t, path, `
task "t" {
  prompt "system" {
    file    = "prompts/system.md"
    version = "3"
  }
  prompt "style" { text = "Be brief." }
  step "s" {
    plugin = "s.wasm"
    input  = { system = prompt.system, style = prompt.style }
  }
}`)
	writeTestFile(t, filepath.Join(dir, "s.wasm"), "x")
	promptFile := filepath.Join(dir, "prompts", "system.md")
	writeTestFile(t, promptFile, "You are careful.\n")
	sub, err := PrepareWith(context.Background(), path, nil, PolicyOptions{}, func(context.Context, string) error { return nil })
	require.NoError(t, err)

	sum := func(s string) string {
		b := sha256.Sum256([]byte(s))
		return hex.EncodeToString(b[:])
	}
	require.Equal(t, []ledger.PromptPin{
		{Name: "system", Version: "3", File: promptFile, SHA256: sum("You are careful.\n"), Text: "You are careful.\n"},
		{Name: "style", SHA256: sum("Be brief."), Text: "Be brief."},
	}, sub.Manifest.Prompts)

	require.NoError(t, os.Remove(promptFile))
	fromManifest, err := FromManifest(&sub.Manifest)
	require.NoError(t, err)
	c := NewCache()
	require.NoError(t, c.Remember("T1", sub))
	remembered, err := c.Spec((ledger.Reader)(nil), "T1") // cached: the reader is not used
	require.NoError(t, err)
	for _, sp := range []*Spec{fromManifest, remembered} {
		require.Equal(t, "You are careful.\n", sp.Prompts["system"].AsString())
		require.Equal(t, "Be brief.", sp.Prompts["style"].AsString())
	}

	m := sub.Manifest
	m.Prompts = m.Prompts[1:]
	_, err = FromManifest(&m)
	require.ErrorContains(t, err, `manifest has no text for prompt "system"`)
}
