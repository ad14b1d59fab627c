package taskfile

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestProgressBlock(t *testing.T) {
	t.Parallel()
	src := `task "site-audit" {
  progress {
    unit   = "pages"
    step   = "check"
    labels = { missing_title = "pages without a title" }
  }
  step "list" {
    plugin = "a.wasm"
  }
  step "check" {
    plugin   = "a.wasm"
    for_each = step.list.output
  }
}
`
	task, diags := Parse("t.hcl", []byte(src), Options{})
	require.False(t, diags.HasErrors(), "%v", diags)
	require.NotNil(t, task.Progress)
	require.Equal(t, "pages", task.Progress.Unit)
	require.Equal(t, "check", task.Progress.Step)
	require.Equal(t, map[string]string{"missing_title": "pages without a title"}, task.Progress.Labels)
	require.Equal(t, 2, task.Progress.DeclRange.Start.Line)

	// A step without for_each may be the progress step; step and labels
	// are optional.
	src = "task \"t\" {\n  progress {\n    unit = \"reports\"\n    step = \"a\"\n  }\n  step \"a\" {\n    plugin = \"a.wasm\"\n  }\n}\n"
	task, diags = Parse("t.hcl", []byte(src), Options{})
	require.False(t, diags.HasErrors(), "%v", diags)
	require.Equal(t, "a", task.Progress.Step)
	require.Nil(t, task.Progress.Labels)

	task, diags = Parse("t.hcl", []byte("task \"t\" {\n  step \"a\" {\n    plugin = \"a.wasm\"\n  }\n}\n"), Options{})
	require.False(t, diags.HasErrors(), "%v", diags)
	require.Nil(t, task.Progress, "no progress block")
}
