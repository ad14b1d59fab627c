package bounds

import (
	"fmt"
	"math/big"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/stretchr/testify/require"
	"github.com/zclconf/go-cty/cty"
)

func numbers(n int) cty.Value {
	elems := make([]cty.Value, n)
	for i := range elems {
		elems[i] = cty.NumberIntVal(int64(i))
	}
	return cty.ListVal(elems)
}

// TestEvaluationBudget checks the budget shared by one evaluation, with a
// small budget so that it runs out quickly: nested for expressions, whose
// collections are each small, and functions called in a loop charge it
// together; once it is exceeded the loops stop with one error, and try and
// can do not hide it.
func TestEvaluationBudget(t *testing.T) {
	t.Parallel()
	eval := func(t *testing.T, expr string, elements int64) (cty.Value, hcl.Diagnostics) {
		t.Helper()
		file, diags := hclsyntax.ParseConfig([]byte("x = "+expr+"\n"), "b.hcl", hcl.InitialPos)
		require.False(t, diags.HasErrors(), "%v", diags)
		Instrument(file.Body)
		attrs, _ := file.Body.JustAttributes()
		ctx, b := Context(&hcl.EvalContext{Variables: map[string]cty.Value{
			"l": numbers(30),
			"s": cty.StringVal(strings.Repeat("s", 100)),
		}}, nil)
		b.elements = elements
		b.bytes = elements
		v, diags := attrs["x"].Expr.Value(ctx)
		return v, b.AddFailure(diags, attrs["x"].Expr.Range())
	}
	for expr, want := range map[string]string{
		"[for a in l : [for b in l : [for c in l : 1]]]":              "the for expression iterates over 30 elements, and with them the expression would build or iterate over more than",
		"[for a in l : range(30)]":                                    `Call to function "range" failed: the expression would build or iterate`,
		`try([for a in l : [for b in l : 1]], "small")`:               `Call to function "try" failed`,
		`can([for a in l : [for b in l : 1]])`:                        `Call to function "can" failed`,
		`"%{for a in l}%{for b in l}x%{endfor}%{endfor}"`:             "the for expression iterates over 30 elements",
		`{for a in l : a => [for b in l : [for c in l : "${a}"]]...}`: "the for expression iterates over 30 elements",
		`"${s}${s}${s}${s}${s}${s}"`:                                  `Call to function "template part" failed: the expression would build more than`,
		`[for a in l : "${s}-${s}"]`:                                  `the expression would build more than`,
	} {
		v, diags := eval(t, expr, 500)
		require.True(t, diags.HasErrors(), "%s gave %#v", expr, v)
		require.Len(t, diags.Errs(), 1, "%s: %v", expr, diags)
		require.Contains(t, diags.Error(), want, expr)

		_, diags = eval(t, expr, MaxEvalElements)
		require.False(t, diags.HasErrors(), "%s: %v", expr, diags)
	}
}

// TestNumberTextBound checks the bound that lets a JSON decoder skip
// searching a decoded value for a number too large to write out: every
// number whose text NumberTextMayBeHuge clears is one NumberTooLarge
// accepts, at both ends of the range and at the edge of the bound; and
// HoldsHugeNumber finds the ones it refuses.
func TestNumberTextBound(t *testing.T) {
	t.Parallel()
	zeros := strings.Repeat
	texts := []string{"0", "-0.0e10000", "1e10000", "-9e10000", "9.9e9998", "1e-10000", "123.456e9990", "0.5e-9996"}
	for _, n := range []int{9990, 9998, 9999, 10000, 10001, 10500} {
		texts = append(texts,
			"1"+zeros("0", n), "-"+zeros("9", n), "0."+zeros("0", n)+"1",
			"0."+zeros("0", n/2)+"1e-"+fmt.Sprint(n/2), "1"+zeros("0", n/2)+"e"+fmt.Sprint(n/2),
			"0."+zeros("0", n-10)+"7e-"+fmt.Sprint(10))
	}
	for _, text := range texts {
		problem, mayBeHuge := JSONProblem([]byte(`[1, 2.5, {"a": ` + text + `}]`))
		require.Empty(t, problem, "%.20s", text)
		f, _, err := big.ParseFloat(text, 10, 512, big.ToNearestEven)
		require.NoError(t, err, "%.20s", text)
		huge := NumberTooLarge(f)
		require.True(t, mayBeHuge || !huge, "%.20s… (%d chars) is too large but its text was cleared", text, len(text))
		v := cty.ObjectVal(map[string]cty.Value{"a": cty.TupleVal([]cty.Value{cty.NumberVal(f)})})
		require.Equal(t, huge, HoldsHugeNumber(v), "%.20s", text)
	}
	_, mayBeHuge := JSONProblem([]byte(`{"n": [1, -2.5e300, 12345678901234567890], "s": "1e99999"}`))
	require.False(t, mayBeHuge, "ordinary numbers, and numbers in strings, need no search")
}

// TestProblemTexts holds the texts of JSONDepthProblem and
// NumberTextProblem to the limits they spell out.
func TestProblemTexts(t *testing.T) {
	t.Parallel()
	require.Equal(t, fmt.Sprintf("nests more than %d levels deep; the limit is %d", MaxJSONDepth, MaxJSONDepth), JSONDepthProblem)
	require.Equal(t, fmt.Sprintf("holds a number more than %d characters long or with an exponent beyond %d",
		MaxNumberLength, MaxNumberExponent), NumberTextProblem)
	problem, _ := JSONProblem([]byte(strings.Repeat("[", MaxJSONDepth+1)))
	require.Equal(t, JSONDepthProblem, problem)
	problem, _ = JSONProblem([]byte(`[1e100000000]`))
	require.Equal(t, NumberTextProblem, problem)
}
