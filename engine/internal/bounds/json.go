package bounds

import (
	"bytes"
	"fmt"
	"math"
	"math/big"
	"strconv"

	"github.com/zclconf/go-cty/cty"
)

// The problems JSONProblem reports, each completing "it ...", for a
// decoder that finds them itself to report them alike. They spell out
// MaxJSONDepth, MaxNumberLength and MaxNumberExponent (TestProblemTexts).
const (
	JSONDepthProblem  = "nests more than 1000 levels deep; the limit is 1000"
	NumberTextProblem = "holds a number more than 11000 characters long or with an exponent beyond 10000"
)

// JSONProblem says why the JSON text b is refused before it is decoded:
// arrays and objects nested more deeply than MaxJSONDepth, or a number
// literal that NumberTextTooLarge refuses. It looks only at brackets and
// numbers outside strings, so it is linear and does not recurse; b need not
// be valid JSON. "" means no problem. mayBeHuge says whether a number in b
// may still be one that NumberTooLarge refuses (NumberTextMayBeHuge): if
// not, the decoded value need not be searched for one.
func JSONProblem(b []byte) (problem string, mayBeHuge bool) {
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
				return JSONDepthProblem, mayBeHuge
			}
		case c == ']' || c == '}':
			depth--
		case c == '-' || (c >= '0' && c <= '9'):
			j := i
			for j < len(b) && bytes.IndexByte([]byte("0123456789+-.eE"), b[j]) >= 0 {
				j++
			}
			if NumberTextTooLarge(b[i:j]) {
				return NumberTextProblem, true
			}
			mayBeHuge = mayBeHuge || NumberTextMayBeHuge(b[i:j])
			i = j - 1
		}
	}
	return "", mayBeHuge
}

// HoldsHugeNumber reports whether v holds, anywhere, a number that
// NumberTooLarge refuses.
func HoldsHugeNumber(v cty.Value) bool {
	_, err := JSONBytes(v, math.MaxInt64)
	return err == ErrHugeNumber
}

// JSONBytes is an upper bound on the length of v encoded as JSON, or some
// number of at least limit once it is known to reach limit. A number too
// large to write out (NumberTooLarge) is an error.
func JSONBytes(v cty.Value, limit int64) (int64, error) {
	var n int64
	var huge bool
	var digits [24]byte
	var walk func(v cty.Value)
	walk = func(v cty.Value) {
		if n >= limit {
			return
		}
		v, _ = v.Unmark()
		if !v.IsKnown() || v.IsNull() {
			n += 4
			return
		}
		ty := v.Type()
		switch {
		case ty == cty.String:
			if s := v.AsString(); n+int64(len(s)) < limit {
				n += jsonStringBytes(s)
			} else {
				n = limit
			}
		case ty == cty.Number:
			if bf := v.AsBigFloat(); NumberTooLarge(bf) {
				huge = true
				n = limit
			} else if i, acc := bf.Int64(); acc == big.Exact {
				// Most numbers are small integers: count their digits
				// without math/big's general formatting.
				n += int64(len(strconv.AppendInt(digits[:0], i, 10)))
			} else {
				n += int64(len(bf.Text('g', -1)))
			}
		case ty == cty.Bool:
			n += 5
		case v.CanIterateElements():
			n += 2
			keys := ty.IsMapType() || ty.IsObjectType()
			for it := v.ElementIterator(); it.Next() && n < limit; {
				k, e := it.Element()
				n++
				if keys {
					n += int64(len(k.AsString()))*6 + 3
				}
				walk(e)
			}
		default:
			n += 16
		}
	}
	walk(v)
	if huge {
		return n, ErrHugeNumber
	}
	return n, nil
}

// ErrHugeNumber is the error of a value holding a number too large to
// write out as text.
var ErrHugeNumber = fmt.Errorf("the value holds a number too large to write out (its exponent is beyond %d)", MaxNumberExponent)

// jsonStringBytes is the length of s as a JSON string with HTML escaping.
func jsonStringBytes(s string) int64 {
	n := int64(2)
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c < 0x20 || c == '<' || c == '>' || c == '&':
			n += 6
		case c == '"' || c == '\\':
			n += 2
		default:
			n++
		}
	}
	return n
}
