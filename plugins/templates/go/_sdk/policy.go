package sdk

import "encoding/json"

// Policy is the "policy" object of a step request: the parameters that the
// run's harness policies hand to this step, by name (specs/policies.md), such
// as {"single_tool": true, "few_shot": "examples/v2"}. A run without policies
// sends an empty object. The accessors return the zero value for a parameter
// that is absent or of another type, so a plugin behaves as it would without
// the policy.
type Policy map[string]json.RawMessage

// Has reports whether the parameter is set.
func (p Policy) Has(name string) bool {
	_, ok := p[name]
	return ok
}

// Bool returns a boolean parameter; false when absent or not a boolean.
func (p Policy) Bool(name string) bool {
	var b bool
	_ = p.Decode(name, &b)
	return b
}

// String returns a string parameter; "" when absent or not a string.
func (p Policy) String(name string) string {
	var s string
	_ = p.Decode(name, &s)
	return s
}

// Int returns a whole-number parameter, or def when it is absent or not a
// whole number.
func (p Policy) Int(name string, def int) int {
	var n int
	if p.Decode(name, &n) != nil || !p.Has(name) {
		return def
	}
	return n
}

// Decode decodes a parameter into v as encoding/json does. An absent
// parameter leaves v as it is and returns nil.
func (p Policy) Decode(name string, v any) error {
	raw, ok := p[name]
	if !ok {
		return nil
	}
	return json.Unmarshal(raw, v)
}
