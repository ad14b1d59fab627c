package bounds

import (
	"fmt"
	"math"
	"regexp"
	"strings"
	"unicode/utf8"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/ext/customdecode"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/function"
)

// estimate returns how many elements (of a collection) and bytes (of
// strings) a function would build from args, all known and unmarked,
// without building it. An error is a reason to refuse the call; for
// arguments the function itself would refuse, an estimate returns zeros and
// lets the function say what is wrong.
type estimate func(args []cty.Value) (elements, bytes int64, err error)

// estimates are the functions whose result can be much larger than their
// arguments, so that its size must be known before it is built. Every other
// function's result is charged after it is built.
var estimates = map[string]estimate{
	"setproduct": estimateSetProduct,
	"range":      estimateRange,
	"flatten":    estimateFlatten,
	"concat":     estimateConcat,
	"join":       estimateJoin,
	"format":     estimateFormat,
	"formatlist": estimateFormatList,
	"indent":     estimateIndent,
	"replace":    estimateReplace,
	"split":      estimateSplit,
	"regexall":   estimateRegexAll,
	"jsondecode": estimateJSONDecode,
	"jsonencode": estimateJSONEncode,
	"parseint":   estimateNumberText,
	"tonumber":   estimateNumberText,
}

// checkedFunc wraps f, called name, so that a call refuses a result of more
// than MaxCollectionElements elements or MaxStringBytes bytes, and charges
// what it builds to b. With est the size is known before f runs (even
// before f computes its result type); without, it is checked on f's result,
// which is then no larger than its arguments.
func checkedFunc(name string, f function.Function, est estimate, b *Budget) function.Function {
	params := f.Params()
	for i := range params {
		// Unknown arguments reach Impl, which hands them to f, so that f
		// gives its own (refined) unknown result.
		params[i].AllowUnknown = true
	}
	var varParam *function.Parameter
	if vp := f.VarParam(); vp != nil {
		p := *vp
		p.AllowUnknown = true
		varParam = &p
	}
	return function.New(&function.Spec{
		Description: f.Description(),
		Params:      params,
		VarParam:    varParam,
		Type: func(args []cty.Value) (cty.Type, error) {
			// Before f's own Type, which for some functions (flatten)
			// builds the result to find its type.
			if est != nil && whollyKnown(args) {
				plain := make([]cty.Value, len(args))
				for i, a := range args {
					if a.ContainsMarked() {
						a, _ = a.UnmarkDeep()
					}
					plain[i] = a
				}
				n, size, err := est(plain)
				if err == nil {
					err = checkSize(name, n, size)
				}
				if err != nil {
					return cty.NilType, err
				}
			}
			return f.ReturnTypeForValues(args)
		},
		Impl: func(args []cty.Value, retType cty.Type) (cty.Value, error) {
			if b != nil && b.failed != nil {
				return cty.UnknownVal(retType), nil
			}
			v, err := f.Call(args)
			if err != nil {
				return v, err
			}
			if uv, _ := v.Unmark(); uv.Type() == cty.Number && uv.IsKnown() && !uv.IsNull() && NumberTooLarge(uv.AsBigFloat()) {
				return cty.NilVal, fmt.Errorf("%s would produce a number with an exponent beyond %d", name, MaxNumberExponent)
			}
			n, size := resultSize(v)
			if err := checkSize(name, n, size); err != nil {
				return cty.NilVal, err
			}
			if err := b.charge(n, size); err != nil {
				return cty.NilVal, err
			}
			return v, nil
		},
	})
}

// checkSize refuses a result of n elements or size bytes over the limits.
func checkSize(name string, n, size int64) error {
	switch {
	case n > MaxCollectionElements:
		return fmt.Errorf("%s would produce %d elements; the limit is %d", name, n, MaxCollectionElements)
	case size > MaxStringBytes:
		return fmt.Errorf("%s would produce %d bytes of strings; the limit is %d", name, size, MaxStringBytes)
	}
	return nil
}

// checkedTry wraps try or can, whose arguments are expressions evaluated
// with the functions of the same budget, so that a budget exceeded inside
// is an error of the call rather than a reason to fall back: a value too
// large to compute is not a mistake to recover from.
//
// Each argument is evaluated at most once per call (evalOnce): HCL's try
// evaluates its arguments once to find its result type and again for its
// value, so that each level of nested tries doubled the evaluations of the
// innermost argument, and their charges to the budget. The result type is
// therefore left dynamic until the call.
func checkedTry(f function.Function, b *Budget) function.Function {
	return function.New(&function.Spec{
		Description: f.Description(),
		Params:      f.Params(),
		VarParam:    f.VarParam(),
		Type:        function.StaticReturnType(cty.DynamicPseudoType),
		Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
			once := make([]cty.Value, len(args))
			for i, a := range args {
				c := customdecode.ExpressionClosureFromVal(a)
				once[i] = customdecode.ExpressionClosureVal(&customdecode.ExpressionClosure{
					Expression:  &evalOnce{Expression: c.Expression},
					EvalContext: c.EvalContext,
				})
			}
			v, err := f.Call(once)
			if b != nil && b.failed != nil {
				return cty.NilVal, b.failed
			}
			return v, err
		},
	})
}

