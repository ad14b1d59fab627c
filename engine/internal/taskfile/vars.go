package taskfile

import (
	"fmt"
	"sort"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/ext/typeexpr"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/convert"

	"github.com/lhengine/lhengine/engine/internal/bounds"
	"github.com/lhengine/lhengine/engine/internal/hcldecode"
)

// Vars resolves the value of every declared variable. given holds raw --var
// strings by name. For a variable of type string, or without a type, the raw
// text is the value as it is. For any other type the text is parsed as an HCL
// expression (a literal: no references, no function calls) and converted to
// the type, as Terraform does: --var n=3, --var 'pages=["a","b"]'.
// A variable not given takes its default.
//
// A name that is not declared, a required variable without a value, and a
// value that does not parse or convert are error diagnostics, on the variable
// block where there is one. The map holds every declared variable unless
// there are errors.
func (t *Task) Vars(given map[string]string) (map[string]cty.Value, hcl.Diagnostics) {
	var diags hcl.Diagnostics

	var unknown []string
	for name := range given {
		if t.Variable(name) == nil {
			unknown = append(unknown, name)
		}
	}
	sort.Strings(unknown)
	names := make([]string, len(t.Variables))
	for i, v := range t.Variables {
		names[i] = v.Name
	}
	for _, name := range unknown {
		detail := fmt.Sprintf("A value was given for %q, but task %q declares no variable of that name.", name, t.Name)
		if len(names) == 0 {
			detail += " It declares no variables."
		} else {
			detail += hcldecode.DidYouMean(name, names)
		}
		diags = append(diags, &hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  "Value for undeclared variable",
			Detail:   detail,
		})
	}

	vals := make(map[string]cty.Value, len(t.Variables))
	for _, v := range t.Variables {
		raw, ok := given[v.Name]
		if !ok {
			if v.Required() {
				diags = append(diags, &hcl.Diagnostic{
					Severity: hcl.DiagError,
					Summary:  "No value for required variable",
					Detail:   fmt.Sprintf("Variable %q has no default, so it needs a value: --var %s=VALUE.", v.Name, v.Name),
					Subject:  v.DeclRange.Ptr(),
				})
				continue
			}
			vals[v.Name] = v.Default
			continue
		}
		val, d := v.parseValue(raw)
		diags = append(diags, d...)
		vals[v.Name] = val
	}
	if diags.HasErrors() {
		return nil, diags
	}
	return vals, diags
}

// parseValue turns a raw --var string into a value of the variable's type.
func (v *Variable) parseValue(raw string) (cty.Value, hcl.Diagnostics) {
	invalid := func(detail string) (cty.Value, hcl.Diagnostics) {
		return cty.DynamicVal, hcl.Diagnostics{{
			Severity: hcl.DiagError,
			Summary:  "Invalid value for variable",
			Detail:   detail,
			Subject:  v.DeclRange.Ptr(),
		}}
	}
	if v.Type == cty.String || v.Type == cty.DynamicPseudoType {
		return cty.StringVal(raw), nil
	}
	typeName := typeexpr.TypeString(v.Type)
	if problem := bounds.CheckExpression([]byte(raw)); problem != "" {
		return invalid(fmt.Sprintf("The value given for %q %s, which is more than lhengine reads.", v.Name, problem))
	}
	expr, diags := hclsyntax.ParseExpression([]byte(raw), "--var "+v.Name, hcl.InitialPos)
	if diags.HasErrors() {
		return invalid(fmt.Sprintf("The value given for %q, %q, is not an HCL value: %s.", v.Name, raw, diagText(diags)))
	}
	if len(expr.Variables()) == 0 && !literal(expr) {
		return invalid(fmt.Sprintf("The value given for %q, %q, is not a literal value of type %s: a --var value is read as written, with nothing computed in it (no operator, function call, for expression or interpolation).", v.Name, raw, typeName))
	}
	if len(expr.Variables()) > 0 {
		if v.Type.IsPrimitiveType() {
			return invalid(fmt.Sprintf("The value given for %q, %q, is not a %s.", v.Name, raw, typeName))
		}
		return invalid(fmt.Sprintf("The value given for %q, %q, is not a literal value of type %s; strings inside it need quotes, as in [\"a\", \"b\"].", v.Name, raw, typeName))
	}
	val, diags := expr.Value(nil)
	if diags.HasErrors() {
		return invalid(fmt.Sprintf("The value given for %q, %q, is not a literal value of type %s: %s.", v.Name, raw, typeName, diagText(diags)))
	}
	conv, err := convert.Convert(val, v.Type)
	if err != nil {
		return invalid(fmt.Sprintf("The value given for %q, %q, is not compatible with the type constraint %s: %s.", v.Name, raw, typeName, hcldecode.ErrorText(err)))
	}
	if bounds.HoldsHugeNumber(conv) { // converted from a string
		return invalid(fmt.Sprintf("The value given for %q holds a number with an exponent beyond %d, which is more than lhengine reads.", v.Name, bounds.MaxNumberExponent))
	}
	return conv, nil
}

// literal reports whether a --var value is written as a literal: numbers,
// bools, null, quoted strings without interpolation, a minus before a
// number, and lists and objects of those. Nothing else is evaluated: an
// operation or an interpolation could compute a value far larger than its
// text ("${"1e99999999" * 1}" writes out a hundred million digits), and a
// --var, which may come over the API, is not a task file's expression with
// its evaluation budget.
func literal(expr hclsyntax.Expression) bool {
	switch e := expr.(type) {
	case *hclsyntax.LiteralValueExpr:
		return true
	case *hclsyntax.TemplateExpr:
		return e.IsStringLiteral()
	case *hclsyntax.UnaryOpExpr:
		_, ok := e.Val.(*hclsyntax.LiteralValueExpr)
		return e.Op == hclsyntax.OpNegate && ok
	case *hclsyntax.TupleConsExpr:
		for _, x := range e.Exprs {
			if !literal(x) {
				return false
			}
		}
		return true
	case *hclsyntax.ObjectConsExpr:
		for _, it := range e.Items {
			key, ok := it.KeyExpr.(*hclsyntax.ObjectConsKeyExpr)
			if !ok || !literal(it.ValueExpr) {
				return false
			}
			if hcl.ExprAsKeyword(key.Wrapped) == "" && !literal(key.Wrapped) {
				return false
			}
		}
		return true
	}
	return false
}

// diagText joins the summaries and details of error diagnostics from a
// --var value, which has no file to point into.
func diagText(diags hcl.Diagnostics) string {
	var parts []string
	for _, d := range diags.Errs() {
		parts = append(parts, d.Error())
	}
	return strings.Join(parts, "; ")
}
