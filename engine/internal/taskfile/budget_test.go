package taskfile

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestBudgetBlock(t *testing.T) {
	t.Parallel()
	src := `task "t" {
  budget {
    wall_time            = "8h"
    cost                 = 20.5
    units                = 50000
    repairs              = 10
    consecutive_failures = 25
  }
  step "a" {
    plugin = "a.wasm"
  }
}
`
	task, diags := Parse("t.hcl", []byte(src), Options{})
	require.False(t, diags.HasErrors(), "%v", diags)
	require.NotNil(t, task.Budget)
	got := *task.Budget
	require.Equal(t, 2, got.DeclRange.Start.Line)
	got.DeclRange = Budget{}.DeclRange
	require.Equal(t, Budget{WallTime: 8 * time.Hour, Cost: 20.5, Units: 50000, Repairs: 10, ConsecutiveFailures: 25}, got)

	task, diags = Parse("t.hcl", []byte("task \"t\" {\n  step \"a\" {\n    plugin = \"a.wasm\"\n  }\n}\n"), Options{})
	require.False(t, diags.HasErrors(), "%v", diags)
	require.Nil(t, task.Budget, "no budget block: no limit")
}

// TestBudgetBlockDiagnostics: every mistake is reported at its place, with
// a suggestion for a misspelt name.
func TestBudgetBlockDiagnostics(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, body, want string
		line, col        int
	}{
		{"misspelt", `unit = 5`, `Did you mean "units"?`, 3, 5},
		{"bad duration", `wall_time = "8 hours"`, `"8 hours" is not one`, 3, 17},
		{"short duration", `wall_time = "10ms"`, "at least 1s", 3, 17},
		{"fraction", `units = 2.5`, "whole number from 1", 3, 13},
		{"zero", `repairs = 0`, "whole number from 1", 3, 15},
		{"negative cost", `cost = -1`, "above 0", 3, 12},
		{"string count", `consecutive_failures = "x"`, "a number is required", 3, 28},
		{"variable", `units = var.n`, "cannot refer to var", 3, 13},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			src := "task \"t\" {\n  budget {\n    " + c.body + "\n  }\n  step \"a\" {\n    plugin = \"a.wasm\"\n  }\n}\n"
			_, diags := Parse("t.hcl", []byte(src), Options{})
			require.True(t, diags.HasErrors())
			var msgs []string
			for _, d := range diags {
				msgs = append(msgs, d.Summary+": "+d.Detail)
			}
			require.Contains(t, strings.Join(msgs, "\n"), c.want)
			require.NotNil(t, diags[0].Subject)
			require.Equal(t, "t.hcl", diags[0].Subject.Filename)
			require.Equal(t, c.line, diags[0].Subject.Start.Line, "%v", diags)
			require.Equal(t, c.col, diags[0].Subject.Start.Column, "%v", diags)
		})
	}

	src := "task \"t\" {\n  budget {\n  }\n  budget {\n  }\n  step \"a\" {\n    plugin = \"a.wasm\"\n  }\n}\n"
	_, diags := Parse("t.hcl", []byte(src), Options{})
	require.True(t, diags.HasErrors())
	require.Equal(t, "Duplicate budget block", diags[0].Summary)
	require.Equal(t, 4, diags[0].Subject.Start.Line)
}
