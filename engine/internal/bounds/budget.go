package bounds

import (
	"errors"
	"fmt"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/function"
)

// Budget is what one evaluation of one expression may still build: the
// functions of an evaluation context made by Context and the for
// expressions evaluated in it charge what they produce. The first charge
// that does not fit is an error; after it, charges give back unknown values
// without a second error, so that a loop around an exhausted budget stops
// cheaply instead of collecting one error per item. Not safe for concurrent
// use: one evaluation runs on one goroutine.
type Budget struct {
	elements int64 // left
	bytes    int64 // left
	failed   error // the first charge that did not fit
}

func newBudget() *Budget {
	return &Budget{elements: MaxEvalElements, bytes: MaxEvalBytes}
}

// charge takes n elements and size bytes from b. It returns an error the
// first time the budget is exceeded, and errExhausted after that.
func (b *Budget) charge(n, size int64) error {
	if b == nil {
		return nil
	}
	if b.failed != nil {
		return errExhausted
	}
	b.elements -= n
	b.bytes -= size
	switch {
	case b.elements < 0:
		b.failed = fmt.Errorf("the expression would build or iterate over more than %d elements in all; the limit for one evaluation is %d", MaxEvalElements, MaxEvalElements)
	case b.bytes < 0:
		b.failed = fmt.Errorf("the expression would build more than %d bytes of strings in all; the limit for one evaluation is %d", MaxEvalBytes, MaxEvalBytes)
	}
	return b.failed
}

// errExhausted is the error of a charge to a budget that was already
// exceeded (and reported).
var errExhausted = errors.New("evaluation budget exhausted")

// Context returns a copy of ctx whose functions are the checked
// functions of the task language (baseFunctions) sharing one fresh budget:
// those named (CalledFunctions of the expression to evaluate), or all of
// them when names is nil or names one the language does not have (so that
// HCL can say "Did you mean"). Give each evaluation of an expression a
// context of its own: the budget is not safe for concurrent use.
func Context(ctx *hcl.EvalContext, names []string) (*hcl.EvalContext, *Budget) {
	b := newBudget()
	out := *ctx
	out.Functions = newFunctions(b, names)
	return &out, b
}

// CalledFunctions returns the names of the functions expr calls, or nil if
// they cannot be found (expr is not native syntax).
func CalledFunctions(expr hcl.Expression) []string {
	node, ok := expr.(hclsyntax.Node)
	if !ok {
		return nil
	}
	names := []string{}
	_ = hclsyntax.VisitAll(node, func(n hclsyntax.Node) hcl.Diagnostics {
		if call, ok := n.(*hclsyntax.FunctionCallExpr); ok {
			names = append(names, call.Name)
		}
		return nil
	})
	return names
}

// AddFailure appends an error on rng when the budget was exceeded but diags
// has no error: try or can swallowed the first one, leaving only unknown
// values behind.
func (b *Budget) AddFailure(diags hcl.Diagnostics, rng hcl.Range) hcl.Diagnostics {
	if b == nil || b.failed == nil || diags.HasErrors() {
		return diags
	}
	return append(diags, &hcl.Diagnostic{
		Severity: hcl.DiagError,
		Summary:  "Evaluation too large",
		Detail:   fmt.Sprintf("The value could not be computed: %s.", b.failed),
		Subject:  rng.Ptr(),
	})
}

// forFunc is the name of the function Instrument wraps the collection of
// every for expression in. The space makes it a name no task file can call.
const forFunc = "for expression"

// Instrument makes every for expression under body check the size of the
// collection it iterates over (at most MaxCollectionElements) and charge it
// to the evaluation's budget, by wrapping the collection in a call of
// forFunc: a plain syntax node, which every walker of the tree (references,
// variables) sees through. It also makes every arithmetic operator refuse a
// number too large to write out (checkedOps). It changes the tree in place,
// so it must run before the tree is shared.
func Instrument(body hcl.Body) {
	b, ok := body.(*hclsyntax.Body)
	if !ok {
		return
	}
	_ = hclsyntax.VisitAll(b, func(n hclsyntax.Node) hcl.Diagnostics {
		switch e := n.(type) {
		case *hclsyntax.TemplateExpr:
			for i, part := range e.Parts {
				if _, literal := part.(*hclsyntax.LiteralValueExpr); literal || isCall(part, templatePartFunc) {
					continue
				}
				e.Parts[i] = wrapCall(templatePartFunc, part)
			}
		case *hclsyntax.BinaryOpExpr:
			if op, ok := checkedOps[e.Op]; ok {
				e.Op = op
			}
		case *hclsyntax.UnaryOpExpr:
			if op, ok := checkedOps[e.Op]; ok {
				e.Op = op
			}
		}
		fe, ok := n.(*hclsyntax.ForExpr)
		if !ok {
			return nil
		}
		if !isCall(fe.CollExpr, forFunc) {
			fe.CollExpr = wrapCall(forFunc, fe.CollExpr)
		}
		return nil
	})
}

