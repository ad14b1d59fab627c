package taskfile

import (
	"errors"
	"fmt"
	"math"
	"math/big"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/convert"

	"github.com/lhengine/lhengine/engine/internal/bounds"
	"github.com/lhengine/lhengine/internal/bytesize"
)

// constCtx evaluates attributes that are fixed when the task file is parsed:
// functions are available (bounds.Context adds them), variables are not.
var constCtx = &hcl.EvalContext{}

// constValue evaluates an attribute that must not refer to anything. The
// result may be null; it is always known.
func constValue(attr *hcl.Attribute) (cty.Value, hcl.Diagnostics) {
	var diags hcl.Diagnostics
	for _, tr := range attr.Expr.Variables() {
		diags = append(diags, &hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  "Variables not allowed",
			Detail:   fmt.Sprintf("The %s argument is fixed when the task file is parsed, so it cannot refer to var, step, each or task.", attr.Name),
			Subject:  tr.SourceRange().Ptr(),
			Context:  attr.Range.Ptr(),
		})
	}
	if diags.HasErrors() {
		return cty.DynamicVal, diags
	}
	ctx, b := bounds.Context(constCtx, bounds.CalledFunctions(attr.Expr))
	v, d := attr.Expr.Value(ctx)
	d = b.AddFailure(d, attr.Expr.Range())
	diags = append(diags, fillSubject(d, attr.Expr.Range())...)
	if d.HasErrors() {
		return cty.DynamicVal, diags
	}
	if !v.IsWhollyKnown() {
		// Cannot happen without variables, but a function could in principle
		// return an unknown value; treat it as not constant.
		diags = append(diags, &hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  "Invalid value",
			Detail:   fmt.Sprintf("The %s argument must be known when the task file is parsed.", attr.Name),
			Subject:  attr.Expr.Range().Ptr(),
			Context:  attr.Range.Ptr(),
		})
		return cty.DynamicVal, diags
	}
	v, _ = v.UnmarkDeep()
	return v, diags
}

// constTyped evaluates a constant attribute and converts it to ty; null is an
// error.
func constTyped(attr *hcl.Attribute, ty cty.Type, want string) (cty.Value, hcl.Diagnostics) {
	v, diags := constValue(attr)
	if diags.HasErrors() {
		return v, diags
	}
	if v.IsNull() {
		return v, append(diags, wrongType(attr, fmt.Sprintf("%s required, not null", want)))
	}
	conv, err := convert.Convert(v, ty)
	if err != nil {
		return v, append(diags, wrongType(attr, errorText(err)))
	}
	return conv, diags
}

func wrongType(attr *hcl.Attribute, why string) *hcl.Diagnostic {
	return &hcl.Diagnostic{
		Severity: hcl.DiagError,
		Summary:  "Incorrect attribute value type",
		Detail:   fmt.Sprintf("Inappropriate value for attribute %q: %s.", attr.Name, why),
		Subject:  attr.Expr.Range().Ptr(),
		Context:  attr.Range.Ptr(),
	}
}

// constString evaluates a constant string attribute.
func constString(attr *hcl.Attribute) (string, hcl.Diagnostics) {
	v, diags := constTyped(attr, cty.String, "string")
	if diags.HasErrors() {
		return "", diags
	}
	return v.AsString(), diags
}

// constStringList evaluates a constant list of strings; elements must not be
// null.
func constStringList(attr *hcl.Attribute) ([]string, hcl.Diagnostics) {
	v, diags := constTyped(attr, cty.List(cty.String), "list of string")
	if diags.HasErrors() {
		return nil, diags
	}
	out := make([]string, 0, v.LengthInt())
	for it := v.ElementIterator(); it.Next(); {
		_, e := it.Element()
		if e.IsNull() {
			return nil, append(diags, wrongType(attr, "list of string required, but an element is null"))
		}
		out = append(out, e.AsString())
	}
	return out, diags
}

// constInt evaluates a constant whole number that fits an int.
func constInt(attr *hcl.Attribute) (int, hcl.Diagnostics) {
	v, diags := constTyped(attr, cty.Number, "number")
	if diags.HasErrors() {
		return 0, diags
	}
	bf := v.AsBigFloat()
	if !bf.IsInt() {
		return 0, append(diags, wrongType(attr, fmt.Sprintf("whole number required, but have %s", bf.Text('f', -1))))
	}
	i, acc := bf.Int64()
	if acc != big.Exact || i > math.MaxInt32 || i < math.MinInt32 {
		return 0, append(diags, wrongType(attr, fmt.Sprintf("%s is out of range", bf.Text('g', 10))))
	}
	return int(i), diags
}

