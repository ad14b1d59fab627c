package taskfile

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/zclconf/go-cty/cty"
)

const promptTask = `
task "agent" {
  prompt "system" {
    file    = "prompts/system.md"
    version = "2026-11"
  }
  prompt "style" {
    text = "Answer in one sentence."
  }
  step "ask" {
    plugin = "p.wasm"
    input  = { system = "${prompt.system}\n${prompt.style}", n = length(prompt.style) }
  }
}`

// promptDir writes promptTask, its plugin and its system prompt file.
func promptDir(t *testing.T, system []byte) string {
	t.Helper()
	dir := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "prompts"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "prompts", "system.md"), system, 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "p.wasm"), []byte("\x00asm"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "task.hcl"), []byte(promptTask), 0o644))
	return filepath.Join(dir, "task.hcl")
}

func TestParsePrompts(t *testing.T) {
	t.Parallel()
	path := promptDir(t, []byte("You are careful.\n"))
	task, diags := ParseFile(path, Options{CheckPlugins: true})
	require.False(t, diags.HasErrors(), diags.Error())
	require.Len(t, task.Prompts, 2)
	sys, style := task.Prompts[0], task.Prompts[1]
	require.Equal(t, "system", sys.Name)
	require.Equal(t, "2026-11", sys.Version)
	require.Equal(t, filepath.Join(filepath.Dir(path), "prompts", "system.md"), sys.FilePath)
	require.Equal(t, "You are careful.\n", sys.Text, "read with the files checked")
	require.Equal(t, "Answer in one sentence.", style.Text)
	require.Empty(t, style.File)

	// Without the file checks (a task read back from its manifest) the
	// file is not read: its text comes from the pin.
	src, err := os.ReadFile(path)
	require.NoError(t, err)
	again, diags := Parse("pinned.hcl", src, Options{BaseDir: "/nowhere"})
	require.False(t, diags.HasErrors(), diags.Error())
	require.Empty(t, again.Prompts[0].Text)

	in, diags := again.Steps[0].EvalInput(Scope{TaskID: "t", Prompts: map[string]cty.Value{
		"system": cty.StringVal("pinned system"), "style": cty.StringVal("pinned style"),
	}})
	require.False(t, diags.HasErrors(), diags.Error())
	require.Equal(t, "pinned system\npinned style", in.GetAttr("system").AsString())

	_, diags = again.Steps[0].EvalInput(Scope{TaskID: "t"})
	require.True(t, diags.HasErrors())
	require.Equal(t, "No text for prompt", diags[0].Summary)
	require.Equal(t, 12, diags[0].Subject.Start.Line)
}

func TestPromptFileRefusals(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, summary string
		text          []byte
	}{
		{"too large", "Prompt too large", []byte(strings.Repeat("x", MaxPromptBytes+1))},
		{"binary", "Prompt file is not text", []byte{0xff, 0xfe, 0x00}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, diags := ParseFile(promptDir(t, tc.text), Options{CheckPlugins: true})
			require.True(t, diags.HasErrors())
			require.Equal(t, tc.summary, diags[0].Summary)
			require.Equal(t, 4, diags[0].Subject.Start.Line, "on the file attribute")
		})
	}
}

// TestPromptsTotalIsBounded: five prompt files of 1 MiB each are more
// than a task's prompts may pin; the diagnostic is on the prompt that
// crosses the bound.
func TestPromptsTotalIsBounded(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	var src strings.Builder
	src.WriteString("task \"t\" {\n")
	for i := range 5 {
		name := fmt.Sprintf("p%d", i)
		require.NoError(t, os.WriteFile(filepath.Join(dir, name+".md"), []byte(strings.Repeat("x", MaxPromptBytes)), 0o644))
		fmt.Fprintf(&src, "  prompt %q { file = %q }\n", name, name+".md")
	}
	src.WriteString("  step \"s\" { plugin = \"p.wasm\" }\n}\n")
	require.NoError(t, os.WriteFile(filepath.Join(dir, "p.wasm"), []byte("\x00asm"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "task.hcl"), []byte(src.String()), 0o644))
	_, diags := ParseFile(filepath.Join(dir, "task.hcl"), Options{CheckPlugins: true})
	require.True(t, diags.HasErrors())
	require.Equal(t, "Prompts too large", diags[0].Summary)
	require.Equal(t, 6, diags[0].Subject.Start.Line, "the fifth prompt")
}
