package bounds_test

import (
	"bytes"
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/stretchr/testify/require"
	"github.com/zclconf/go-cty/cty"

	"github.com/lhengine/lhengine/engine/internal/bounds"
	"github.com/lhengine/lhengine/engine/internal/taskfile"
)

// stepInput is a task file with one step whose input is expr.
func stepInput(expr string) []byte {
	return []byte("task \"t\" {\n  step \"a\" {\n    plugin = \"a.wasm\"\n    input  = " + expr + "\n  }\n}\n")
}

// TestParseRefusesDeepNesting checks that sources nested far deeper than
// the parser's stack allows are refused with a diagnostic on the line and
// column where they cross bounds.MaxNestingDepth, and that the diagnostic renders
// (rendering parses the file too). Without the check, the first crashes the
// process with a fatal stack overflow (so do the others, made that deep).
func TestParseRefusesDeepNesting(t *testing.T) {
	t.Parallel()
	const n = 100_000
	cases := map[string]string{
		"brackets":     strings.Repeat("[", n) + strings.Repeat("]", n),
		"objects":      strings.Repeat("{a=", 2000) + "1" + strings.Repeat("}", 2000),
		"parentheses":  strings.Repeat("(", 2000) + "1" + strings.Repeat(")", 2000),
		"unary":        strings.Repeat("!", 1000) + "true",
		"binary":       "1" + strings.Repeat("+1", 1000),
		"conditional":  strings.Repeat("true ? 1 : ", 1000) + "2",
		"splat":        "[1]" + strings.Repeat("[*]", 1000),
		"index":        "(1)" + strings.Repeat("[0]", 1000),
		"attribute":    "(1)" + strings.Repeat(".a", 1000),
		"interpolated": strings.Repeat(`"${`, 1000) + "1" + strings.Repeat(`}"`, 1000),
		"directives":   `"` + strings.Repeat("%{ if true }", 1000) + strings.Repeat("%{ endif }", 1000) + `"`,
		"heredoc":      "<<EOT\n" + strings.Repeat("${[", 1000) + "1" + strings.Repeat("]}", 1000) + "\nEOT",
		"lines":        "(1 +\n" + strings.Repeat("1 +\n", 1000) + "1)",
	}
	for name, expr := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			src := stepInput(expr)
			task, diags := taskfile.Parse("deep.hcl", src, taskfile.Options{})
			require.Nil(t, task)
			require.Len(t, diags, 1, "%v", diags)
			d := diags[0]
			require.Equal(t, "Nesting too deep", d.Summary)
			require.Equal(t, "deep.hcl", d.Subject.Filename)
			require.GreaterOrEqual(t, d.Subject.Start.Line, 4)
			var out bytes.Buffer
			require.NoError(t, taskfile.WriteDiagnostics(&out, map[string][]byte{"deep.hcl": src}, diags, 80, false))
			require.Contains(t, out.String(), fmt.Sprintf("deep.hcl:%d:%d: error: Nesting too deep", d.Subject.Start.Line, d.Subject.Start.Column))
		})
	}
}

// TestNestingLimit checks where the limit falls: the task and step blocks
// are two levels, so an input may nest 98 brackets and not 99, and that
// brackets in strings, heredocs and comments do not count.
func TestNestingLimit(t *testing.T) {
	t.Parallel()
	nest := func(k int) string { return strings.Repeat("[", k) + strings.Repeat("]", k) }

	_, diags := taskfile.Parse("ok.hcl", stepInput(nest(bounds.MaxNestingDepth-2)), taskfile.Options{})
	require.False(t, diags.HasErrors(), "%v", diags)

	_, diags = taskfile.Parse("deep.hcl", stepInput(nest(bounds.MaxNestingDepth-1)), taskfile.Options{})
	require.Len(t, diags, 1)
	require.Equal(t, "Nesting too deep", diags[0].Summary)
	require.Equal(t, hcl.Pos{Line: 4, Column: 14 + bounds.MaxNestingDepth - 2, Byte: diags[0].Subject.Start.Byte}, diags[0].Subject.Start)

	text := strings.Repeat("[({", 10_000)
	for _, expr := range []string{
		`"` + text + `"`,
		"<<EOT\n" + text + "\nEOT",
		"1 # " + text,
		"1 /* " + text + " */",
		// Items separated by commas or newlines do not chain.
		"[" + strings.Repeat("1 + 1, ", 1000) + "1]",
		"{\n" + strings.Repeat("a = 1 + 1 + 1\n", 1000) + "}",
	} {
		_, diags := taskfile.Parse("ok.hcl", stepInput(expr), taskfile.Options{})
		require.False(t, diags.HasErrors(), "%.60s: %v", expr, diags)
	}
}

