package bounds

import (
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"

	"github.com/lhengine/lhengine/internal/testhcl"
)

// FuzzCheckSource checks that CheckSource never panics, that a refusal
// points into the source, and that a source it accepts parses, and its
// top-level attributes evaluate (instrumented, with the functions of
// Context), without a panic, a crash of the stack or more than
// testhcl.AllocLimit of allocations. The seeds alone run as a test.
func FuzzCheckSource(f *testing.F) {
	for _, expr := range testhcl.HostileExprs(f, "../../../testdata/bounds/hostile.txt") {
		f.Add([]byte("x = " + expr + "\n"))
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		const filename = "fuzz.hcl"
		defer testhcl.LimitAllocs(t, len(src))()
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
	for _, expr := range append(testhcl.HostileExprs(f, "../../../testdata/bounds/hostile.txt"), `["a", "b"]`, `{a = 1}`, strings.Repeat("-", 5000)+"1") {
		f.Add(expr)
	}
	f.Fuzz(func(t *testing.T, src string) {
		if CheckExpression([]byte(src)) == "" {
			_, _ = hclsyntax.ParseExpression([]byte(src), "--var", hcl.InitialPos)
		}
	})
}
