package hcldecode

import (
	"fmt"
	"sort"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
)

// Error is an error on an attribute's value, with the whole attribute as
// its context.
func Error(attr *hcl.Attribute, summary, detail string) *hcl.Diagnostic {
	return &hcl.Diagnostic{
		Severity: hcl.DiagError,
		Summary:  summary,
		Detail:   detail,
		Subject:  attr.Expr.Range().Ptr(),
		Context:  attr.Range.Ptr(),
	}
}

// WrongType is HCL's "Incorrect attribute value type" on an attribute's
// value: why completes "Inappropriate value for attribute NAME: ".
func WrongType(attr *hcl.Attribute, why string) *hcl.Diagnostic {
	return Error(attr, "Incorrect attribute value type", fmt.Sprintf("Inappropriate value for attribute %q: %s.", attr.Name, why))
}

// LabelError is an error on a block's first label (a duplicate or unknown
// name), shown inside the block's header.
func LabelError(b *hcl.Block, summary, detail string) *hcl.Diagnostic {
	return &hcl.Diagnostic{
		Severity: hcl.DiagError,
		Summary:  summary,
		Detail:   detail,
		Subject:  b.LabelRanges[0].Ptr(),
		Context:  b.DefRange.Ptr(),
	}
}

// InvalidName refuses the name of a kind of block (step, variable, ...)
// that is not an identifier, which expressions could not refer to.
func InvalidName(kind string, block *hcl.Block) *hcl.Diagnostic {
	return LabelError(block, fmt.Sprintf("Invalid %s name", kind),
		fmt.Sprintf("A %s name must start with a letter or underscore and contain only letters, digits, underscores and dashes, so that expressions can refer to it.", kind))
}

// FillSubject gives every diagnostic without a Subject the range rng, so
// that each one can be shown with file:line:col.
func FillSubject(diags hcl.Diagnostics, rng hcl.Range) hcl.Diagnostics {
	for _, d := range diags {
		if d.Subject == nil {
			r := rng
			d.Subject = &r
		}
	}
	return diags
}

// Sort orders diags by where their subjects start, so that they read in
// file order and are the same from one run to the next; those without a
// subject come first, and those at one place in order of their summaries.
func Sort(diags hcl.Diagnostics) hcl.Diagnostics {
	sort.SliceStable(diags, func(i, j int) bool {
		a, b := diags[i].Subject, diags[j].Subject
		switch {
		case a == nil || b == nil:
			return a == nil && b != nil
		case a.Filename != b.Filename:
			return a.Filename < b.Filename
		case a.Start.Byte != b.Start.Byte:
			return a.Start.Byte < b.Start.Byte
		default:
			return diags[i].Summary < diags[j].Summary
		}
	})
	return diags
}

// DidYouMean returns " Did you mean "x"?" for the candidate closest to
// name, or "" when none is close (an edit distance of 3 or more, or names
// longer than 64 characters).
func DidYouMean(name string, candidates []string) string {
	best, bestDist := "", 3
	if len(name) > 64 {
		return ""
	}
	for _, c := range candidates {
		if len(c) > 64 {
			continue
		}
		if d := editDistance(name, c); d < bestDist {
			best, bestDist = c, d
		}
	}
	if best == "" {
		return ""
	}
	return fmt.Sprintf(" Did you mean %q?", best)
}

func editDistance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(rb)]
}

// ElementRanges returns the range of each element of attr's value when it
// is a list of n elements written out ([a, b, c]), so that a mistake in
// one element can be shown on that element alone; nil otherwise.
func ElementRanges(attr *hcl.Attribute, n int) []hcl.Range {
	tuple, ok := attr.Expr.(*hclsyntax.TupleConsExpr)
	if !ok || len(tuple.Exprs) != n {
		return nil
	}
	rngs := make([]hcl.Range, n)
	for i, e := range tuple.Exprs {
		rngs[i] = e.Range()
	}
	return rngs
}
