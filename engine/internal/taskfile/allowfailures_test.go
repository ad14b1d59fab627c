package taskfile

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func allowTask(attr string) string {
	return fmt.Sprintf(`task "t" {
  step "each" {
    plugin   = "p.wasm"
    for_each = range(10)
    %s
  }
}
`, attr)
}

func TestParseAllowFailures(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		attr    string
		count   int
		percent float64
	}{
		{"", 0, 0},
		{"allow_failures = 10", 10, 0},
		{"allow_failures = 0", 0, 0},
		{`allow_failures = "2%"`, 0, 2},
		{`allow_failures = "0.5%"`, 0, 0.5},
		{`allow_failures = "100%"`, 0, 100},
	} {
		task, diags := Parse("t.hcl", []byte(allowTask(tc.attr)), Options{})
		require.False(t, diags.HasErrors(), "%s: %s", tc.attr, diags)
		s := task.Steps[0]
		require.Equal(t, tc.count, s.AllowFailures, tc.attr)
		require.Equal(t, tc.percent, s.AllowFailuresPercent, tc.attr)
	}
	task, diags := Parse("t.hcl", []byte(allowTask(`allow_failures = "2%"`)), Options{})
	require.False(t, diags.HasErrors())
	require.Equal(t, 2, task.Steps[0].Allowed(100))
	require.Equal(t, 1, task.Steps[0].Allowed(99), "rounded down")
	require.Equal(t, 0, task.Steps[0].Allowed(49))
}

func TestAllowFailuresDiagnostics(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ src, want string }{
		{allowTask(`allow_failures = -1`), `t.hcl:5:22: Invalid allow_failures; allow_failures must be a number of items (0 or more) or a percentage of the step's items such as "2%"; got -1.`},
		{allowTask(`allow_failures = 2.5`), `t.hcl:5:22: Invalid allow_failures; allow_failures must be a number of items (0 or more) or a percentage of the step's items such as "2%"; got 2.5.`},
		{allowTask(`allow_failures = "2"`), `t.hcl:5:22: Invalid allow_failures; allow_failures must be a number of items (0 or more) or a percentage of the step's items such as "2%"; got "2".`},
		{allowTask(`allow_failures = "150%"`), `t.hcl:5:22: Invalid allow_failures; a percentage of the step's items must be between 0% and 100%; got "150%".`},
		{allowTask(`allow_failures = ["2%"]`), `t.hcl:5:22: Invalid allow_failures; allow_failures must be a number of items (0 or more) or a percentage of the step's items such as "2%"; got a tuple.`},
		{`task "t" {
  step "one" {
    plugin         = "p.wasm"
    allow_failures = 3
  }
}
`, `t.hcl:4:5: allow_failures without for_each; allow_failures tolerates failed fan-out items, so it is only valid in a step with for_each.`},
		{allowTask(`allow_failure = 3`), `t.hcl:5:5: Unsupported argument; An argument named "allow_failure" is not expected here. Did you mean "allow_failures"?`},
	} {
		_, diags := Parse("t.hcl", []byte(tc.src), Options{})
		require.True(t, diags.HasErrors(), tc.src)
		var got []string
		for _, d := range diags {
			got = append(got, fmt.Sprintf("%s:%d:%d: %s; %s", d.Subject.Filename, d.Subject.Start.Line, d.Subject.Start.Column, d.Summary, d.Detail))
		}
		require.Contains(t, strings.Join(got, "\n"), tc.want, tc.src)
	}
}