// TestParseRefusesLargeFile checks the size limit: a file one byte over it
// is refused without being parsed (or lexed), pointing at where it crosses
// the limit.
func TestParseRefusesLargeFile(t *testing.T) {
	t.Parallel()
	src := stepInput(`"` + strings.Repeat("x", bounds.MaxSourceBytes) + `"`)
	task, diags := taskfile.Parse("big.hcl", src, taskfile.Options{})
	require.Nil(t, task)
	require.Len(t, diags, 1)
	require.Equal(t, "Task file too large", diags[0].Summary)
	require.Equal(t, 4, diags[0].Subject.Start.Line)
	require.Equal(t, bounds.MaxSourceBytes, diags[0].Subject.Start.Byte)
}

// TestVarValueDepth checks that a --var value nested too deeply is an
// invalid value, not a crash of the parser.
func TestVarValueDepth(t *testing.T) {
	t.Parallel()
	task, diags := taskfile.Parse("v.hcl", []byte(`task "t" {
  variable "v" {
    type = any
  }
  step "a" {
    plugin = "a.wasm"
    input  = var.v
  }
}
`), taskfile.Options{})
	require.False(t, diags.HasErrors(), "%v", diags)
	task.Variables[0].Type = cty.List(cty.DynamicPseudoType)

	_, diags = task.Vars(map[string]string{"v": strings.Repeat("[", 100_000) + strings.Repeat("]", 100_000)})
	require.Len(t, diags, 1)
	require.Equal(t, "Invalid value for variable", diags[0].Summary)
	require.Contains(t, diags[0].Detail, "is nested more than 100 levels deep")

	vals, diags := task.Vars(map[string]string{"v": "[[[1]]]"})
	require.False(t, diags.HasErrors(), "%v", diags)
	require.Equal(t, 1, vals["v"].LengthInt())
}

// TestSetProductRefusedQuickly checks that a product too large to hold is
// refused from its arguments' sizes, allocating little: building it took 23s
// and 8.5GB. It is not parallel, so that it measures its own allocations.
func TestSetProductRefusedQuickly(t *testing.T) {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, diags := taskfile.Parse("p.hcl", stepInput("setproduct(range(300), range(300), range(300))"), taskfile.Options{})
	runtime.ReadMemStats(&after)
	require.Len(t, diags, 1)
	require.Contains(t, diags[0].Detail, "setproduct would produce 27000000 elements; the limit is 1000000")
	require.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(64<<20))
}

// evalWith evaluates the step input expr with variables vars, as a run
// does for one item.
func evalWith(t *testing.T, expr string, vars map[string]cty.Value) (cty.Value, hcl.Diagnostics) {
	t.Helper()
	var decls strings.Builder
	for name := range vars {
		fmt.Fprintf(&decls, "  variable %q {\n    type = any\n  }\n", name)
	}
	src := "task \"t\" {\n" + decls.String() + "  step \"a\" {\n    plugin = \"a.wasm\"\n    input  = " + expr + "\n  }\n}\n"
	task, diags := taskfile.Parse("e.hcl", []byte(src), taskfile.Options{})
	require.False(t, diags.HasErrors(), "%v", diags)
	return task.Steps[0].EvalInput(taskfile.Scope{TaskID: "t", Vars: vars})
}