// evalOnce is an expression that evaluates the expression it wraps on its
// first Value call and gives the same result to every later one.
type evalOnce struct {
	hcl.Expression
	done  bool
	val   cty.Value
	diags hcl.Diagnostics
}

func (e *evalOnce) Value(ctx *hcl.EvalContext) (cty.Value, hcl.Diagnostics) {
	if !e.done {
		e.val, e.diags = e.Expression.Value(ctx)
		e.done = true
	}
	return e.val, e.diags
}

func whollyKnown(args []cty.Value) bool {
	for _, a := range args {
		if !a.IsWhollyKnown() {
			return false
		}
	}
	return true
}

// resultSize is the size of a built result: the length of a collection or
// of a string.
func resultSize(v cty.Value) (elements, bytes int64) {
	v, _ = v.Unmark()
	if !v.IsKnown() || v.IsNull() {
		return 0, 0
	}
	switch ty := v.Type(); {
	case ty == cty.String:
		return 0, int64(len(v.AsString()))
	case v.CanIterateElements():
		return int64(v.LengthInt()), 0
	}
	return 0, 0
}

// sat adds and multiplies sizes, saturating at math.MaxInt64.
func satAdd(a, b int64) int64 {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

func satMul(a, b int64) int64 {
	if a == 0 || b == 0 {
		return 0
	}
	if a > math.MaxInt64/b {
		return math.MaxInt64
	}
	return a * b
}

func length(v cty.Value) int64 {
	if v.IsNull() || !v.CanIterateElements() {
		return 0
	}
	return int64(v.LengthInt())
}

func str(v cty.Value) string {
	if v.IsNull() || v.Type() != cty.String {
		return ""
	}
	return v.AsString()
}

func estimateSetProduct(args []cty.Value) (int64, int64, error) {
	if len(args) == 0 {
		return 0, 0, nil
	}
	n := int64(1)
	for _, a := range args {
		n = satMul(n, length(a))
	}
	return n, 0, nil
}

func estimateFlatten(args []cty.Value) (int64, int64, error) {
	var count func(v cty.Value) int64
	count = func(v cty.Value) int64 {
		ty := v.Type()
		if v.IsNull() || !(ty.IsListType() || ty.IsTupleType() || ty.IsSetType()) {
			return 1
		}
		if (ty.IsListType() || ty.IsSetType()) && !isSequence(ty.ElementType()) && ty.ElementType() != cty.DynamicPseudoType {
			return int64(v.LengthInt()) // elements that are not flattened further
		}
		var n int64
		for it := v.ElementIterator(); it.Next(); {
			_, e := it.Element()
			n = satAdd(n, count(e))
		}
		return n
	}
	if len(args) != 1 {
		return 0, 0, nil
	}
	return count(args[0]), 0, nil
}

func isSequence(ty cty.Type) bool {
	return ty.IsListType() || ty.IsTupleType() || ty.IsSetType()
}

func estimateConcat(args []cty.Value) (int64, int64, error) {
	var n int64
	for _, a := range args {
		n = satAdd(n, length(a))
	}
	return n, 0, nil
}

func estimateJoin(args []cty.Value) (int64, int64, error) {
	if len(args) == 0 {
		return 0, 0, nil
	}
	sep := int64(len(str(args[0])))
	var n, size int64
	for _, list := range args[1:] {
		if list.IsNull() || !list.CanIterateElements() {
			continue
		}
		for it := list.ElementIterator(); it.Next(); {
			_, e := it.Element()
			if n > 0 {
				size = satAdd(size, sep)
			}
			size = satAdd(size, int64(len(str(e))))
			n++
		}
	}
	return 0, size, nil
}

// formatNumber finds the numbers in a format string (widths, precisions and
// argument indexes), of which the largest bounds the padding of one verb.
var formatNumber = regexp.MustCompile(`[0-9]+`)

// formatBound is an upper bound on the bytes of format(spec, args) where no
// argument is longer than argBytes.
func formatBound(spec string, argBytes int64) int64 {
	verbs := int64(strings.Count(spec, "%"))
	var width int64
	for _, m := range formatNumber.FindAllString(spec, -1) {
		if len(m) > 18 {
			return math.MaxInt64
		}
		var w int64
		fmt.Sscan(m, &w)
		width = max(width, w)
	}
	return satAdd(int64(len(spec)), satMul(verbs, satAdd(argBytes, width)))
}

// formatArgBytes bounds the bytes one verb of format writes for v: a string
// as it is, anything else as JSON.
func formatArgBytes(v cty.Value) (int64, error) {
	if v.Type() == cty.String && !v.IsNull() {
		return int64(len(v.AsString())), nil
	}
	return JSONBytes(v, MaxStringBytes+1)
}

func estimateFormat(args []cty.Value) (int64, int64, error) {
	if len(args) == 0 {
		return 0, 0, nil
	}
	var argBytes int64
	for _, a := range args[1:] {
		n, err := formatArgBytes(a)
		if err != nil {
			return 0, 0, err
		}
		argBytes = max(argBytes, n)
	}
	return 0, formatBound(str(args[0]), argBytes), nil
}

func estimateFormatList(args []cty.Value) (int64, int64, error) {
	if len(args) == 0 {
		return 0, 0, nil
	}
	n := int64(1)
	var argBytes int64
	for _, a := range args[1:] {
		ty := a.Type()
		if !a.IsNull() && (ty.IsListType() || ty.IsTupleType()) {
			n = max(n, length(a))
			for it := a.ElementIterator(); it.Next(); {
				_, e := it.Element()
				n, err := formatArgBytes(e)
				if err != nil {
					return 0, 0, err
				}
				argBytes = max(argBytes, n)
			}
			continue
		}
		n, err := formatArgBytes(a)
		if err != nil {
			return 0, 0, err
		}
		argBytes = max(argBytes, n)
	}
	return n, satMul(n, formatBound(str(args[0]), argBytes)), nil
}

func estimateIndent(args []cty.Value) (int64, int64, error) {
	if len(args) != 2 || args[0].IsNull() || args[1].IsNull() {
		return 0, 0, nil
	}
	spaces, _ := args[0].AsBigFloat().Int64()
	s := str(args[1])
	return 0, satAdd(int64(len(s)), satMul(max(spaces, 0), int64(strings.Count(s, "\n")))), nil
}

func estimateReplace(args []cty.Value) (int64, int64, error) {
	if len(args) != 3 {
		return 0, 0, nil
	}
	s, sub, repl := str(args[0]), str(args[1]), str(args[2])
	if len(sub) > 1 && sub[0] == '/' && sub[len(sub)-1] == '/' {
		re, err := regexp.Compile(sub[1 : len(sub)-1])
		if err != nil {
			return 0, 0, nil
		}
		matches := int64(len(re.FindAllStringIndex(s, MaxCollectionElements+1)))
		if matches > MaxCollectionElements {
			return 0, math.MaxInt64, nil
		}
		// Each match becomes the replacement, whose $ references each
		// expand to at most the whole string.
		each := satAdd(int64(len(repl)), satMul(int64(strings.Count(repl, "$")), int64(len(s))))
		return 0, satAdd(int64(len(s)), satMul(matches, each)), nil
	}
	var count int64
	if sub == "" {
		count = int64(utf8.RuneCountInString(s)) + 1
	} else {
		count = int64(strings.Count(s, sub))
	}
	return 0, satAdd(int64(len(s)), satMul(count, int64(len(repl)))), nil
}

func estimateSplit(args []cty.Value) (int64, int64, error) {
	if len(args) != 2 {
		return 0, 0, nil
	}
	sep, s := str(args[0]), str(args[1])
	if sep == "" {
		return int64(utf8.RuneCountInString(s)), 0, nil
	}
	return int64(strings.Count(s, sep)) + 1, 0, nil
}

func estimateRegexAll(args []cty.Value) (int64, int64, error) {
	if len(args) != 2 {
		return 0, 0, nil
	}
	re, err := regexp.Compile(str(args[0]))
	if err != nil {
		return 0, 0, nil
	}
	return int64(len(re.FindAllStringIndex(str(args[1]), MaxCollectionElements+1))), 0, nil
}

func estimateJSONDecode(args []cty.Value) (int64, int64, error) {
	if len(args) == 1 {
		if problem, _ := JSONProblem([]byte(str(args[0]))); problem != "" {
			return 0, 0, fmt.Errorf("the JSON text %s", problem)
		}
	}
	return 0, 0, nil
}

// estimateNumberText refuses to parse a string longer than MaxNumberLength
// as a number: parsing takes time quadratic in the digits, and the number
// could not be written out again in reasonable time.
func estimateNumberText(args []cty.Value) (int64, int64, error) {
	if len(args) > 0 && args[0].Type() == cty.String && !args[0].IsNull() {
		if s := args[0].AsString(); len(s) > MaxNumberLength {
			return 0, 0, fmt.Errorf("the string is %d characters long; a number may have at most %d", len(s), MaxNumberLength)
		}
	}
	return 0, 0, nil
}

func estimateJSONEncode(args []cty.Value) (int64, int64, error) {
	if len(args) != 1 {
		return 0, 0, nil
	}
	n, err := JSONBytes(args[0], MaxStringBytes+1)
	return 0, n, err
}
