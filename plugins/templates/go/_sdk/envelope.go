package sdk

import (
	"bytes"
	"encoding/json"
	"strconv"
	"unicode/utf8"
)

// The request and the result of every attempt are read and written here
// without encoding/json's reflection, which a Go guest runs slowly: under
// wazero, decoding the envelope with json.Decoder took about 150 µs of an
// attempt and writing the result about as much, more than the rest of a
// small attempt together.
//
// parseEnvelope accepts the envelope as the engine writes it (compact JSON,
// known keys, plain strings); for anything else it reports false and the
// request is decoded by encoding/json as before, so what a handler sees
// never depends on which path read it (FuzzParseEnvelope holds the two
// equal).

// decodeEnvelope decodes a whole request: the fast path when it applies,
// else json.Decoder, whose errors are the ones a plugin reports.
func decodeEnvelope(b []byte, env *envelope) error {
	if e, ok := parseEnvelope(b); ok {
		*env = e
		return nil
	}
	*env = envelope{}
	return json.NewDecoder(bytes.NewReader(b)).Decode(env)
}

// parseEnvelope is the fast path of decodeEnvelope; ok is false when b is
// anything but a JSON object of the envelope's own keys, with strings that
// need no unescaping and integers that need no conversion.
func parseEnvelope(b []byte) (env envelope, ok bool) {
	p := parser{b: b}
	ok = p.object(func(key []byte) bool {
		switch string(key) {
		case "abi":
			return p.int(&env.ABI)
		case "task_id":
			return p.str(&env.TaskID)
		case "task_name":
			return p.str(&env.TaskName)
		case "step":
			return p.str(&env.Step)
		case "attempt":
			return p.int(&env.Attempt)
		case "now":
			return p.str(&env.Now)
		case "objective":
			return p.str(&env.Objective)
		case "input":
			return p.raw(&env.Input)
		case "item":
			if p.null() {
				env.Item = nil
				return true
			}
			if env.Item == nil {
				env.Item = &Item{}
			}
			it := env.Item
			return p.object(func(key []byte) bool {
				switch string(key) {
				case "index":
					return p.int(&it.Index)
				case "key":
					return p.raw(&it.Key)
				case "value":
					return p.raw(&it.Value)
				}
				return false
			})
		case "repair":
			if p.null() {
				env.Repair = nil
				return true
			}
			if env.Repair == nil {
				env.Repair = &Repair{}
			}
			rp := env.Repair
			return p.object(func(key []byte) bool {
				switch string(key) {
				case "count":
					return p.int(&rp.Count)
				case "reason":
					return p.str(&rp.Reason)
				}
				return false
			})
		case "policy":
			if p.null() {
				env.Policy = nil
				return true
			}
			if env.Policy == nil {
				env.Policy = Policy{}
			}
			return p.object(func(key []byte) bool {
				var v json.RawMessage
				if !p.raw(&v) {
					return false
				}
				env.Policy[string(key)] = v
				return true
			})
		case "environment":
			if p.null() {
				env.Environment = nil
				return true
			}
			if env.Environment == nil {
				env.Environment = map[string]string{}
			}
			return p.object(func(key []byte) bool {
				var v string
				if !p.str(&v) {
					return false
				}
				env.Environment[string(key)] = v
				return true
			})
		case "constraints":
			if p.null() {
				env.Constraints = nil
				return true
			}
			env.Constraints = []string{}
			return p.array(func() bool {
				var v string
				if !p.str(&v) {
					return false
				}
				env.Constraints = append(env.Constraints, v)
				return true
			})
		}
		return false
	})
	if !ok {
		return envelope{}, false
	}
	// json.Decoder reads one value and leaves what follows; only
	// whitespace is accepted here.
	p.space()
	return env, p.i == len(p.b)
}

// parser reads JSON from b at i. Its methods report false for anything
// they do not take, and the caller gives up.
type parser struct {
	b []byte
	i int
}

