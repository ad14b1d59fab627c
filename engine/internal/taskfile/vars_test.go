package taskfile

import (
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/zclconf/go-cty/cty"
)

const varsTask = `
task "t" {
  variable "site" {
    type = string
  }
  variable "any" {}
  variable "n" {
    type    = number
    default = 3
  }
  variable "pages" {
    type    = list(string)
    default = []
  }
  variable "opts" {
    type    = object({ deep = bool, tags = map(string) })
    default = { deep = false, tags = {} }
  }
  step "a" {
    plugin = "p.wasm"
    input  = var.site
  }
}
`

func parseTest(t testing.TB, src string) *Task {
	t.Helper()
	task, diags := Parse("t.hcl", []byte(src), Options{})
	require.False(t, diags.HasErrors(), diags.Error())
	return task
}

func TestVars(t *testing.T) {
	t.Parallel()
	task := parseTest(t, varsTask)

	tests := []struct {
		name  string
		given map[string]string
		want  map[string]cty.Value // subset checked
		errs  []string             // summaries, in order
		lines []int                // subject lines; 0 for no subject
	}{
		{
			name:  "string and untyped values are raw text",
			given: map[string]string{"site": `"quoted" [1]`, "any": "42"},
			want: map[string]cty.Value{
				"site":  cty.StringVal(`"quoted" [1]`),
				"any":   cty.StringVal("42"),
				"n":     cty.NumberIntVal(3),
				"pages": cty.ListValEmpty(cty.String),
			},
		},
		{
			name: "typed values are parsed as HCL",
			given: map[string]string{
				"site":  "x",
				"any":   "",
				"n":     "12345678901234567890123",
				"pages": `["a", "b"]`,
				"opts":  `{ deep = true, tags = { k = "v" } }`,
			},
			want: map[string]cty.Value{
				"n":     cty.MustParseNumberVal("12345678901234567890123"),
				"pages": cty.ListVal([]cty.Value{cty.StringVal("a"), cty.StringVal("b")}),
				"opts": cty.ObjectVal(map[string]cty.Value{
					"deep": cty.True,
					"tags": cty.MapVal(map[string]cty.Value{"k": cty.StringVal("v")}),
				}),
			},
		},
		{
			name:  "number given as a string literal converts",
			given: map[string]string{"site": "x", "any": "", "n": `"7"`},
			want:  map[string]cty.Value{"n": cty.NumberIntVal(7)},
		},
		{
			name:  "missing required values",
			given: map[string]string{"n": "1"},
			errs:  []string{"No value for required variable", "No value for required variable"},
			lines: []int{3, 6},
		},
		{
			name:  "undeclared variable",
			given: map[string]string{"site": "x", "any": "", "sight": "y"},
			errs:  []string{"Value for undeclared variable"},
			lines: []int{0},
		},
		{
			name:  "bad conversions",
			given: map[string]string{"site": "x", "any": "", "n": "three", "pages": `"a"`, "opts": `{ deep = "maybe", tags = {} }`},
			errs:  []string{"Invalid value for variable", "Invalid value for variable", "Invalid value for variable"},
			lines: []int{7, 11, 15},
		},
		{
			name:  "not an expression",
			given: map[string]string{"site": "x", "any": "", "pages": `["a",`},
			errs:  []string{"Invalid value for variable"},
			lines: []int{11},
		},
		{
			name:  "function calls are not literals",
			given: map[string]string{"site": "x", "any": "", "n": `max(1, 2)`},
			errs:  []string{"Invalid value for variable"},
			lines: []int{7},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			vals, diags := task.Vars(tt.given)
			if len(tt.errs) == 0 {
				require.False(t, diags.HasErrors(), diags.Error())
				require.Len(t, vals, len(task.Variables))
				for name, want := range tt.want {
					require.True(t, want.RawEquals(vals[name]), "%s: got %#v", name, vals[name])
				}
				return
			}
			require.Nil(t, vals)
			var summaries []string
			var lines []int
			for _, d := range diags {
				summaries = append(summaries, d.Summary)
				if d.Subject == nil {
					lines = append(lines, 0)
				} else {
					require.Equal(t, "t.hcl", d.Subject.Filename)
					lines = append(lines, d.Subject.Start.Line)
				}
			}
			require.Equal(t, tt.errs, summaries)
			require.ElementsMatch(t, tt.lines, lines)
		})
	}
}

func TestVarsDetail(t *testing.T) {
	t.Parallel()
	task := parseTest(t, varsTask)
	_, diags := task.Vars(map[string]string{"site": "x", "any": "", "opts": `{ deep = "maybe", tags = {} }`})
	require.Len(t, diags, 1)
	require.Contains(t, diags[0].Detail, `deep: a bool is required`)

	_, diags = task.Vars(map[string]string{"site": "x", "any": "", "sit": ""})
	require.Len(t, diags, 1)
	require.Contains(t, diags[0].Detail, `Did you mean "site"?`)

	// A typed value is a literal: nothing in it is computed, so a short
	// value cannot compute a huge one (this one wrote out a hundred
	// million digits, for hours, before it was refused).
	for _, raw := range []string{`["${"1e99999999" * 1}"]`, `["a${"b"}"]`, `[1 + 1]`, `[upper("a")]`, `{ k = 1 * 2 }`, `[for x in [1] : x]`} {
		_, diags = task.Vars(map[string]string{"site": "x", "any": "", "pages": raw})
		require.Len(t, diags, 1, raw)
		require.Contains(t, diags[0].Detail, "is not a literal value of type list(string): a --var value is read as written, with nothing computed in it", raw)
	}
	vals, diags := task.Vars(map[string]string{"site": "x", "any": "", "n": "-3", "pages": `["a", "b c", -1, 2.5e3, true]`,
		"opts": `{ deep = false, tags = { "k-1" = "v", k2 = "w" } }`})
	require.False(t, diags.HasErrors(), "%v", diags)
	require.True(t, vals["n"].Equals(cty.NumberIntVal(-3)).True())
	require.Equal(t, cty.StringVal("2500"), vals["pages"].Index(cty.NumberIntVal(3)))
}
