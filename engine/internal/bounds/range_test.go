package bounds

import (
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/stretchr/testify/require"
	"github.com/zclconf/go-cty/cty"
)

// TestRange: range goes past go-cty's 1,024 values up to a fan-out's own
// limit (MaxCollectionElements), keeps go-cty's forms and errors, and a
// range past the limit is refused from its arguments, before it is built.
func TestRange(t *testing.T) {
	t.Parallel()
	eval := func(t *testing.T, expr string) (cty.Value, hcl.Diagnostics) {
		t.Helper()
		file, diags := hclsyntax.ParseConfig([]byte("x = "+expr+"\n"), "r.hcl", hcl.InitialPos)
		require.False(t, diags.HasErrors(), "%v", diags)
		Instrument(file.Body)
		attrs, _ := file.Body.JustAttributes()
		ctx, b := Context(&hcl.EvalContext{}, nil)
		v, diags := attrs["x"].Expr.Value(ctx)
		return v, b.AddFailure(diags, attrs["x"].Expr.Range())
	}
	nums := func(t *testing.T, v cty.Value) []string {
		t.Helper()
		var out []string
		for it := v.ElementIterator(); it.Next(); {
			_, e := it.Element()
			out = append(out, e.AsBigFloat().Text('g', -1))
		}
		return out
	}
	for expr, want := range map[string]string{
		"range(0)":          "",
		"range(4)":          "0 1 2 3",
		"range(-3)":         "0 -1 -2",
		"range(2, 5)":       "2 3 4",
		"range(5, 2)":       "5 4 3",
		"range(0, 1, 0.25)": "0 0.25 0.5 0.75",
		"range(1, 10, 4)":   "1 5 9",
		"range(10, 1, -4)":  "10 6 2",
		"range(0.5, 3)":     "0.5 1.5 2.5",
		"range(1, 1)":       "",
	} {
		v, diags := eval(t, expr)
		require.False(t, diags.HasErrors(), "%s: %v", expr, diags)
		require.Equal(t, want, strings.Join(nums(t, v), " "), expr)
	}

	v, diags := eval(t, "range(3000)")
	require.False(t, diags.HasErrors(), "%v", diags)
	require.Equal(t, 3000, v.LengthInt(), "past go-cty's 1,024")
	last := v.Index(cty.NumberIntVal(2999))
	require.True(t, last.Equals(cty.NumberIntVal(2999)).True())
	v, diags = eval(t, "range(1000000)")
	require.False(t, diags.HasErrors(), "%v", diags)
	require.Equal(t, MaxCollectionElements, v.LengthInt(), "a fan-out's own limit")

	for expr, want := range map[string]string{
		"range(1000001)":    "1000001",
		"range(0, 1, 1e-9)": "elements",
		"range(0, 10, 0)":   "step must not be zero",
		"range(10, 0, 1)":   "end must be greater than start when step is positive",
		"range(0, 10, -1)":  "end must be less than start when step is negative",
		"range(1, 2, 3, 4)": "must have one, two, or three arguments",
	} {
		_, diags := eval(t, expr)
		require.True(t, diags.HasErrors(), expr)
		require.Contains(t, diags.Error(), want, expr)
	}
}
