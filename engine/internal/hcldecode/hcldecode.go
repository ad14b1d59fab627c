// Package hcldecode holds what the decoders of the engine's HCL files (task
// files, policy files) share: attributes whose values are fixed when the
// file is parsed, evaluated with the bounded functions of the language
// (bounds.Context) and no variables, converted, and checked against a range
// or a set of words; and the diagnostics of their mistakes, each on the
// attribute's value with the attribute as its context, in the words every
// decoder uses.
//
// A block's simple attributes are decoded from a table (Fields, Set);
// anything that depends on another attribute stays in the block's decoder,
// which calls the same Decoders.
package hcldecode

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

// Value evaluates an attribute that must not refer to anything. The
// result may be null; it is always known (cty.DynamicVal with an error).
func Value(attr *hcl.Attribute) (cty.Value, hcl.Diagnostics) {
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
	ctx, b := bounds.Context(&hcl.EvalContext{}, bounds.CalledFunctions(attr.Expr))
	v, d := attr.Expr.Value(ctx)
	d = b.AddFailure(d, attr.Expr.Range())
	diags = append(diags, FillSubject(d, attr.Expr.Range())...)
	if d.HasErrors() {
		return cty.DynamicVal, diags
	}
	if !v.IsWhollyKnown() {
		// Cannot happen without variables, but a function could in principle
		// return an unknown value; treat it as not constant.
		diags = append(diags, Error(attr, "Invalid value", fmt.Sprintf("The %s argument must be known when the task file is parsed.", attr.Name)))
		return cty.DynamicVal, diags
	}
	v, _ = v.UnmarkDeep()
	return v, diags
}

// Typed evaluates a constant attribute and converts it to ty; null is an
// error. want names ty in that error ("number", "list of string").
func Typed(attr *hcl.Attribute, ty cty.Type, want string) (cty.Value, hcl.Diagnostics) {
	v, diags := Value(attr)
	if diags.HasErrors() {
		return v, diags
	}
	if v.IsNull() {
		return v, append(diags, WrongType(attr, fmt.Sprintf("%s required, not null", want)))
	}
	conv, err := convert.Convert(v, ty)
	if err != nil {
		return v, append(diags, WrongType(attr, ErrorText(err)))
	}
	return conv, diags
}

// String evaluates a constant string attribute.
func String(attr *hcl.Attribute) (string, hcl.Diagnostics) {
	v, diags := Typed(attr, cty.String, "string")
	if diags.HasErrors() {
		return "", diags
	}
	return v.AsString(), diags
}

// StringList evaluates a constant list of strings; elements must not be
// null.
func StringList(attr *hcl.Attribute) ([]string, hcl.Diagnostics) {
	v, diags := Typed(attr, cty.List(cty.String), "list of string")
	if diags.HasErrors() {
		return nil, diags
	}
	out := make([]string, 0, v.LengthInt())
	for it := v.ElementIterator(); it.Next(); {
		_, e := it.Element()
		if e.IsNull() {
			return nil, append(diags, WrongType(attr, "list of string required, but an element is null"))
		}
		out = append(out, e.AsString())
	}
	return out, diags
}

// Int evaluates a constant whole number that fits an int32.
func Int(attr *hcl.Attribute) (int, hcl.Diagnostics) {
	v, diags := Typed(attr, cty.Number, "number")
	if diags.HasErrors() {
		return 0, diags
	}
	bf := v.AsBigFloat()
	if !bf.IsInt() {
		return 0, append(diags, WrongType(attr, fmt.Sprintf("whole number required, but have %s", bf.Text('f', -1))))
	}
	i, acc := bf.Int64()
	if acc != big.Exact || i > math.MaxInt32 || i < math.MinInt32 {
		return 0, append(diags, WrongType(attr, fmt.Sprintf("%s is out of range", bf.Text('g', 10))))
	}
	return int(i), diags
}

// Duration evaluates a constant Go duration string such as "30s" or
// "1m30s".
func Duration(attr *hcl.Attribute) (time.Duration, hcl.Diagnostics) {
	s, diags := String(attr)
	if diags.HasErrors() {
		return 0, diags
	}
	d, err := time.ParseDuration(strings.TrimSpace(s))
	if err != nil {
		return 0, append(diags, Error(attr, "Invalid duration",
			fmt.Sprintf("%s must be a duration such as \"500ms\", \"30s\", \"5m\" or \"1h30m\"; %q is not one.", attr.Name, s)))
	}
	return d, diags
}

// size evaluates a size in bytes: a whole number, or a string such as
// "64MiB" (bytesize.Parse). A size outside [min, max] is reported with the
// detail outOfRange, a format of the size (one verb). summary is the
// diagnostics' summary and noun names the kind of size in them.
func size(attr *hcl.Attribute, summary, noun string, min, max uint64, outOfRange string) (uint64, hcl.Diagnostics) {
	v, diags := Value(attr)
	if diags.HasErrors() {
		return 0, diags
	}
	bad := func(detail string) (uint64, hcl.Diagnostics) {
		return 0, append(diags, Error(attr, summary, detail))
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
		return bad(fmt.Sprintf(outOfRange, n))
	}
	return n, diags
}

// ErrorText formats a cty conversion error, naming the path inside the
// value where it has one.
func ErrorText(err error) string {
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
