package taskfile

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"math/big"
	"unicode/utf8"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/function"
)

// Limits on the size of what a task file says and of what its expressions
// compute (specs/task-language.md, "Size and depth limits"). They keep a
// hostile or mistaken task file from exhausting the stack or the memory of
// the process that validates or runs it.
const (
	// MaxSourceBytes bounds a task file.
	MaxSourceBytes = 1 << 20 // 1MiB

	// MaxNestingDepth bounds how deeply a task file, or a --var value, nests:
	// brackets, braces, parentheses, template interpolations and directives,
	// and operators, indexes and attribute accesses chained in one
	// expression each count one level. It is checked on the tokens, before
	// the parser (which recurses once per level) sees them.
	MaxNestingDepth = 100

	// MaxJSONDepth bounds how deeply a JSON value (a step output, a fan-out
	// item, the argument of jsondecode) nests.
	MaxJSONDepth = 1000

	// MaxNumberExponent bounds the decimal exponent of a number, and
	// MaxNumberLength the text of a number literal (in a task file, a --var
	// value or JSON): writing a number as text, and parsing it, take time
	// quadratic in its digits, and 1e100000000 is a hundred million of them.
	// Every number within MaxNumberExponent is written by ToJSON in fewer
	// than MaxNumberLength characters, so that FromJSON reads it back.
	MaxNumberExponent = 10000
	MaxNumberLength   = MaxNumberExponent + 1000

	// MaxJSONBytes bounds the JSON encoding of a value (a step's input, a
	// fan-out item) built by ToJSON.
	MaxJSONBytes = 64 << 20 // 64MiB

	// MaxCollectionElements bounds the elements of one collection that a
	// function builds or a for expression iterates over.
	MaxCollectionElements = 1_000_000

	// MaxStringBytes bounds one string that a function builds.
	MaxStringBytes = 16 << 20 // 16MiB

	// MaxEvalElements bounds the elements that functions and for
	// expressions build or iterate over, together, in one evaluation of one
	// expression (a step's input for one item, or its for_each), so that
	// nesting them cannot multiply their sizes.
	MaxEvalElements = 2 * MaxCollectionElements

	// MaxEvalBytes bounds the bytes of the strings that functions build, together,
	// in one evaluation of one expression.
	MaxEvalBytes = 4 * MaxStringBytes
)

// checkSource reports a task file larger than MaxSourceBytes or nested more
// deeply than MaxNestingDepth, at the place where it crosses the limit. It
// must pass before src is given to the HCL parser.
func checkSource(filename string, src []byte) hcl.Diagnostics {
	if len(src) > MaxSourceBytes {
		pos := posAt(src, MaxSourceBytes)
		return hcl.Diagnostics{{
			Severity: hcl.DiagError,
			Summary:  "Task file too large",
			Detail:   fmt.Sprintf("The task file is %d bytes; the limit is %d (1MiB). Move large data out of the task file: pass it as a variable or have a step produce it.", len(src), MaxSourceBytes),
			Subject:  &hcl.Range{Filename: filename, Start: pos, End: pos},
		}}
	}
	tokens, _ := hclsyntax.LexConfig(src, filename, hcl.InitialPos)
	if tok := largeNumber(tokens); tok != nil {
		return hcl.Diagnostics{{
			Severity: hcl.DiagError,
			Summary:  "Number too large",
			Detail:   numberDetail,
			Subject:  tok.Range.Ptr(),
		}}
	}
	if tok := tooDeep(tokens, true); tok != nil {
		return hcl.Diagnostics{{
			Severity: hcl.DiagError,
			Summary:  "Nesting too deep",
			Detail:   nestingDetail,
			Subject:  tok.Range.Ptr(),
		}}
	}
	return nil
}

// numberDetail explains a "Number too large" diagnostic.
var numberDetail = fmt.Sprintf("A number literal may be at most %d characters long, with an exponent of at most %d; "+
	"a larger one would take too long to write out as text.", MaxNumberLength, MaxNumberExponent)

// largeNumber returns the first number literal among tokens that
// numberTextTooLarge refuses, or nil.
func largeNumber(tokens hclsyntax.Tokens) *hclsyntax.Token {
	for i := range tokens {
		if tokens[i].Type == hclsyntax.TokenNumberLit && numberTextTooLarge(tokens[i].Bytes) {
			return &tokens[i]
		}
	}
	return nil
}

// numberTextTooLarge reports whether the number literal text is longer than
// MaxNumberLength or has an exponent beyond MaxNumberExponent.
func numberTextTooLarge(text []byte) bool {
	return len(text) > MaxNumberLength || numberTextExponent(text) > MaxNumberExponent
}

