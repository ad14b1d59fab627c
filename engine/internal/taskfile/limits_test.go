package taskfile

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestLimitsBlock(t *testing.T) {
	t.Parallel()
	src := `task "t" {
  limits {
    notes                     = 10
    note_bytes                = "4KiB"
    counter_names_per_attempt = 5
    counter_names             = 20
    log_passthrough           = 0
    kv_bytes                  = "1MiB"
    artifact_bytes            = 1048576
    output_bytes              = "2MB"
    workspace_bytes           = "3MiB"
  }
  step "a" {
    plugin = "a.wasm"
  }
}
`
	task, diags := Parse("t.hcl", []byte(src), Options{})
	require.False(t, diags.HasErrors(), "%v", diags)
	want := Limits{Notes: 10, NoteBytes: 4 << 10, CounterNamesPerAttempt: 5, CounterNames: 20,
		LogPassthrough: 0, KVBytes: 1 << 20, ArtifactBytes: 1 << 20, OutputBytes: 2_000_000, WorkspaceBytes: 3 << 20}
	got := task.Limits
	require.Equal(t, 2, got.DeclRange.Start.Line)
	got.DeclRange = want.DeclRange
	require.Equal(t, want, got)
	require.Same(t, &task.Limits, task.Steps[0].Limits, "every step runs under its task's limits")
	require.Equal(t, want, task.Steps[0].LimitsOf().withoutRange())

	task, diags = Parse("t.hcl", []byte("task \"t\" {\n  step \"a\" {\n    plugin = \"a.wasm\"\n  }\n}\n"), Options{})
	require.False(t, diags.HasErrors(), "%v", diags)
	require.Equal(t, DefaultLimits(), task.Limits, "no limits block: the defaults")
	require.Equal(t, DefaultLimits(), (&Step{}).LimitsOf(), "a step not from a task file: the defaults")
}

func (l Limits) withoutRange() Limits {
	l.DeclRange = Limits{}.DeclRange
	return l
}