// constDuration evaluates a constant Go duration string such as "30s" or
// "1m30s".
func constDuration(attr *hcl.Attribute) (time.Duration, hcl.Diagnostics) {
	s, diags := constString(attr)
	if diags.HasErrors() {
		return 0, diags
	}
	d, err := time.ParseDuration(strings.TrimSpace(s))
	if err != nil {
		return 0, append(diags, &hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  "Invalid duration",
			Detail:   fmt.Sprintf("%s must be a duration such as \"500ms\", \"30s\", \"5m\" or \"1h30m\"; %q is not one.", attr.Name, s),
			Subject:  attr.Expr.Range().Ptr(),
			Context:  attr.Range.Ptr(),
		})
	}
	return d, diags
}

// constMemory evaluates a memory size: a whole number of bytes, or a string
// such as "64MiB", checked against MinMemory and MaxMemory.
func constMemory(attr *hcl.Attribute) (uint64, hcl.Diagnostics) {
	return constSize(attr, "Invalid memory size", "memory size", MinMemory, MaxMemory, func(n uint64) string {
		return fmt.Sprintf("memory must be between 64KiB (one WebAssembly page) and 4GiB; got %d bytes.", n)
	})
}

// constSize evaluates a size in bytes: a whole number, or a string such as
// "64MiB" (bytesize.Parse). A size outside [min, max] is reported with
// outOfRange's text. summary is the diagnostics' summary and noun names the
// kind of size in them.
func constSize(attr *hcl.Attribute, summary, noun string, min, max uint64, outOfRange func(uint64) string) (uint64, hcl.Diagnostics) {
	v, diags := constValue(attr)
	if diags.HasErrors() {
		return 0, diags
	}
	bad := func(detail string) (uint64, hcl.Diagnostics) {
		return 0, append(diags, &hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  summary,
			Detail:   detail,
			Subject:  attr.Expr.Range().Ptr(),
			Context:  attr.Range.Ptr(),
		})
	}
	var n uint64
	switch {
	case v.IsNull():
		return bad(fmt.Sprintf("%s must be a size such as \"64MiB\"; it must not be null.", attr.Name))
	case v.Type() == cty.Number:
		bf := v.AsBigFloat()
		u, acc := bf.Uint64()
		if !bf.IsInt() || acc != big.Exact {
			return bad(fmt.Sprintf("A %s given as a number is a whole number of bytes; %s is not one.", noun, bf.Text('g', 10)))
		}
		n = u
	case v.Type() == cty.String:
		var err error
		n, err = bytesize.Parse(attr.Name, v.AsString())
		if err != nil {
			return bad(err.Error() + ".")
		}
	default:
		return bad(fmt.Sprintf("%s must be a size such as \"64MiB\", not a %s.", attr.Name, v.Type().FriendlyName()))
	}
	if n < min || n > max {
		return bad(outOfRange(n))
	}
	return n, diags
}

// parseMemory parses a memory size: a whole number optionally followed by one
// of the units B, KB, MB, GB (powers of 1000) or KiB, MiB, GiB (powers of 1024).
func parseMemory(s string) (uint64, error) { return bytesize.Parse("memory", s) }

// errorText formats a cty conversion error, naming the path inside the value
// where it has one.
func errorText(err error) string {
	var pe cty.PathError
	if errors.As(err, &pe) && len(pe.Path) > 0 {
		return fmt.Sprintf("%s: %s", formatPath(pe.Path), pe.Error())
	}
	return err.Error()
}

func formatPath(path cty.Path) string {
	var b strings.Builder
	for _, step := range path {
		switch s := step.(type) {
		case cty.GetAttrStep:
			fmt.Fprintf(&b, ".%s", s.Name)
		case cty.IndexStep:
			switch {
			case !s.Key.IsKnown() || s.Key.IsNull():
				b.WriteString("[?]")
			case s.Key.Type() == cty.String:
				fmt.Fprintf(&b, "[%q]", s.Key.AsString())
			case s.Key.Type() == cty.Number:
				fmt.Fprintf(&b, "[%s]", s.Key.AsBigFloat().Text('f', -1))
			default:
				b.WriteString("[?]")
			}
		}
	}
	out := strings.TrimPrefix(b.String(), ".")
	if out == "" {
		return "value"
	}
	return "at " + out
}

// fillSubject gives every diagnostic without a Subject the range rng, so that
// each one can be shown with file:line:col.
func fillSubject(diags hcl.Diagnostics, rng hcl.Range) hcl.Diagnostics {
	for _, d := range diags {
		if d.Subject == nil {
			r := rng
			d.Subject = &r
		}
	}
	return diags
}

// didYouMean returns " Did you mean "x"?" for the candidate closest to name,
// or "" when none is close.
func didYouMean(name string, candidates []string) string {
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
