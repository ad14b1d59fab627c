package taskfile

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/big"
	"strconv"
	"strings"

	"github.com/zclconf/go-cty/cty"
	ctyjson "github.com/zclconf/go-cty/cty/json"
)

// ToJSON encodes v as plain JSON, the form step inputs take across the plugin
// boundary. Strings become JSON strings, numbers are written exactly (a big
// integer keeps every digit), bools become JSON booleans, lists, tuples and
// sets become arrays, maps and objects become objects with sorted keys, and
// null (of any type, at any depth) becomes null.
//
// It is an error for v to be unknown anywhere, marked, to hold an infinite
// number, a number too large to write out (numberTooLarge) or a capsule value, or to encode to more than MaxJSONBytes, which is
// found before the encoding is built.
func ToJSON(v cty.Value) ([]byte, error) {
	switch n, err := jsonBytes(v, MaxJSONBytes+1); {
	case err != nil:
		return nil, err
	case n > MaxJSONBytes:
		return nil, fmt.Errorf("the value would be more than %d bytes of JSON; the limit is %d", MaxJSONBytes, MaxJSONBytes)
	}
	var buf bytes.Buffer
	if err := writeJSON(&buf, v, nil); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func writeJSON(buf *bytes.Buffer, v cty.Value, path cty.Path) error {
	if v.IsMarked() {
		return path.NewErrorf("value is marked")
	}
	if !v.IsKnown() {
		return path.NewErrorf("value is not known")
	}
	if v.IsNull() {
		buf.WriteString("null")
		return nil
	}
	ty := v.Type()
	switch {
	case ty == cty.String:
		return writeJSONString(buf, v.AsString())
	case ty == cty.Number:
		bf := v.AsBigFloat()
		if bf.IsInt() {
			// Most numbers in step inputs are small integers: format them
			// without math/big's general path.
			if i, acc := bf.Int64(); acc == big.Exact {
				buf.Write(strconv.AppendInt(buf.AvailableBuffer(), i, 10))
				return nil
			}
		}
		if bf.IsInf() {
			return path.NewErrorf("JSON cannot hold an infinite number")
		}
		if numberTooLarge(bf) {
			return path.NewErrorf("the number is too large to write out (its exponent is beyond %d)", MaxNumberExponent)
		}
		buf.WriteString(bf.Text('f', -1))
		return nil
	case ty == cty.Bool:
		if v.True() {
			buf.WriteString("true")
		} else {
			buf.WriteString("false")
		}
		return nil
	case ty.IsListType() || ty.IsTupleType() || ty.IsSetType():
		buf.WriteByte('[')
		i := 0
		for it := v.ElementIterator(); it.Next(); i++ {
			k, e := it.Element()
			if i > 0 {
				buf.WriteByte(',')
			}
			if err := writeJSON(buf, e, path.Index(k)); err != nil {
				return err
			}
		}
		buf.WriteByte(']')
		return nil
	case ty.IsMapType() || ty.IsObjectType():
		buf.WriteByte('{')
		i := 0
		for it := v.ElementIterator(); it.Next(); i++ {
			k, e := it.Element()
			if i > 0 {
				buf.WriteByte(',')
			}
			if err := writeJSONString(buf, k.AsString()); err != nil {
				return err
			}
			buf.WriteByte(':')
			if err := writeJSON(buf, e, path.Index(k)); err != nil {
				return err
			}
		}
		buf.WriteByte('}')
		return nil
	default:
		return path.NewErrorf("JSON cannot hold a value of type %s", ty.FriendlyName())
	}
}

func writeJSONString(buf *bytes.Buffer, s string) error {
	if plainASCII(s) {
		buf.WriteByte('"')
		buf.WriteString(s)
		buf.WriteByte('"')
		return nil
	}
	enc := json.NewEncoder(buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(s); err != nil {
		return err
	}
	buf.Truncate(buf.Len() - 1) // Encode appends a newline
	return nil
}

// plainASCII reports whether s is printable ASCII that JSON writes as it is
// (no quote, backslash or control character).
func plainASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' {
			return false
		}
	}
	return true
}

// FromJSON decodes plain JSON into a value of the type JSON implies: objects
// become cty objects, arrays tuples, numbers cty numbers at full precision.
// The JSON null (at the top level) becomes cty.NullVal(cty.DynamicPseudoType).
// Input that is not exactly one JSON value is an error, and so is one that
// nests arrays and objects more than MaxJSONDepth levels deep (decoding
// recurses once per level) or holds a number too large to write out again
// (MaxNumberLength, MaxNumberExponent).
func FromJSON(b []byte) (cty.Value, error) {
	problem, mayBeHuge := jsonProblem(b)
	if problem != "" {
		return cty.NilVal, fmt.Errorf("invalid JSON: it %s", problem)
	}
	if strings.TrimSpace(string(b)) == "null" {
		return cty.NullVal(cty.DynamicPseudoType), nil
	}
	ty, err := ctyjson.ImpliedType(b)
	if err != nil {
		return cty.NilVal, fmt.Errorf("invalid JSON: %w", err)
	}
	v, err := ctyjson.Unmarshal(b, ty)
	if err != nil {
		return cty.NilVal, fmt.Errorf("invalid JSON: %w", err)
	}
	if mayBeHuge && holdsHugeNumber(v) {
		return cty.NilVal, fmt.Errorf("invalid JSON: it holds a number with an exponent beyond %d", MaxNumberExponent)
	}
	return v, nil
}