// numberTextExponent is the magnitude of the exponent of the number literal
// text (after "e" or "E"; 0 without one), or MaxNumberExponent+1 if it is
// beyond MaxNumberExponent.
func numberTextExponent(text []byte) int {
	i := bytes.IndexAny(text, "eE")
	if i < 0 {
		return 0
	}
	exp := 0
	for _, c := range text[i+1:] {
		if c >= '0' && c <= '9' {
			exp = exp*10 + int(c-'0')
			if exp > MaxNumberExponent {
				return MaxNumberExponent + 1
			}
		}
	}
	return exp
}

// numberTextMayBeHuge reports whether the number literal text may be a
// number that numberTooLarge refuses. One that it clears is not: its
// value, if not zero, lies between 10^-(len(text)+exponent) and
// 10^(len(text)+exponent).
func numberTextMayBeHuge(text []byte) bool {
	return len(text)+numberTextExponent(text) > MaxNumberExponent
}

// holdsHugeNumber reports whether v holds, anywhere, a number that
// numberTooLarge refuses.
func holdsHugeNumber(v cty.Value) bool {
	_, err := jsonBytes(v, math.MaxInt64)
	return err == errHugeNumber
}

// maxBinaryExponent is MaxNumberExponent in powers of two.
const maxBinaryExponent = MaxNumberExponent*3322/1000 + 1

// numberTooLarge reports whether f is too large (or too small) to be written
// out as text in reasonable time: its decimal exponent is beyond
// MaxNumberExponent. A literal that numberTextTooLarge accepts may still
// give such a number ("1" and 10,500 zeros); it is refused where it would
// be written out.
func numberTooLarge(f *big.Float) bool {
	if f.IsInf() {
		return false
	}
	exp := f.MantExp(nil)
	return exp > maxBinaryExponent || exp < -maxBinaryExponent
}

// nestingDetail explains a "Nesting too deep" diagnostic.
var nestingDetail = fmt.Sprintf("This is nested more than %d levels deep, counting the enclosing blocks, "+
	"brackets, braces, parentheses, template interpolations and directives, and the operators, "+
	"indexes and attribute accesses chained in one expression; the limit is %d. "+
	"Split the expression into smaller ones, or have a step build the value.", MaxNestingDepth, MaxNestingDepth)

// checkExpressionSource says why a standalone expression (a --var value)
// is refused before it is parsed: larger than MaxSourceBytes, nested more
// deeply than MaxNestingDepth, or holding a number literal too large. ""
// means it may be parsed.
func checkExpressionSource(src []byte) string {
	if len(src) > MaxSourceBytes {
		return fmt.Sprintf("is larger than %d bytes", MaxSourceBytes)
	}
	tokens, _ := hclsyntax.LexExpression(src, "", hcl.InitialPos)
	if largeNumber(tokens) != nil {
		return fmt.Sprintf("holds a number more than %d characters long or with an exponent beyond %d", MaxNumberLength, MaxNumberExponent)
	}
	if tooDeep(tokens, false) != nil {
		return fmt.Sprintf("is nested more than %d levels deep", MaxNestingDepth)
	}
	return ""
}

// posAt returns the position of byte offset off in src, counting columns in
// characters as HCL does (roughly: in runes).
func posAt(src []byte, off int) hcl.Pos {
	line := 1 + bytes.Count(src[:off], []byte("\n"))
	start := bytes.LastIndexByte(src[:off], '\n') + 1
	return hcl.Pos{Line: line, Column: 1 + utf8.RuneCount(src[start:off]), Byte: off}
}

// nestFrame is one open bracket, brace, parenthesis or template sequence
// while tooDeep scans, with the operators chained inside it since its last
// separator.
type nestFrame struct {
	open hclsyntax.TokenType
	ops  int
}