// TestRunTimeLimits checks the limits on values known only at run time,
// where Parse could not see the sizes: each call is refused before its
// result is built.
func TestRunTimeLimits(t *testing.T) {
	t.Parallel()
	big := cty.StringVal(strings.Repeat("ab,", 400_000)) // 1.2MB, 400,001 fields
	vars := map[string]cty.Value{"n": bounds.Numbers(300), "big": big, "m": bounds.Numbers(1100)}
	for expr, want := range map[string]string{
		"setproduct(var.n, var.n, var.n)":                   "setproduct would produce 27000000 elements; the limit is 1000000",
		"flatten([var.m, [for x in var.m : var.m]])":        "flatten would produce 1211100 elements",
		"concat(var.m, [for x in var.m : x], var.m)":        "",
		"join(var.big, var.n)":                              "join would produce 358800790 bytes of strings",
		"replace(var.big, \",\", var.big)":                  "replace would produce",
		"indent(100, replace(var.big, \",\", \"\\n\"))":     "indent would produce",
		"format(\"%s%s%s%s%s%s%s%s%s%s%s%s%s%s\", var.big)": "format would produce",
		"formatlist(\"%s\", [for x in var.m : var.big])":    "formatlist would produce",
		"jsonencode([for x in var.m : var.big])":            "jsonencode would produce",
		"split(\"\", var.big)":                              "split would produce 1200000 elements",
	} {
		v, diags := evalWith(t, expr, vars)
		if want == "" {
			require.False(t, diags.HasErrors(), "%s: %v", expr, diags)
			continue
		}
		require.True(t, diags.HasErrors(), "%s gave %s", expr, v.GoString()[:min(80, len(v.GoString()))])
		require.Contains(t, diags.Error(), want, expr)
		require.Equal(t, "e.hcl", diags[0].Subject.Filename)
	}
}

// TestFanOutOfManyItems checks that the limits leave room for large
// fan-outs: 100,000 items from a product, and from a for expression.
func TestFanOutOfManyItems(t *testing.T) {
	t.Parallel()
	task, diags := taskfile.Parse("f.hcl", []byte(`task "t" {
  variable "a" {
    type = list(number)
  }
  variable "b" {
    type = list(number)
  }
  step "product" {
    plugin   = "a.wasm"
    for_each = setproduct(var.a, var.b)
    input    = each.value
  }
  step "for" {
    plugin   = "a.wasm"
    for_each = [for p in setproduct(var.a, var.b) : p]
    input    = each.value
  }
}
`), taskfile.Options{})
	require.False(t, diags.HasErrors(), "%v", diags)
	scope := taskfile.Scope{TaskID: "t", Vars: map[string]cty.Value{"a": bounds.Numbers(100), "b": bounds.Numbers(1000)}}
	for _, s := range task.Steps {
		items, diags := s.EvalForEach(scope)
		require.False(t, diags.HasErrors(), "%v", diags)
		require.Len(t, items, 100_000)
	}

	// A product of 27 million items is refused, at run time as at
	// validation: the planner evaluates for_each with the same functions.
	scope.Vars = map[string]cty.Value{"a": bounds.Numbers(3000), "b": bounds.Numbers(9000)}
	_, diags = task.Steps[0].EvalForEach(scope)
	require.True(t, diags.HasErrors())
	require.Contains(t, diags.Error(), "setproduct would produce 27000000 elements")
}

// TestFanOutItemLimit checks that a for_each read as it is from a variable
// (or an earlier output), which no function built, is held to the same
// limit on items.
func TestFanOutItemLimit(t *testing.T) {
	t.Parallel()
	task, diags := taskfile.Parse("f.hcl", []byte(`task "t" {
  variable "items" {
    type = list(bool)
  }
  step "each" {
    plugin   = "a.wasm"
    for_each = var.items
  }
}
`), taskfile.Options{})
	require.False(t, diags.HasErrors(), "%v", diags)
	elems := make([]cty.Value, bounds.MaxCollectionElements+1)
	for i := range elems {
		elems[i] = cty.True
	}
	_, diags = task.Steps[0].EvalForEach(taskfile.Scope{TaskID: "t", Vars: map[string]cty.Value{"items": cty.ListVal(elems)}})
	require.True(t, diags.HasErrors())
	require.Equal(t, "Too many fan-out items", diags[0].Summary)
	require.Contains(t, diags[0].Detail, "1000001 elements; the limit is 1000000")
}