func isCall(expr hclsyntax.Expression, name string) bool {
	call, ok := expr.(*hclsyntax.FunctionCallExpr)
	return ok && call.Name == name
}

// wrapCall returns a call of the function name with expr as its argument,
// with expr's range.
func wrapCall(name string, expr hclsyntax.Expression) hclsyntax.Expression {
	rng := expr.Range()
	return &hclsyntax.FunctionCallExpr{
		Name:            name,
		Args:            []hclsyntax.Expression{expr},
		NameRange:       rng,
		OpenParenRange:  rng,
		CloseParenRange: rng,
	}
}

// templatePartFunc is the name of the function Instrument wraps every
// interpolated part of a template in, so that the text the template is
// built from is charged to the budget and a number too large to write out
// is refused before the template converts it to text.
const templatePartFunc = "template part"

// templatePart returns the value it is given, after charging the bytes of
// a string to b, and refusing a number too large to write out.
func templatePart(b *Budget) function.Function {
	return passThrough("Checks and charges an interpolated part of a template.", "part", b, nil,
		func(uv cty.Value) error {
			switch uv.Type() {
			case cty.Number:
				if NumberTooLarge(uv.AsBigFloat()) {
					return fmt.Errorf("the template would write out a number with an exponent beyond %d", MaxNumberExponent)
				}
			case cty.String:
				return b.charge(0, int64(len(uv.AsString())))
			}
			return nil
		})
}

// passThrough returns a function of one argument, of any type, that returns
// it unchanged once check accepts its unmarked value. An unknown or null
// argument, or one that applies (when not nil) refuses, is not checked;
// after b is exhausted, one that would be checked gives an unknown value
// instead, without a second error.
func passThrough(description, param string, b *Budget, applies func(uv cty.Value) bool, check func(uv cty.Value) error) function.Function {
	return function.New(&function.Spec{
		Description: description,
		Params: []function.Parameter{{
			Name:             param,
			Type:             cty.DynamicPseudoType,
			AllowUnknown:     true,
			AllowDynamicType: true,
			AllowNull:        true,
			AllowMarked:      true,
		}},
		Type: func(args []cty.Value) (cty.Type, error) { return args[0].Type(), nil },
		Impl: func(args []cty.Value, retType cty.Type) (cty.Value, error) {
			v := args[0]
			uv, _ := v.Unmark()
			if !uv.IsKnown() || uv.IsNull() || (applies != nil && !applies(uv)) {
				return v, nil
			}
			if b != nil && b.failed != nil {
				return cty.UnknownVal(retType), nil
			}
			if err := check(uv); err != nil {
				return cty.NilVal, err
			}
			return v, nil
		},
	})
}

// checkedOps are HCL's arithmetic operators, each refusing a result too
// large to write out as text (NumberTooLarge): an operand converted from a
// string, such as "1e99999999" * 1, is not a literal that CheckSource saw.
var checkedOps = func() map[*hclsyntax.Operation]*hclsyntax.Operation {
	ops := map[*hclsyntax.Operation]*hclsyntax.Operation{}
	for _, op := range []*hclsyntax.Operation{
		hclsyntax.OpAdd, hclsyntax.OpSubtract, hclsyntax.OpMultiply,
		hclsyntax.OpDivide, hclsyntax.OpModulo, hclsyntax.OpNegate,
	} {
		ops[op] = &hclsyntax.Operation{Impl: checkedOp(op.Impl), Type: op.Type}
	}
	return ops
}()

func checkedOp(f function.Function) function.Function {
	return function.New(&function.Spec{
		Params:   f.Params(),
		VarParam: f.VarParam(),
		Type:     f.ReturnTypeForValues,
		Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
			v, err := f.Call(args)
			if err != nil {
				return v, err
			}
			if uv, _ := v.Unmark(); uv.Type() == cty.Number && uv.IsKnown() && !uv.IsNull() && NumberTooLarge(uv.AsBigFloat()) {
				return cty.NilVal, fmt.Errorf("the result is a number with an exponent beyond %d, too large to write out", MaxNumberExponent)
			}
			return v, nil
		},
	})
}

// forCollectionFunc returns the collection it is given, after checking its
// size and charging it to b (Instrument).
func forCollectionFunc(b *Budget) function.Function {
	return passThrough("Checks and charges the collection of a for expression.", "collection", b, cty.Value.CanIterateElements,
		func(uv cty.Value) error {
			n := uv.LengthInt()
			if n > MaxCollectionElements {
				return fmt.Errorf("the for expression would iterate over %d elements; the limit is %d", n, MaxCollectionElements)
			}
			if err := b.charge(int64(n), 0); err != nil {
				return fmt.Errorf("the for expression iterates over %d elements, and with them %w", n, err)
			}
			return nil
		})
}