// tooDeep returns the first token at which tokens nest more deeply than
// MaxNestingDepth, or nil. It follows the recursion of the HCL parser and
// of the expression tree it builds: every open bracket, brace, parenthesis,
// "${" and "%{", every open if or for directive, and every operator, "?",
// ".", and index or splat "[" after an operand count one level, until the
// bracket closes or a separator (a comma, "=", or a newline where newlines
// end an item) ends the chain. It over-counts rather than under-counts: a
// file it accepts cannot make the parser or the evaluator recurse more than
// a few frames per level. newlinesEnd says whether a newline at the top
// level ends an item (true for a file, false for a standalone expression).
func tooDeep(tokens hclsyntax.Tokens, newlinesEnd bool) *hclsyntax.Token {
	stack := []nestFrame{{open: hclsyntax.TokenNil}}
	depth := 0 // open frames after the first, plus all ops, plus open directives
	directives := 0
	afterOperand := false // the last token ends an operand, so "[" is an index
	afterControl := false // the last tokens are "%{" and maybe "~"

	reset := func() {
		top := &stack[len(stack)-1]
		depth -= top.ops
		top.ops = 0
	}
	newlineEnds := func() bool {
		top := stack[len(stack)-1].open
		return top == hclsyntax.TokenOBrace || (top == hclsyntax.TokenNil && newlinesEnd)
	}
	for i := range tokens {
		tok := &tokens[i]
		top := &stack[len(stack)-1]
		control := false
		switch tok.Type {
		case hclsyntax.TokenComment:
			// A line comment takes the newline that ends it.
			if bytes.HasSuffix(tok.Bytes, []byte("\n")) && newlineEnds() {
				reset()
				afterOperand = false
			}
			continue
		case hclsyntax.TokenNewline:
			if newlineEnds() {
				reset()
				afterOperand = false
			}
			continue
		case hclsyntax.TokenOBrack, hclsyntax.TokenOBrace, hclsyntax.TokenOParen,
			hclsyntax.TokenTemplateInterp, hclsyntax.TokenTemplateControl:
			if tok.Type == hclsyntax.TokenOBrack && afterOperand {
				top.ops++
				depth++
			}
			stack = append(stack, nestFrame{open: tok.Type})
			depth++
			control = tok.Type == hclsyntax.TokenTemplateControl
		case hclsyntax.TokenCBrack, hclsyntax.TokenCBrace, hclsyntax.TokenCParen, hclsyntax.TokenTemplateSeqEnd:
			// A closer that does not match is a syntax error the parser
			// reports; it closes nothing here, so it cannot hide depth.
			if len(stack) > 1 && closes(top.open, tok.Type) {
				depth -= 1 + top.ops
				stack = stack[:len(stack)-1]
			}
		case hclsyntax.TokenComma, hclsyntax.TokenEqual:
			reset()
		case hclsyntax.TokenPlus, hclsyntax.TokenMinus, hclsyntax.TokenStar, hclsyntax.TokenSlash,
			hclsyntax.TokenPercent, hclsyntax.TokenAnd, hclsyntax.TokenOr, hclsyntax.TokenBang,
			hclsyntax.TokenEqualOp, hclsyntax.TokenNotEqual, hclsyntax.TokenLessThan,
			hclsyntax.TokenLessThanEq, hclsyntax.TokenGreaterThan, hclsyntax.TokenGreaterThanEq,
			hclsyntax.TokenQuestion, hclsyntax.TokenDot:
			top.ops++
			depth++
		case hclsyntax.TokenBitwiseNot: // "~", a strip marker after "%{"
			control = afterControl
		case hclsyntax.TokenIdent:
			if afterControl {
				switch string(tok.Bytes) {
				case "if", "for":
					directives++
					depth++
				case "endif", "endfor":
					if directives > 0 {
						directives--
						depth--
					}
				}
			}
		}
		afterControl = control
		afterOperand = endsOperand(tok.Type)
		if depth > MaxNestingDepth {
			return tok
		}
	}
	return nil
}

func closes(open, closer hclsyntax.TokenType) bool {
	switch closer {
	case hclsyntax.TokenCBrack:
		return open == hclsyntax.TokenOBrack
	case hclsyntax.TokenCBrace:
		return open == hclsyntax.TokenOBrace
	case hclsyntax.TokenCParen:
		return open == hclsyntax.TokenOParen
	default: // TokenTemplateSeqEnd
		return open == hclsyntax.TokenTemplateInterp || open == hclsyntax.TokenTemplateControl
	}
}

func endsOperand(t hclsyntax.TokenType) bool {
	switch t {
	case hclsyntax.TokenIdent, hclsyntax.TokenNumberLit, hclsyntax.TokenCParen, hclsyntax.TokenCBrack,
		hclsyntax.TokenCBrace, hclsyntax.TokenCQuote, hclsyntax.TokenCHeredoc, hclsyntax.TokenStar:
		return true
	}
	return false
}

// The problems jsonProblem and FromJSON report, each completing "it ...".
var (
	jsonDepthProblem  = fmt.Sprintf("nests more than %d levels deep; the limit is %d", MaxJSONDepth, MaxJSONDepth)
	numberTextProblem = fmt.Sprintf("holds a number more than %d characters long or with an exponent beyond %d", MaxNumberLength, MaxNumberExponent)
)

