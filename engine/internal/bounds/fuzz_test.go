package bounds

import (
	"runtime"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
)

// fuzzAllocLimit bounds what one input may make FuzzCheckSource allocate:
// the evaluation budget (MaxEvalElements values of a few hundred bytes
// each, garbage included) with room to spare, and far below what an
// unbounded product takes (8.5GB for 27 million elements).
const fuzzAllocLimit = 2 << 30

// deepExprs are expressions that would crash or exhaust an unguarded
// parser or evaluator: nesting of every kind far past MaxNestingDepth, and
// products, loops and numbers far past the evaluation limits.
func deepExprs() []string {
	const n = 300 // far past MaxNestingDepth; small, so that the fuzzer mutates and minimizes them quickly
	return []string{
		strings.Repeat("[", n) + strings.Repeat("]", n),
		strings.Repeat("{a=", n) + "1" + strings.Repeat("}", n),
		strings.Repeat("(", n) + "1" + strings.Repeat(")", n),
		strings.Repeat("!", n) + "true",
		"1" + strings.Repeat("+1", n),
		strings.Repeat("true ? 1 : ", n) + "2",
		"[1]" + strings.Repeat("[*]", n),
		strings.Repeat(`"${`, n) + "1" + strings.Repeat(`}"`, n),
		`"` + strings.Repeat("%{ if true }", n) + strings.Repeat("%{ endif }", n) + `"`,
		"setproduct(range(300), range(300), range(300))",
		"[for a in setproduct(range(300), range(300), range(300)) : a]",
		`format("%999999999d", 1)`,
		`replace(format("%4000s", "x"), "", format("%5000s", "y"))`,
		`jsondecode("` + strings.Repeat("[", n) + `")`,
		`"x${1e100000000}"`,
		`"x${"1e99999999" * 1}"`,
		"try(" + strings.Repeat("try(", 90) + "1" + strings.Repeat(")", 91),
	}
}

// FuzzCheckSource checks that CheckSource never panics, that a refusal
// points into the source, and that a source it accepts parses, and its
// top-level attributes evaluate (instrumented, with the functions of
// Context), without a panic, a crash of the stack or more than
// fuzzAllocLimit of allocations. The seeds alone run as a test.
func FuzzCheckSource(f *testing.F) {
	for _, expr := range deepExprs() {
		f.Add([]byte("x = " + expr + "\n"))
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		const filename = "fuzz.hcl"
		var before runtime.MemStats
		runtime.ReadMemStats(&before)
		defer func() {
			var after runtime.MemStats
			runtime.ReadMemStats(&after)
			if n := after.TotalAlloc - before.TotalAlloc; n > fuzzAllocLimit {
				t.Fatalf("allocated %d bytes for a %d-byte source", n, len(src))
			}
		}()
		if diags := CheckSource(filename, src); diags.HasErrors() {
			for _, d := range diags {
				if d.Subject == nil || d.Subject.Filename != filename || d.Subject.Start.Byte > len(src) {
					t.Fatalf("refusal %q is not in the source: %v", d.Summary, d.Subject)
				}
			}
			return
		}
		file, diags := hclsyntax.ParseConfig(src, filename, hcl.InitialPos)
		if diags.HasErrors() {
			return
		}
		Instrument(file.Body)
		attrs, _ := file.Body.JustAttributes()
		for _, attr := range attrs {
			ctx, b := Context(&hcl.EvalContext{}, CalledFunctions(attr.Expr))
			_, diags := attr.Expr.Value(ctx)
			_ = b.AddFailure(diags, attr.Expr.Range())
		}
	})
}

// FuzzCheckExpression checks that CheckExpression never panics and that
// a standalone expression it accepts parses without a crash of the stack.
func FuzzCheckExpression(f *testing.F) {
	for _, expr := range append(deepExprs(), `["a", "b"]`, `{a = 1}`, strings.Repeat("-", 5000)+"1") {
		f.Add(expr)
	}
	f.Fuzz(func(t *testing.T, src string) {
		if CheckExpression([]byte(src)) == "" {
			_, _ = hclsyntax.ParseExpression([]byte(src), "--var", hcl.InitialPos)
		}
	})
}