func (p *parser) space() {
	for p.i < len(p.b) {
		switch p.b[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

// next skips whitespace and reports whether the next byte is c, taking it
// if so.
func (p *parser) next(c byte) bool {
	p.space()
	if p.i < len(p.b) && p.b[p.i] == c {
		p.i++
		return true
	}
	return false
}

// null takes a null literal if one is next.
func (p *parser) null() bool {
	p.space()
	if bytes.HasPrefix(p.b[p.i:], []byte("null")) {
		p.i += 4
		return true
	}
	return false
}

// object reads an object, calling member for each key with the parser at
// its value.
func (p *parser) object(member func(key []byte) bool) bool {
	if !p.next('{') {
		return false
	}
	if p.next('}') {
		return true
	}
	for {
		p.space()
		key, ok := p.plain()
		if !ok || !p.next(':') || !member(key) {
			return false
		}
		if p.next(',') {
			continue
		}
		return p.next('}')
	}
}

// array reads an array, calling elem for each element.
func (p *parser) array(elem func() bool) bool {
	if !p.next('[') {
		return false
	}
	if p.next(']') {
		return true
	}
	for {
		if !elem() {
			return false
		}
		if p.next(',') {
			continue
		}
		return p.next(']')
	}
}

// plain reads a string that needs no unescaping: no backslash, no control
// character, valid UTF-8. It returns the bytes between the quotes.
func (p *parser) plain() ([]byte, bool) {
	if p.i >= len(p.b) || p.b[p.i] != '"' {
		return nil, false
	}
	start := p.i + 1
	ascii := true
	for j := start; j < len(p.b); j++ {
		switch c := p.b[j]; {
		case c == '"':
			s := p.b[start:j]
			if !ascii && !utf8.Valid(s) {
				return nil, false
			}
			p.i = j + 1
			return s, true
		case c == '\\' || c < 0x20:
			return nil, false
		case c >= utf8.RuneSelf:
			ascii = false
		}
	}
	return nil, false
}

func (p *parser) str(dst *string) bool {
	p.space()
	s, ok := p.plain()
	if ok {
		*dst = string(s)
	}
	return ok
}

// int reads an integer without sign, leading zeros, fraction or exponent
// that fits in an int.
func (p *parser) int(dst *int) bool {
	p.space()
	j := p.i
	if j < len(p.b) && p.b[j] == '-' {
		j++
	}
	d := j
	for j < len(p.b) && p.b[j] >= '0' && p.b[j] <= '9' {
		j++
	}
	if j == d || (j-d > 1 && p.b[d] == '0') {
		return false
	}
	if j < len(p.b) {
		switch p.b[j] {
		case '.', 'e', 'E':
			return false
		}
	}
	n, err := strconv.Atoi(string(p.b[p.i:j]))
	if err != nil {
		return false
	}
	*dst, p.i = n, j
	return true
}

// raw reads any JSON value and keeps a copy of its bytes, as a
// json.RawMessage field does.
func (p *parser) raw(dst *json.RawMessage) bool {
	p.space()
	start := p.i
	if !p.skip(0) {
		return false
	}
	*dst = append(json.RawMessage(nil), p.b[start:p.i]...)
	return true
}

// maxDepth bounds the nesting skip follows, well inside encoding/json's
// bound (10,000), which then decides.
const maxDepth = 1000

// skip reads one JSON value, checking it as encoding/json would.
func (p *parser) skip(depth int) bool {
	if depth > maxDepth {
		return false
	}
	p.space()
	if p.i >= len(p.b) {
		return false
	}
	switch c := p.b[p.i]; {
	case c == '{':
		p.i++
		if p.next('}') {
			return true
		}
		for {
			p.space()
			if !p.skipString() || !p.next(':') || !p.skip(depth+1) {
				return false
			}
			if p.next(',') {
				continue
			}
			return p.next('}')
		}
	case c == '[':
		p.i++
		if p.next(']') {
			return true
		}
		for {
			if !p.skip(depth + 1) {
				return false
			}
			if p.next(',') {
				continue
			}
			return p.next(']')
		}
	case c == '"':
		return p.skipString()
	case c == 't':
		return p.literal("true")
	case c == 'f':
		return p.literal("false")
	case c == 'n':
		return p.literal("null")
	case c == '-' || (c >= '0' && c <= '9'):
		return p.number()
	}
	return false
}

func (p *parser) literal(s string) bool {
	if bytes.HasPrefix(p.b[p.i:], []byte(s)) {
		p.i += len(s)
		return true
	}
	return false
}

// skipString reads a string, escapes included; any byte but a control
// character may appear in it (encoding/json keeps invalid UTF-8 in a raw
// value as it is).
func (p *parser) skipString() bool {
	if p.i >= len(p.b) || p.b[p.i] != '"' {
		return false
	}
	for j := p.i + 1; j < len(p.b); j++ {
		switch c := p.b[j]; {
		case c == '"':
			p.i = j + 1
			return true
		case c < 0x20:
			return false
		case c == '\\':
			j++
			if j >= len(p.b) {
				return false
			}
			switch p.b[j] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if j+4 >= len(p.b) {
					return false
				}
				for _, h := range p.b[j+1 : j+5] {
					if !isHex(h) {
						return false
					}
				}
				j += 4
			default:
				return false
			}
		}
	}
	return false
}

func isHex(c byte) bool {
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')
}

// number reads a JSON number: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func (p *parser) number() bool {
	j := p.i
	if p.b[j] == '-' {
		j++
	}
	digits := func() bool {
		d := j
		for j < len(p.b) && p.b[j] >= '0' && p.b[j] <= '9' {
			j++
		}
		return j > d
	}
	switch {
	case j < len(p.b) && p.b[j] == '0':
		j++
	case !digits():
		return false
	}
	if j < len(p.b) && p.b[j] == '.' {
		j++
		if !digits() {
			return false
		}
	}
	if j < len(p.b) && (p.b[j] == 'e' || p.b[j] == 'E') {
		j++
		if j < len(p.b) && (p.b[j] == '+' || p.b[j] == '-') {
			j++
		}
		if !digits() {
			return false
		}
	}
	p.i = j
	return true
}

// appendOutput appends the result of a success whose output raw came
// from json.Marshal: already compact and escaped as json.Encoder would
// write it, so the bytes are the same.
func appendOutput(dst, raw []byte) []byte {
	dst = append(dst, `{"output":`...)
	dst = append(dst, raw...)
	return append(dst, "}\n"...)
}