// TestNumberLimits checks that numbers too large to write out as text in
// reasonable time (1e100000000 has a hundred million digits, and writing
// it took longer than ten minutes) are refused where they are read: task
// file and --var literals and functions that parse strings, and by the
// arithmetic that could compute one (JSON: TestJSONNumberLimits).
func TestNumberLimits(t *testing.T) {
	t.Parallel()
	for _, expr := range []string{"1e100000000", `"x${1e100000000}"`, "1" + strings.Repeat("0", bounds.MaxNumberLength)} {
		_, diags := taskfile.Parse("n.hcl", stepInput(expr), taskfile.Options{})
		require.Len(t, diags, 1, "%.40s", expr)
		require.Equal(t, "Number too large", diags[0].Summary)
		require.Equal(t, hcl.Pos{Line: 4, Column: 14 + strings.Index(expr, "1"), Byte: diags[0].Subject.Start.Byte}, diags[0].Subject.Start)
	}
	_, diags := taskfile.Parse("n.hcl", stepInput("[1e300, 12345678901234567890, 1.5e-300, 1e300 * 1e300, -1e-300 / 1e300]"), taskfile.Options{})
	require.False(t, diags.HasErrors(), "%v", diags)

	// A number converted from a string is not a literal: the operators
	// refuse a result that large (validation converted it to text for hours).
	for _, expr := range []string{`"x${"1e99999999" * 1}"`, `"x${-"1e99999999"}"`, `"x${abs("1e99999999")}"`} {
		_, diags := taskfile.Parse("n.hcl", stepInput(expr), taskfile.Options{})
		require.True(t, diags.HasErrors(), expr)
		require.Contains(t, diags.Error(), "exponent beyond 10000", expr)
	}

	digits := cty.StringVal(strings.Repeat("9", bounds.MaxNumberLength+1))
	for _, expr := range []string{"tonumber(var.s)", "parseint(var.s, 10)"} {
		_, diags := evalWith(t, expr, map[string]cty.Value{"s": digits})
		require.True(t, diags.HasErrors(), expr)
		require.Contains(t, diags.Error(), fmt.Sprintf("a number may have at most %d", bounds.MaxNumberLength), expr)
	}

	task, diags := taskfile.Parse("v.hcl", []byte("task \"t\" {\n  variable \"n\" {\n    type = number\n  }\n  step \"a\" {\n    plugin = \"a.wasm\"\n  }\n}\n"), taskfile.Options{})
	require.False(t, diags.HasErrors(), "%v", diags)
	_, diags = task.Vars(map[string]string{"n": "1e100000000"})
	require.Len(t, diags, 1)
	require.Contains(t, diags[0].Detail, "holds a number")
	// A typed default converted from a string is refused when a template
	// would write it out.
	task, diags = taskfile.Parse("d.hcl", []byte(`task "t" {
  variable "n" {
    type    = number
    default = "1e99999999"
  }
  step "a" {
    plugin = "a.wasm"
    input  = "n=${var.n}"
  }
}
`), taskfile.Options{})
	require.False(t, diags.HasErrors(), "%v", diags)
	vals, diags := task.Vars(nil)
	require.False(t, diags.HasErrors(), "%v", diags)
	_, diags = task.Steps[0].EvalInput(taskfile.Scope{TaskID: "t", Vars: vals})
	require.True(t, diags.HasErrors())
	require.Contains(t, diags.Error(), "write out a number with an exponent beyond 10000")

	task.Variables[0].Type = cty.List(cty.Number)
	_, diags = task.Vars(map[string]string{"n": `["1e100000000"]`})
	require.Len(t, diags, 1)
	require.Contains(t, diags[0].Detail, "holds a number with an exponent beyond 10000")
}

// TestTryEvaluatesOnce checks that try evaluates its arguments once per
// call: HCL's try evaluates them once to find the result type and again
// for the value, so that nested tries evaluated their innermost argument
// 2^depth times, charging the budget each time, and a file of a hundred
// nested tries around a constant did not finish validating.
func TestTryEvaluatesOnce(t *testing.T) {
	t.Parallel()
	vars := map[string]cty.Value{"l": bounds.Numbers(300_000)}
	expr := "try(try(try(try([for x in var.l : x]))))"
	v, diags := evalWith(t, expr, vars)
	require.False(t, diags.HasErrors(), "%v", diags)
	require.Equal(t, 300_000, v.LengthInt())

	v, diags = evalWith(t, "[can(try(try([for x in var.l : x]))), length(try(try([for x in var.l : x])))]", vars)
	require.False(t, diags.HasErrors(), "%v", diags)
	require.True(t, v.RawEquals(cty.TupleVal([]cty.Value{cty.True, cty.NumberIntVal(300_000)})), "%#v", v)

	deep := strings.Repeat("try(", bounds.MaxNestingDepth-10) + "1" + strings.Repeat(")", bounds.MaxNestingDepth-10)
	v, diags = evalWith(t, deep, nil)
	require.False(t, diags.HasErrors(), "%v", diags)
	require.True(t, v.RawEquals(cty.NumberIntVal(1)), "%#v", v)
}
