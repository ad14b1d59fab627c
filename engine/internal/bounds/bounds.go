// Package bounds keeps what the engine's HCL files (task files, policy
// files) say, and what their expressions compute, within limits that a
// hostile or mistaken file cannot get past (specs/task-language.md, "Size
// and depth limits"):
//
//   - CheckSource and CheckExpression measure a source's size, nesting and
//     number literals on the tokens, before the HCL parser (which recurses
//     once per level) sees it;
//   - Instrument, Context and the function table make one evaluation of one
//     expression share a Budget that every function result, for collection
//     and template part is charged to, and refuse a function result too
//     large before it is built;
//   - JSONProblem, JSONBytes and the number checks bound the JSON values
//     the engine reads and writes.
//
// Every refusal is a diagnostic or an error, never a panic or a crash of
// the stack.
package bounds

import (
	"bytes"
	"fmt"
	"math/big"
	"unicode/utf8"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
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
	// Every number within MaxNumberExponent is written out as JSON in fewer
	// than MaxNumberLength characters, so that it is read back.
	MaxNumberExponent = 10000
	MaxNumberLength   = MaxNumberExponent + 1000

	// MaxJSONBytes bounds the JSON encoding of a value the engine builds (a
	// step's input, a fan-out item).
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

// CheckSource reports a task file larger than MaxSourceBytes or nested more
// deeply than MaxNestingDepth, at the place where it crosses the limit. It
// must pass before src is given to the HCL parser.
func CheckSource(filename string, src []byte) hcl.Diagnostics {
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
// NumberTextTooLarge refuses, or nil.
func largeNumber(tokens hclsyntax.Tokens) *hclsyntax.Token {
	for i := range tokens {
		if tokens[i].Type == hclsyntax.TokenNumberLit && NumberTextTooLarge(tokens[i].Bytes) {
			return &tokens[i]
		}
	}
	return nil
}

// NumberTextTooLarge reports whether the number literal text is longer than
// MaxNumberLength or has an exponent beyond MaxNumberExponent.
func NumberTextTooLarge(text []byte) bool {
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

// NumberTextMayBeHuge reports whether the number literal text may be a
// number that NumberTooLarge refuses. One that it clears is not: its
// value, if not zero, lies between 10^-(len(text)+exponent) and
// 10^(len(text)+exponent).
func NumberTextMayBeHuge(text []byte) bool {
	return len(text)+numberTextExponent(text) > MaxNumberExponent
}

// maxBinaryExponent is MaxNumberExponent in powers of two.
const maxBinaryExponent = MaxNumberExponent*3322/1000 + 1

// NumberTooLarge reports whether f is too large (or too small) to be written
// out as text in reasonable time: its decimal exponent is beyond
// MaxNumberExponent. A literal that NumberTextTooLarge accepts may still
// give such a number ("1" and 10,500 zeros); it is refused where it would
// be written out.
func NumberTooLarge(f *big.Float) bool {
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

// CheckExpression says why a standalone expression (a --var value)
// is refused before it is parsed: larger than MaxSourceBytes, nested more
// deeply than MaxNestingDepth, or holding a number literal too large. ""
// means it may be parsed.
func CheckExpression(src []byte) string {
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
