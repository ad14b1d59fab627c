package hcldecode

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"
)

// A Decoder decodes one constant attribute into a T. String, StringList,
// Int and Duration are Decoders; IntIn, DurationIn, OneOf and Size make
// Decoders that also check the value, reporting one out of range with
// Error.
type Decoder[T any] func(*hcl.Attribute) (T, hcl.Diagnostics)

// A Field decodes one attribute of a block, when the block has it, into
// its place (Set).
type Field struct {
	name   string
	decode func(*hcl.Attribute) hcl.Diagnostics
}

// Set is the Field that decodes the attribute name with decode and stores
// the value in *dst; after an error *dst keeps what it held (its default).
func Set[T any](name string, dst *T, decode Decoder[T]) Field {
	return Field{name: name, decode: func(attr *hcl.Attribute) hcl.Diagnostics {
		v, diags := decode(attr)
		if !diags.HasErrors() {
			*dst = v
		}
		return diags
	}}
}

// SetPtr is Set for a value that may be left out: it stores a pointer to
// the decoded value in *dst, which stays nil after an error.
func SetPtr[T any](name string, dst **T, decode Decoder[T]) Field {
	return Field{name: name, decode: func(attr *hcl.Attribute) hcl.Diagnostics {
		v, diags := decode(attr)
		if !diags.HasErrors() {
			*dst = &v
		}
		return diags
	}}
}

// Fields decodes the fields of a block that attrs (its content) has, in
// the order given, and returns their diagnostics.
func Fields(attrs hcl.Attributes, fields ...Field) hcl.Diagnostics {
	var diags hcl.Diagnostics
	for _, f := range fields {
		if attr, ok := attrs[f.name]; ok {
			diags = append(diags, f.decode(attr)...)
		}
	}
	return diags
}

// Check is decode, then problem: a value for which problem returns a
// detail is an error with summary and that detail, and decodes to T's zero
// value.
func Check[T any](decode Decoder[T], summary string, problem func(T) string) Decoder[T] {
	return func(attr *hcl.Attribute) (T, hcl.Diagnostics) {
		v, diags := decode(attr)
		if !diags.HasErrors() {
			if detail := problem(v); detail != "" {
				var zero T
				return zero, append(diags, Error(attr, summary, detail))
			}
		}
		return v, diags
	}
}

// IntIn decodes a whole number from min to max. One outside is an error
// with summary and the detail formatted with the number (one %d).
func IntIn(min, max int, summary, detail string) Decoder[int] {
	return Check(Int, summary, func(n int) string { return outside(n < min || n > max, detail, n) })
}

// AtLeast is IntIn with no upper bound but Int's.
func AtLeast(min int, summary, detail string) Decoder[int] {
	return IntIn(min, math.MaxInt32, summary, detail)
}

// DurationIn decodes a duration from min to max. One outside is an error
// with summary and the detail formatted with the duration (one %s or %q).
func DurationIn(min, max time.Duration, summary, detail string) Decoder[time.Duration] {
	return Check(Duration, summary, func(d time.Duration) string { return outside(d < min || d > max, detail, d) })
}

// Positive decodes a duration above zero: an "Invalid duration" with the
// detail formatted with the duration otherwise.
func Positive(detail string) Decoder[time.Duration] {
	return DurationIn(1, math.MaxInt64, "Invalid duration", detail)
}

// outside formats detail with args when out, and is "" otherwise.
func outside(out bool, detail string, args ...any) string {
	if !out {
		return ""
	}
	return fmt.Sprintf(detail, args...)
}

// OneOf decodes a string that is one of allowed. Another is an error with
// summary and the detail usage, then "; got "VALUE"." and the closest of
// allowed (DidYouMean).
func OneOf(summary, usage string, allowed ...string) Decoder[string] {
	return Check(String, summary, func(s string) string {
		return outside(!slices.Contains(allowed, s), "%s; got %q.%s", usage, s, DidYouMean(s, allowed))
	})
}

// Size decodes a size in bytes from min to max: a whole number, or a
// string such as "64MiB". summary is the summary of every error, noun names
// the kind of size in them ("memory size"), and outOfRange is the detail of
// one outside the range, formatted with the number of bytes (one %d).
func Size(summary, noun string, min, max uint64, outOfRange string) Decoder[uint64] {
	return func(attr *hcl.Attribute) (uint64, hcl.Diagnostics) {
		return size(attr, summary, noun, min, max, outOfRange)
	}
}

// NotEmpty decodes a string that is not "": "" is an error with summary
// and detail.
func NotEmpty(summary, detail string) Decoder[string] {
	return Check(String, summary, func(s string) string { return outside(s == "", "%s", detail) })
}

// NotBlank decodes a string with more than white space in it: another is
// an error with summary and detail.
func NotBlank(summary, detail string) Decoder[string] {
	return Check(String, summary, func(s string) string { return outside(strings.TrimSpace(s) == "", "%s", detail) })
}

// Float decodes a finite number that ok accepts, as a float64. Another is
// an error with summary and the detail formatted with the number as
// written (one %s: 1e+400, not +Inf).
func Float(summary, detail string, ok func(f float64) bool) Decoder[float64] {
	return func(attr *hcl.Attribute) (float64, hcl.Diagnostics) {
		v, diags := Typed(attr, cty.Number, "number")
		if diags.HasErrors() {
			return 0, diags
		}
		f, _ := v.AsBigFloat().Float64()
		if math.IsInf(f, 0) || !ok(f) {
			return 0, append(diags, Error(attr, summary, fmt.Sprintf(detail, v.AsBigFloat().Text('g', 10))))
		}
		return f, diags
	}
}
