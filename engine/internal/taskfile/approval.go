package taskfile

import (
	"fmt"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/convert"

	"github.com/lhengine/lhengine/engine/internal/hcldecode"
	"github.com/lhengine/lhengine/engine/internal/jsonval"
)

// Approval is a step's approval block: before a unit of the step runs, a
// person decides on it (specs/task-language.md, "approval").
type Approval struct {
	// When, Prompt and Subject are evaluated for each unit, with the
	// step's input scope (each, var, step outputs). When nil: every unit
	// asks; Subject nil: the subject is the unit's input.
	When    hcl.Expression
	Prompt  hcl.Expression
	Subject hcl.Expression
	// ExpiresIn is how long a request waits for a decision (0: no
	// expiry); OnExpiry what happens then.
	ExpiresIn time.Duration
	OnExpiry  string
	DeclRange hcl.Range
}

// What an expired approval does.
const (
	OnExpiryReject = "reject" // the unit fails as rejected (or goes to its repair)
	OnExpiryPause  = "pause"  // the task pauses; a resume asks again
)

var approvalSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{
		{Name: "when"},
		{Name: "prompt", Required: true},
		{Name: "subject"},
		{Name: "expires_in"},
		{Name: "on_expiry"},
	},
}

// decodeApprovalBlock decodes a step's approval block.
func decodeApprovalBlock(block *hcl.Block) (*Approval, hcl.Diagnostics) {
	a := &Approval{OnExpiry: OnExpiryReject, DeclRange: block.DefRange}
	content, diags := block.Body.Content(approvalSchema)
	attrs := content.Attributes
	if attr, ok := attrs["when"]; ok {
		a.When = attr.Expr
	}
	if attr, ok := attrs["prompt"]; ok {
		a.Prompt = attr.Expr
	}
	if attr, ok := attrs["subject"]; ok {
		a.Subject = attr.Expr
	}
	diags = append(diags, hcldecode.Fields(attrs,
		hcldecode.Set("expires_in", &a.ExpiresIn, hcldecode.Positive(
			"expires_in is how long a request waits for a decision and must be positive; got %q. Leave it out for no expiry.")),
		hcldecode.Set("on_expiry", &a.OnExpiry, hcldecode.OneOf("Invalid on_expiry",
			fmt.Sprintf("on_expiry must be %q (the unit fails as rejected) or %q (the task pauses until resumed)", OnExpiryReject, OnExpiryPause),
			OnExpiryReject, OnExpiryPause)),
	)...)
	if attr, ok := attrs["on_expiry"]; ok && attrs["expires_in"] == nil {
		// Beside a word on_expiry does not know, not beside a value that
		// is no string.
		if _, d := hcldecode.String(attr); !d.HasErrors() {
			diags = append(diags, &hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  "on_expiry without expires_in",
				Detail:   "on_expiry says what happens when a request expires, so it needs expires_in.",
				Subject:  attr.Range.Ptr(),
				Context:  block.DefRange.Ptr(),
			})
		}
	}
	return a, diags
}

// approvalExprs are the expressions of s's approval block, nil for those
// it leaves out.
func (s *Step) approvalExprs() []hcl.Expression {
	if s.Approval == nil {
		return nil
	}
	return []hcl.Expression{s.Approval.When, s.Approval.Prompt, s.Approval.Subject}
}

// checkApprovalTypes evaluates the approval's expressions in ctx (unknown
// values for what is only known at run time) and reports a when that
// cannot be a bool and a prompt that cannot be a string.
func checkApprovalTypes(a *Approval, ctx func(hcl.Expression) *hcl.EvalContext) hcl.Diagnostics {
	var diags hcl.Diagnostics
	check := func(expr hcl.Expression, want cty.Type, what string) {
		if expr == nil {
			return
		}
		v, d := expr.Value(ctx(expr))
		diags = append(diags, hcldecode.FillSubject(d, expr.Range())...)
		if d.HasErrors() || !v.IsKnown() || want == cty.NilType {
			return
		}
		if _, err := convert.Convert(v, want); err != nil {
			diags = append(diags, &hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  "Invalid approval " + what,
				Detail:   fmt.Sprintf("approval %s must be a %s: %v.", what, want.FriendlyName(), err),
				Subject:  expr.Range().Ptr(),
			})
		}
	}
	check(a.When, cty.Bool, "when")
	check(a.Prompt, cty.String, "prompt")
	check(a.Subject, cty.NilType, "subject")
	return diags
}

// ApprovalAsk is what a step's approval block asks of one unit.
type ApprovalAsk struct {
	Prompt string
	// Subject is the subject as JSON; nil: the unit's input.
	Subject []byte
}

// EvalApproval evaluates s's approval block for one unit in scope. It
// returns nil when the step has none or when is false.
func (s *Step) EvalApproval(scope Scope) (*ApprovalAsk, hcl.Diagnostics) {
	a := s.Approval
	if a == nil {
		return nil, nil
	}
	eval := func(expr hcl.Expression) (cty.Value, hcl.Diagnostics) {
		ctx, b, diags := s.runtimeContext(expr, scope, true)
		if diags.HasErrors() {
			return cty.DynamicVal, diags
		}
		v, d := expr.Value(ctx)
		d = b.AddFailure(d, expr.Range())
		diags = append(diags, hcldecode.FillSubject(d, expr.Range())...)
		if d.HasErrors() {
			return cty.DynamicVal, diags
		}
		v, _ = v.UnmarkDeep()
		return v, diags
	}
	bad := func(expr hcl.Expression, detail string) hcl.Diagnostics {
		return hcl.Diagnostics{{Severity: hcl.DiagError, Summary: "Invalid approval", Detail: detail, Subject: expr.Range().Ptr()}}
	}
	if a.When != nil {
		v, diags := eval(a.When)
		if diags.HasErrors() {
			return nil, diags
		}
		if v.IsNull() || !v.IsWhollyKnown() {
			return nil, bad(a.When, "approval when is null or not known; it must be true or false.")
		}
		b, err := convert.Convert(v, cty.Bool)
		if err != nil {
			return nil, bad(a.When, fmt.Sprintf("approval when must be true or false: %v.", err))
		}
		if b.False() {
			return nil, nil
		}
	}
	ask := new(ApprovalAsk)
	v, diags := eval(a.Prompt)
	if diags.HasErrors() {
		return nil, diags
	}
	p, err := convert.Convert(v, cty.String)
	if err != nil || p.IsNull() || !p.IsWhollyKnown() {
		return nil, bad(a.Prompt, "approval prompt must be a string.")
	}
	ask.Prompt = p.AsString()
	if a.Subject != nil {
		v, diags := eval(a.Subject)
		if diags.HasErrors() {
			return nil, diags
		}
		if !v.IsWhollyKnown() {
			return nil, bad(a.Subject, "approval subject has a part whose value is not known.")
		}
		b, err := jsonval.ToJSON(v)
		if err != nil {
			return nil, bad(a.Subject, "approval subject: "+err.Error())
		}
		ask.Subject = b
	}
	return ask, nil
}
