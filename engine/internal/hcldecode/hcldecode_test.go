package hcldecode

import (
	"testing"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// attrs parses src, a body of attributes, as a file named a.hcl.
func attrs(t *testing.T, src string) hcl.Attributes {
	t.Helper()
	file, diags := hclsyntax.ParseConfig([]byte(src), "a.hcl", hcl.InitialPos)
	require.False(t, diags.HasErrors(), "%v", diags)
	as, diags := file.Body.JustAttributes()
	require.False(t, diags.HasErrors(), "%v", diags)
	return as
}

// TestDecoders checks each Decoder on a value it accepts and on one it
// refuses: the value, and the refusal's summary and detail, on the
// attribute's value with the attribute as context.
func TestDecoders(t *testing.T) {
	t.Parallel()
	a := attrs(t, `
n       = 3
low     = 0
big     = 5000000000
half    = 1.5
d       = "1m30s"
neg     = "-1s"
bad     = "soon"
word    = "ro"
typo    = "rx"
blank   = "  "
empty   = ""
size    = "64KiB"
huge    = 1e30
list    = ["a", "b"]
nulls   = ["a", null]
varref  = var.x
call    = upper("x")
product = setproduct(range(300), range(300), range(300))
`)
	type result struct {
		value           any
		summary, detail string
	}
	run := func(t *testing.T, name string, decode func(*hcl.Attribute) (any, hcl.Diagnostics)) result {
		t.Helper()
		attr := a[name]
		v, diags := decode(attr)
		if !diags.HasErrors() {
			return result{value: v}
		}
		require.Len(t, diags, 1, "%s: %v", name, diags)
		d := diags[0]
		if d.Summary != "Variables not allowed" && d.Summary != "Error in function call" {
			require.Equal(t, attr.Expr.Range(), *d.Subject, name)
			require.Equal(t, attr.Range, *d.Context, name)
		}
		return result{value: v, summary: d.Summary, detail: d.Detail}
	}
	of := func(d Decoder[int]) func(*hcl.Attribute) (any, hcl.Diagnostics) {
		return func(a *hcl.Attribute) (any, hcl.Diagnostics) { return d(a) }
	}
	ofD := func(d Decoder[time.Duration]) func(*hcl.Attribute) (any, hcl.Diagnostics) {
		return func(a *hcl.Attribute) (any, hcl.Diagnostics) { return d(a) }
	}
	ofS := func(d Decoder[string]) func(*hcl.Attribute) (any, hcl.Diagnostics) {
		return func(a *hcl.Attribute) (any, hcl.Diagnostics) { return d(a) }
	}
	for _, tt := range []struct {
		attr   string
		decode func(*hcl.Attribute) (any, hcl.Diagnostics)
		want   result
	}{
		{"n", of(Int), result{value: 3}},
		{"big", of(Int), result{value: 0, summary: "Incorrect attribute value type", detail: `Inappropriate value for attribute "big": 5000000000 is out of range.`}},
		{"half", of(Int), result{value: 0, summary: "Incorrect attribute value type", detail: `Inappropriate value for attribute "half": whole number required, but have 1.5.`}},
		{"d", of(IntIn(1, 5, "Invalid n", "n must be from 1 to 5; got %d.")), result{value: 0, summary: "Incorrect attribute value type", detail: `Inappropriate value for attribute "d": a number is required.`}},
		{"n", of(IntIn(1, 5, "Invalid n", "n must be from 1 to 5; got %d.")), result{value: 3}},
		{"low", of(AtLeast(1, "Invalid n", "n must be at least 1; got %d.")), result{value: 0, summary: "Invalid n", detail: "n must be at least 1; got 0."}},
		{"d", ofD(Duration), result{value: 90 * time.Second}},
		{"bad", ofD(Duration), result{value: time.Duration(0), summary: "Invalid duration", detail: `bad must be a duration such as "500ms", "30s", "5m" or "1h30m"; "soon" is not one.`}},
		{"neg", ofD(Positive("neg must be positive; got %q.")), result{value: time.Duration(0), summary: "Invalid duration", detail: `neg must be positive; got "-1s".`}},
		{"d", ofD(DurationIn(time.Second, time.Minute, "Invalid d", "d must be at most 1m; got %s.")), result{value: time.Duration(0), summary: "Invalid d", detail: "d must be at most 1m; got 1m30s."}},
		{"word", ofS(OneOf("Invalid word", "word must be rw or ro", "rw", "ro")), result{value: "ro"}},
		{"typo", ofS(OneOf("Invalid word", "word must be rw or ro", "rw", "ro")), result{value: "", summary: "Invalid word", detail: `word must be rw or ro; got "rx". Did you mean "rw"?`}},
		{"blank", ofS(NotBlank("Empty", "blank must say something.")), result{value: "", summary: "Empty", detail: "blank must say something."}},
		{"blank", ofS(NotEmpty("Empty", "blank must not be empty.")), result{value: "  "}},
		{"empty", ofS(NotEmpty("Empty", "empty must not be empty.")), result{value: "", summary: "Empty", detail: "empty must not be empty."}},
		{"call", ofS(String), result{value: "X"}},
		{"varref", ofS(String), result{value: "", summary: "Variables not allowed", detail: "The varref argument is fixed when the task file is parsed, so it cannot refer to var, step, each or task."}},
		{"product", ofS(String), result{value: "", summary: "Error in function call"}},
	} {
		got := run(t, tt.attr, tt.decode)
		if tt.want.summary == "Error in function call" {
			require.Equal(t, tt.want.summary, got.summary)
			require.Contains(t, got.detail, "setproduct would produce 27000000 elements")
			continue
		}
		require.Equal(t, tt.want, got, tt.attr)
	}

	size := Size("Invalid size", "size", 1, 1<<20, "size must be at most 1MiB; got %d bytes.")
	n, diags := size(a["size"])
	require.False(t, diags.HasErrors(), "%v", diags)
	require.Equal(t, uint64(64<<10), n)
	_, diags = size(a["huge"])
	require.Equal(t, "A size given as a number is a whole number of bytes; 1e+30 is not one.", diags[0].Detail)
	_, diags = size(a["low"])
	require.Equal(t, "size must be at most 1MiB; got 0 bytes.", diags[0].Detail)

	list, diags := StringList(a["list"])
	require.False(t, diags.HasErrors(), "%v", diags)
	require.Equal(t, []string{"a", "b"}, list)
	_, diags = StringList(a["nulls"])
	require.Equal(t, `Inappropriate value for attribute "nulls": list of string required, but an element is null.`, diags[0].Detail)
}

// TestFields checks that a table of fields decodes the attributes a block
// has, leaves the defaults of those it has not and of those in error, and
// reports every error.
func TestFields(t *testing.T) {
	t.Parallel()
	var (
		n        = 7
		word     = "rw"
		timeout  *time.Duration
		attempts *int
	)
	diags := Fields(attrs(t, "word = \"none\"\ntimeout = \"5s\"\nattempts = 0\n"),
		Set("n", &n, Int),
		Set("word", &word, OneOf("Invalid word", "word must be rw or ro", "rw", "ro")),
		SetPtr("timeout", &timeout, Duration),
		SetPtr("attempts", &attempts, AtLeast(1, "Invalid attempts", "attempts must be at least 1; got %d.")),
	)
	require.Equal(t, 7, n, "absent: the default")
	require.Equal(t, "rw", word, "refused: the default")
	require.Equal(t, 5*time.Second, *timeout)
	require.Nil(t, attempts)
	require.Len(t, diags, 2)
	require.Equal(t, []string{"Invalid word", "Invalid attempts"}, []string{diags[0].Summary, diags[1].Summary})
}

func TestElementRanges(t *testing.T) {
	t.Parallel()
	a := attrs(t, "list = [\"a\", \"bb\"]\ncall = concat([\"a\"], [\"b\"])\n")
	rngs := ElementRanges(a["list"], 2)
	require.Len(t, rngs, 2)
	require.Equal(t, hcl.Pos{Line: 1, Column: 14, Byte: 13}, rngs[1].Start)
	require.Nil(t, ElementRanges(a["list"], 3))
	require.Nil(t, ElementRanges(a["call"], 2))
}

func TestDidYouMean(t *testing.T) {
	t.Parallel()
	require.Equal(t, ` Did you mean "output"?`, DidYouMean("outptu", []string{"output"}))
	require.Equal(t, "", DidYouMean("input", []string{"output"}))
	require.Equal(t, "", DidYouMean("x", nil))
}

func TestSort(t *testing.T) {
	t.Parallel()
	at := func(b int) *hcl.Range { return &hcl.Range{Filename: "a.hcl", Start: hcl.Pos{Byte: b}} }
	diags := Sort(hcl.Diagnostics{
		{Summary: "b", Subject: at(5)},
		{Summary: "a", Subject: at(5)},
		{Summary: "c", Subject: at(1)},
		{Summary: "none"},
	})
	var got []string
	for _, d := range diags {
		got = append(got, d.Summary)
	}
	require.Equal(t, []string{"none", "c", "a", "b"}, got)
}
