// Package jsonval converts between cty values and the plain JSON that
// crosses the plugin boundary: ToJSON writes a step's input (numbers
// exactly, keys sorted, no HTML escaping), and FromJSON reads a step's
// output or a fan-out item back into a value of the type JSON implies,
// within the limits of engine/internal/bounds.
//
// FromJSON is written by hand rather than built on go-cty's ctyjson:
// it reads the text once and builds the values bottom up, several times
// faster on large outputs, and accepts exactly what go-cty's decoder did
// (a differential fuzz test holds it to that). specs/RATIONALE.md, "Why is
// the JSON decoder written by hand?", and docs/BENCHMARKS.md, "Task
// language: JSON to cty", give the figures.
package jsonval

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"strconv"
	"sync"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/zclconf/go-cty/cty"

	"github.com/lhengine/lhengine/engine/internal/bounds"
)

// ToJSON encodes v as plain JSON, the form step inputs take across the plugin
// boundary. Strings become JSON strings, numbers are written exactly (a big
// integer keeps every digit), bools become JSON booleans, lists, tuples and
// sets become arrays, maps and objects become objects with sorted keys, and
// null (of any type, at any depth) becomes null.
//
// It is an error for v to be unknown anywhere, marked, to hold an infinite
// number, a number too large to write out (bounds.NumberTooLarge) or a capsule value, or to encode to more than bounds.MaxJSONBytes, which is
// found before the encoding is built.
func ToJSON(v cty.Value) ([]byte, error) {
	switch n, err := bounds.JSONBytes(v, bounds.MaxJSONBytes+1); {
	case err != nil:
		return nil, err
	case n > bounds.MaxJSONBytes:
		return nil, fmt.Errorf("the value would be more than %d bytes of JSON; the limit is %d", bounds.MaxJSONBytes, bounds.MaxJSONBytes)
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
		if bounds.NumberTooLarge(bf) {
			return path.NewErrorf("the number is too large to write out (its exponent is beyond %d)", bounds.MaxNumberExponent)
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
// become cty objects, arrays tuples, strings cty strings (NFC-normalised),
// numbers cty numbers at full precision (512 bits, as cty.ParseNumberVal
// reads them), and null, anywhere, cty.NullVal(cty.DynamicPseudoType).
// Input that is not exactly one JSON value is an error, and so is one that
// nests arrays and objects more than bounds.MaxJSONDepth levels deep (decoding
// recurses once per level) or holds a number too large to write out again
// (bounds.MaxNumberLength, bounds.MaxNumberExponent).
//
// An object may repeat a key if every value under it has the same type; the
// last one counts. A key must be in Unicode normalization form C (NFC).
//
// Step outputs are decoded here, some of them arrays of a hundred thousand
// objects, so it reads the text once and builds the values as it goes,
// bottom up, with as little garbage as cty allows. It accepts exactly what
// FromJSON accepted when it used go-cty's ImpliedType and Unmarshal, quirks
// included, so that stored outputs read back as they always have.
func FromJSON(b []byte) (cty.Value, error) {
	d := jsonDecoder{b: b}
	v := d.top()
	if d.err != "" {
		// Input that is "null" once Unicode spaces (not only JSON's) are
		// trimmed has always been read as null.
		if bytes.Equal(bytes.TrimSpace(b), []byte("null")) {
			return cty.NullVal(cty.DynamicPseudoType), nil
		}
		return cty.NilVal, errors.New("invalid JSON: " + d.err)
	}
	// A number too large to write out may sit under an object key that a
	// later duplicate replaces, so it is the finished value that is searched.
	if d.huge && bounds.HoldsHugeNumber(v) {
		return cty.NilVal, fmt.Errorf("invalid JSON: it holds a number with an exponent beyond %d", bounds.MaxNumberExponent)
	}
	return v, nil
}

// jsonDecoder reads one JSON text in one pass. Its stacks and obj are
// scratch space shared by every level of nesting: a level builds its value
// from the top of a stack and pops it before returning, so the space one
// array or object used is reused by the next.
type jsonDecoder struct {
	b     []byte
	pos   int    // the next byte to read
	depth int    // arrays and objects open at pos
	err   string // the first problem, completing "invalid JSON: "
	huge  bool   // a number may be too large to write out (bounds.NumberTooLarge)

	elems []cty.Value // the elements of the open arrays, innermost last
	attrs []jsonAttr  // the members of the open objects, innermost last
	obj   map[string]cty.Value
	keys  map[string]string    // object keys read, by their text
	strs  map[string]cty.Value // short strings read, by their text
	text  []byte               // a string with escapes, unescaped
	ints  [16]recentInt        // integers read recently, by value modulo 16
}

// recentInt is an integer and the number made for it, shared by a repeat:
// ids recur within an item.
type recentInt struct {
	n int64
	f *big.Float
}

// jsonAttr is one member of an object being read.
type jsonAttr struct {
	key string
	val cty.Value
}

const (
	// maxSharedObject bounds the objects built in the reused map: clearing
	// a map costs time in proportion to the largest it has been.
	maxSharedObject = 64
	// maxShared and maxSharedLen bound the keys, and the strings, remembered
	// for sharing.
	maxShared    = 1024
	maxSharedLen = 64
	// smallInts is the number of non-negative integers whose values are
	// made once and shared by every decoded value: counts, attempts and
	// codes repeat across the items of a fan-out.
	smallInts = 1024
)

// sharedInts are the numbers 0 to smallInts-1 as ParseNumberVal makes
// them. cty never changes the *big.Float of a value (AsBigFloat hands out
// a copy), so values may share one.
var sharedInts = sync.OnceValue(func() *[smallInts]*big.Float {
	var a [smallInts]*big.Float
	for i := range a {
		a[i] = intFloat(int64(i))
	}
	return &a
})

// intFloat is i as cty.ParseNumberVal makes it from its decimal text:
// precision 512, rounding to nearest even, exact.
func intFloat(i int64) *big.Float {
	return new(big.Float).SetPrec(512).SetMode(big.ToNearestEven).SetInt64(i)
}

// top reads the whole input: one value, then only space (or a closing
// bracket, see below).
func (d *jsonDecoder) top() cty.Value {
	v := d.value()
	if d.err != "" {
		return cty.NilVal
	}
	d.skipSpace()
	if d.pos < len(d.b) {
		switch c := d.b[d.pos]; c {
		case ']', '}':
			// FromJSON has always stopped at a closing bracket after the
			// value without reading on (only the bounds were checked over
			// the whole text), and stored outputs must read back as they
			// did.
			if problem, _ := bounds.JSONProblem(d.b[d.pos:]); problem != "" {
				d.err = "it " + problem
			}
		default:
			d.failChar(c, "after top-level value")
		}
	}
	return v
}

func (d *jsonDecoder) skipSpace() {
	for d.pos < len(d.b) {
		switch d.b[d.pos] {
		case ' ', '\t', '\n', '\r':
			d.pos++
		default:
			return
		}
	}
}

func (d *jsonDecoder) fail(msg string) {
	if d.err == "" {
		d.err = msg
	}
}

// failChar reports the unexpected byte c at pos, in encoding/json's words.
func (d *jsonDecoder) failChar(c byte, context string) {
	var q string
	switch {
	case c == '\'':
		q = `'\''`
	case c == '"':
		q = `'"'`
	case c >= utf8.RuneSelf:
		q = fmt.Sprintf("byte 0x%02x", c)
	default:
		q = strconv.Quote(string(rune(c)))
		q = "'" + q[1:len(q)-1] + "'"
	}
	d.fail(fmt.Sprintf("invalid character %s %s (at byte %d)", q, context, d.pos))
}

func (d *jsonDecoder) failEOF() {
	d.fail("unexpected end of JSON input")
}

// next skips space and returns the byte at pos, failing at the end of the
// input.
func (d *jsonDecoder) next() (byte, bool) {
	d.skipSpace()
	if d.pos >= len(d.b) {
		d.failEOF()
		return 0, false
	}
	return d.b[d.pos], true
}

// more reads what follows a member of an array or object: a comma (more
// is true) or the closing byte close (false). Anything else is a failure,
// described as coming after what.
func (d *jsonDecoder) more(close byte, what string) (more, ok bool) {
	c, ok := d.next()
	switch {
	case !ok:
		return false, false
	case c == close:
		d.pos++
		return false, true
	case c != ',':
		d.failChar(c, "after "+what)
		return false, false
	}
	d.pos++
	return true, true
}

// value reads one value after optional space. After a failure (d.err) the
// value returned is meaningless.
func (d *jsonDecoder) value() cty.Value {
	c, ok := d.next()
	if !ok {
		return cty.NilVal
	}
	switch {
	case c == '{':
		return d.object()
	case c == '[':
		return d.array()
	case c == '"':
		return d.stringValue()
	case c == '-' || '0' <= c && c <= '9':
		return d.number()
	case c == 't':
		return d.literal("true", cty.True)
	case c == 'f':
		return d.literal("false", cty.False)
	case c == 'n':
		return d.literal("null", cty.NullVal(cty.DynamicPseudoType))
	default:
		d.failChar(c, "looking for beginning of value")
		return cty.NilVal
	}
}

func (d *jsonDecoder) literal(word string, v cty.Value) cty.Value {
	for i := 1; i < len(word); i++ {
		switch {
		case d.pos+i >= len(d.b):
			d.failEOF()
			return cty.NilVal
		case d.b[d.pos+i] != word[i]:
			d.pos += i
			d.failChar(d.b[d.pos], fmt.Sprintf("in literal %s (expecting %q)", word, word[i]))
			return cty.NilVal
		}
	}
	d.pos += len(word)
	return v
}

// enter opens an array or object at pos, refusing one level too many.
func (d *jsonDecoder) enter() bool {
	if d.depth >= bounds.MaxJSONDepth {
		d.fail("it " + bounds.JSONDepthProblem)
		return false
	}
	d.depth++
	d.pos++
	d.skipSpace()
	return true
}

func (d *jsonDecoder) array() cty.Value {
	if !d.enter() {
		return cty.NilVal
	}
	if d.pos < len(d.b) && d.b[d.pos] == ']' {
		d.pos++
		d.depth--
		return cty.EmptyTupleVal
	}
	base := len(d.elems)
	for {
		v := d.value()
		if d.err != "" {
			return cty.NilVal
		}
		d.elems = append(d.elems, v)
		more, ok := d.more(']', "array element")
		if !ok {
			return cty.NilVal
		}
		if !more {
			break
		}
	}
	// TupleVal copies the elements, so the stack's top may be reused.
	v := cty.TupleVal(d.elems[base:])
	d.elems = d.elems[:base]
	d.depth--
	return v
}

func (d *jsonDecoder) object() cty.Value {
	if !d.enter() {
		return cty.NilVal
	}
	if d.pos < len(d.b) && d.b[d.pos] == '}' {
		d.pos++
		d.depth--
		return cty.EmptyObjectVal
	}
	base := len(d.attrs)
	for {
		if c, ok := d.next(); !ok || c != '"' {
			if ok {
				d.failChar(c, "looking for beginning of object key string")
			}
			return cty.NilVal
		}
		key, ascii, ok := d.key()
		if !ok {
			return cty.NilVal
		}
		// cty normalises attribute names, and FromJSON has always refused
		// a key that normalising changes (go-cty's Unmarshal could not find
		// it again).
		if !ascii && cty.NormalizeString(key) != key {
			d.fail(fmt.Sprintf("the object key %q is not in Unicode normalization form C", key))
			return cty.NilVal
		}
		if c, ok := d.next(); !ok || c != ':' {
			if ok {
				d.failChar(c, "after object key")
			}
			return cty.NilVal
		}
		d.pos++
		v := d.value()
		if d.err != "" {
			return cty.NilVal
		}
		d.attrs = append(d.attrs, jsonAttr{key: key, val: v})
		more, ok := d.more('}', "object key:value pair")
		if !ok {
			return cty.NilVal
		}
		if !more {
			break
		}
	}
	v := d.buildObject(d.attrs[base:])
	d.attrs = d.attrs[:base]
	d.depth--
	return v
}

// buildObject makes the object of attrs, in the order read. A repeated key
// keeps its last value, and must have the same type every time.
func (d *jsonDecoder) buildObject(attrs []jsonAttr) cty.Value {
	// Most objects are small and are built in one map, emptied after each:
	// ObjectVal copies it.
	m := d.obj
	shared := len(attrs) <= maxSharedObject
	if !shared || m == nil {
		m = make(map[string]cty.Value, len(attrs))
		if shared {
			d.obj = m
		}
	}
	for _, a := range attrs {
		if prev, dup := m[a.key]; dup && !prev.Type().Equals(a.val.Type()) {
			d.fail(fmt.Sprintf("duplicate %q property in JSON object, with values of different types", a.key))
			return cty.NilVal
		}
		m[a.key] = a.val
	}
	v := cty.ObjectVal(m)
	if shared {
		clear(m)
	}
	return v
}

// key reads an object key at pos. Keys repeat from object to object, so a
// key read before is returned as the same string.
func (d *jsonDecoder) key() (key string, ascii, ok bool) {
	text, inInput, ascii, ok := d.scanString()
	if !ok {
		return "", false, false
	}
	if !inInput || len(text) > maxSharedLen {
		return string(text), ascii, true
	}
	if s, seen := d.keys[string(text)]; seen {
		return s, ascii, true
	}
	s := string(text)
	if len(d.keys) < maxShared {
		if d.keys == nil {
			d.keys = make(map[string]string)
		}
		d.keys[s] = s
	}
	return s, ascii, true
}

// scanString reads the string at pos and returns its text, unescaped, as
// encoding/json does: invalid UTF-8 and unpaired surrogate escapes become
// U+FFFD. The text is a slice of the input (inInput) when that is already
// the text, else of d.text, valid until the next string.
func (d *jsonDecoder) scanString() (text []byte, inInput, ascii, ok bool) {
	b := d.b
	start := d.pos + 1
	ascii = true
	for i := start; i < len(b); {
		c := b[i]
		switch {
		case c == '"':
			d.pos = i + 1
			return b[start:i], true, ascii, true
		case c == '\\' || c < ' ':
			return d.unescape(start, i, ascii)
		case c < utf8.RuneSelf:
			i++
		default:
			r, size := utf8.DecodeRune(b[i:])
			if r == utf8.RuneError && size == 1 {
				return d.unescape(start, i, ascii)
			}
			ascii = false
			i += size
		}
	}
	d.pos = len(b)
	d.failEOF()
	return nil, false, false, false
}

// unescape goes on with the string that began at start from i, the first
// byte that is not its own text, writing the text into d.text.
func (d *jsonDecoder) unescape(start, i int, ascii bool) (text []byte, inInput, isASCII, ok bool) {
	b := d.b
	t := append(d.text[:0], b[start:i]...)
	defer func() { d.text = t[:0] }()
	for i < len(b) {
		switch c := b[i]; {
		case c == '"':
			d.pos = i + 1
			return t, false, ascii, true
		case c < ' ':
			d.pos = i
			d.failChar(c, "in string literal")
			return nil, false, false, false
		case c == '\\':
			if i+1 >= len(b) {
				d.pos = len(b)
				d.failEOF()
				return nil, false, false, false
			}
			switch e := b[i+1]; e {
			case '"', '\\', '/':
				t = append(t, e)
			case 'b':
				t = append(t, '\b')
			case 'f':
				t = append(t, '\f')
			case 'n':
				t = append(t, '\n')
			case 'r':
				t = append(t, '\r')
			case 't':
				t = append(t, '\t')
			case 'u':
				r, n := hex4(b[i+2:])
				if n < 4 {
					d.pos = i + 2 + n
					if d.pos >= len(b) {
						d.failEOF()
					} else {
						d.failChar(b[d.pos], "in \\u hexadecimal character escape")
					}
					return nil, false, false, false
				}
				i += 6
				if utf16.IsSurrogate(r) {
					// A surrogate counts only as the first of a pair
					// written as two escapes; anything else stands for
					// U+FFFD, and what follows is read for itself.
					r1 := rune(-1)
					if i+1 < len(b) && b[i] == '\\' && b[i+1] == 'u' {
						if v, n := hex4(b[i+2:]); n == 4 {
							r1 = v
						}
					}
					if pair := utf16.DecodeRune(r, r1); pair != utf8.RuneError {
						r = pair
						i += 6
					} else {
						r = utf8.RuneError
					}
				}
				if r >= utf8.RuneSelf {
					ascii = false
				}
				t = utf8.AppendRune(t, r)
				continue
			default:
				d.pos = i + 1
				d.failChar(e, "in string escape code")
				return nil, false, false, false
			}
			i += 2
		case c < utf8.RuneSelf:
			t = append(t, c)
			i++
		default:
			r, size := utf8.DecodeRune(b[i:])
			t = utf8.AppendRune(t, r)
			ascii = false
			i += size
		}
	}
	d.pos = len(b)
	d.failEOF()
	return nil, false, false, false
}

// hex4 reads four hexadecimal digits at the start of b: their value, and
// how many of the four there are.
func hex4(b []byte) (rune, int) {
	var r rune
	for n := range 4 {
		if n >= len(b) {
			return 0, n
		}
		c := b[n]
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c -= 'a' - 10
		case 'A' <= c && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, n
		}
		r = r<<4 | rune(c)
	}
	return r, 4
}

// number reads the number at pos. Integers of up to 18 digits (all that
// fit in an int64 without a check) are made directly; the rest are parsed
// by math/big as cty.ParseNumberVal parses them.
func (d *jsonDecoder) number() cty.Value {
	b := d.b
	start := d.pos
	i := start
	neg := b[i] == '-'
	if neg {
		i++
	}
	var u uint64
	digits := 0
	switch {
	case i >= len(b):
		d.pos = i
		d.failEOF()
		return cty.NilVal
	case b[i] == '0':
		i++
		digits = 1
	case '1' <= b[i] && b[i] <= '9':
		for ; i < len(b) && '0' <= b[i] && b[i] <= '9'; i++ {
			u = u*10 + uint64(b[i]-'0') // wraps past 19 digits; then unused
			digits++
		}
	default:
		d.pos = i
		d.failChar(b[i], "in numeric literal")
		return cty.NilVal
	}
	integer := true
	if i < len(b) && b[i] == '.' {
		integer = false
		if i = d.digits(i + 1); i < 0 {
			return cty.NilVal
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		integer = false
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if i = d.digits(i); i < 0 {
			return cty.NilVal
		}
	}
	text := b[start:i]
	d.pos = i
	if bounds.NumberTextTooLarge(text) {
		d.fail("it " + bounds.NumberTextProblem)
		return cty.NilVal
	}
	// "-0" is negative zero to math/big, which SetInt64 cannot make.
	if integer && digits <= 18 && !(neg && u == 0) {
		n := int64(u)
		if neg {
			n = -n
		}
		return cty.NumberVal(d.intFloat(n))
	}
	f, _, err := big.ParseFloat(string(text), 10, 512, big.ToNearestEven)
	if err != nil {
		d.pos = start
		d.fail(fmt.Sprintf("the number %q cannot be read: %v", text, err))
		return cty.NilVal
	}
	if bounds.NumberTextMayBeHuge(text) && bounds.NumberTooLarge(f) {
		d.huge = true
	}
	return cty.NumberVal(f)
}

// digits reads one or more decimal digits from i and returns the index
// after them, or -1 (and fails) if there is none.
func (d *jsonDecoder) digits(i int) int {
	b := d.b
	j := i
	for j < len(b) && '0' <= b[j] && b[j] <= '9' {
		j++
	}
	if j == i {
		d.pos = i
		if i >= len(b) {
			d.failEOF()
		} else {
			d.failChar(b[i], "in numeric literal")
		}
		return -1
	}
	return j
}

// intFloat returns n as a number: shared for small ones and for one read
// recently, else new.
func (d *jsonDecoder) intFloat(n int64) *big.Float {
	if 0 <= n && n < smallInts {
		return sharedInts()[n]
	}
	slot := &d.ints[uint64(n)%uint64(len(d.ints))]
	if slot.f == nil || slot.n != n {
		*slot = recentInt{n: n, f: intFloat(n)}
	}
	return slot.f
}

// stringValue reads the string at pos. Short strings repeat from item to
// item (states, kinds, names), so one read before is returned as the same
// value, which shares its text.
func (d *jsonDecoder) stringValue() cty.Value {
	text, inInput, _, ok := d.scanString()
	if !ok {
		return cty.NilVal
	}
	if !inInput || len(text) > maxSharedLen {
		return cty.StringVal(string(text))
	}
	if v, seen := d.strs[string(text)]; seen {
		return v
	}
	s := string(text)
	v := cty.StringVal(s)
	if len(d.strs) < maxShared {
		if d.strs == nil {
			d.strs = make(map[string]cty.Value)
		}
		d.strs[s] = v
	}
	return v
}