// jsonProblem says why the JSON text b is refused before it is decoded:
// arrays and objects nested more deeply than MaxJSONDepth, or a number
// literal that numberTextTooLarge refuses. It looks only at brackets and
// numbers outside strings, so it is linear and does not recurse; b need not
// be valid JSON. "" means no problem. mayBeHuge says whether a number in b
// may still be one that numberTooLarge refuses (numberTextMayBeHuge): if
// not, the decoded value need not be searched for one.
func jsonProblem(b []byte) (problem string, mayBeHuge bool) {
	depth := 0
	inString, escaped := false, false
	for i := 0; i < len(b); i++ {
		c := b[i]
		switch {
		case inString:
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
		case c == '"':
			inString = true
		case c == '[' || c == '{':
			depth++
			if depth > MaxJSONDepth {
				return jsonDepthProblem, mayBeHuge
			}
		case c == ']' || c == '}':
			depth--
		case c == '-' || (c >= '0' && c <= '9'):
			j := i
			for j < len(b) && bytes.IndexByte([]byte("0123456789+-.eE"), b[j]) >= 0 {
				j++
			}
			if numberTextTooLarge(b[i:j]) {
				return numberTextProblem, true
			}
			mayBeHuge = mayBeHuge || numberTextMayBeHuge(b[i:j])
			i = j - 1
		}
	}
	return "", mayBeHuge
}

// budget is what one evaluation of one expression may still build: the
// functions of an evaluation context made by boundedContext and the for
// expressions evaluated in it charge what they produce. The first charge
// that does not fit is an error; after it, charges give back unknown values
// without a second error, so that a loop around an exhausted budget stops
// cheaply instead of collecting one error per item. Not safe for concurrent
// use: one evaluation runs on one goroutine.
type budget struct {
	elements int64 // left
	bytes    int64 // left
	failed   error // the first charge that did not fit
}

func newBudget() *budget {
	return &budget{elements: MaxEvalElements, bytes: MaxEvalBytes}
}

// charge takes n elements and size bytes from b. It returns an error the
// first time the budget is exceeded, and errExhausted after that.
func (b *budget) charge(n, size int64) error {
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

// boundedContext returns a copy of ctx whose functions are the checked
// functions of the task language sharing one fresh budget: those named, or
// all of them when names is nil.
func boundedContext(ctx *hcl.EvalContext, names []string) (*hcl.EvalContext, *budget) {
	b := newBudget()
	out := *ctx
	out.Functions = newFunctions(b, names)
	return &out, b
}

// calledFunctions returns the names of the functions expr calls, or nil if
// they cannot be found (expr is not native syntax).
func calledFunctions(expr hcl.Expression) []string {
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

// addFailure appends an error on rng when the budget was exceeded but diags
// has no error: try or can swallowed the first one, leaving only unknown
// values behind.
func (b *budget) addFailure(diags hcl.Diagnostics, rng hcl.Range) hcl.Diagnostics {
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

// forFunc is the name of the function boundSyntax wraps the collection of
// every for expression in. The space makes it a name no task file can call.
const forFunc = "for expression"

// boundSyntax makes every for expression under body check the size of the
// collection it iterates over (at most MaxCollectionElements) and charge it
// to the evaluation's budget, by wrapping the collection in a call of
// forFunc: a plain syntax node, which every walker of the tree (references,
// variables) sees through. It also makes every arithmetic operator refuse a
// number too large to write out (checkedOps). It changes the tree in place,
// so it must run before the tree is shared.
func boundSyntax(body hcl.Body) {
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

// templatePartFunc is the name of the function boundSyntax wraps every
// interpolated part of a template in, so that the text the template is
// built from is charged to the budget and a number too large to write out
// is refused before the template converts it to text.
const templatePartFunc = "template part"

// templatePart returns the value it is given, after charging the bytes of
// a string to b, and refusing a number too large to write out.
func templatePart(b *budget) function.Function {
	return passThrough("Checks and charges an interpolated part of a template.", "part", b, nil,
		func(uv cty.Value) error {
			switch uv.Type() {
			case cty.Number:
				if numberTooLarge(uv.AsBigFloat()) {
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
func passThrough(description, param string, b *budget, applies func(uv cty.Value) bool, check func(uv cty.Value) error) function.Function {
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
// large to write out as text (numberTooLarge): an operand converted from a
// string, such as "1e99999999" * 1, is not a literal that checkSource saw.
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
			if uv, _ := v.Unmark(); uv.Type() == cty.Number && uv.IsKnown() && !uv.IsNull() && numberTooLarge(uv.AsBigFloat()) {
				return cty.NilVal, fmt.Errorf("the result is a number with an exponent beyond %d, too large to write out", MaxNumberExponent)
			}
			return v, nil
		},
	})
}

// forCollectionFunc returns the collection it is given, after checking its
// size and charging it to b (boundSyntax).
func forCollectionFunc(b *budget) function.Function {
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
