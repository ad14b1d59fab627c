package taskfile

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestTaskPolicyRefs decodes a task's policies attribute.
func TestTaskPolicyRefs(t *testing.T) {
	t.Parallel()
	task := parseTest(t, `task "t" {
  policies = ["critic-after-draft@2", "periodic-summary"]
  step "a" {
    plugin = "a.wasm"
  }
}`)
	require.Len(t, task.Policies, 2)
	require.Equal(t, "critic-after-draft@2", task.Policies[0].String())
	require.Equal(t, 0, task.Policies[1].Version)
	require.Equal(t, 2, task.Policies[0].Range.Start.Line)

	_, diags := Parse("task.hcl", []byte(`task "t" {
  policies = ["ok", "bad@x", "ok@2", "no name"]
  step "a" {
    plugin = "a.wasm"
  }
}`), Options{})
	var got []string
	for _, d := range diags {
		got = append(got, d.Summary)
	}
	require.Equal(t, []string{"Invalid policy reference", "Duplicate policy", "Invalid policy reference"}, got)
	require.Equal(t, 21, diags[0].Subject.Start.Column)
}
