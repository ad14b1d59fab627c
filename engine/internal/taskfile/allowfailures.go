package taskfile

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"

	"github.com/lhengine/lhengine/engine/internal/hcldecode"
)

// Allowed is how many items of the step may fail, of n items: AllowFailures,
// or AllowFailuresPercent of n rounded down.
func (s *Step) Allowed(n int) int {
	return AllowedOf(s.AllowFailures, s.AllowFailuresPercent, n)
}

// AllowedOf is Step.Allowed for a count or a percentage (one of them 0).
func AllowedOf(count int, percent float64, n int) int {
	if percent > 0 {
		return int(math.Floor(float64(n) * percent / 100))
	}
	return count
}

// decodeAllowFailures reads a step's allow_failures attribute: a whole
// number of items, or a string "P%" with 0 <= P <= 100.
func decodeAllowFailures(s *Step, attr *hcl.Attribute, block *hcl.Block) hcl.Diagnostics {
	if s.ForEach == nil {
		return hcl.Diagnostics{{
			Severity: hcl.DiagError,
			Summary:  "allow_failures without for_each",
			Detail:   "allow_failures tolerates failed fan-out items, so it is only valid in a step with for_each.",
			Subject:  attr.Range.Ptr(),
			Context:  block.DefRange.Ptr(),
		}}
	}
	v, diags := hcldecode.Value(attr)
	if diags.HasErrors() {
		return diags
	}
	bad := func(detail string) hcl.Diagnostics {
		return append(diags, hcldecode.Error(attr, "Invalid allow_failures", detail))
	}
	usage := `allow_failures must be a number of items (0 or more) or a percentage of the step's items such as "2%"; got `
	switch {
	case v.IsNull() || !v.IsKnown():
		return bad(usage + "null.")
	case v.Type() == cty.Number:
		bf := v.AsBigFloat()
		i, acc := bf.Int64()
		if !bf.IsInt() || acc != 0 || i < 0 || i > math.MaxInt32 {
			return bad(usage + bf.Text('g', 10) + ".")
		}
		s.AllowFailures = int(i)
	case v.Type() == cty.String:
		str := v.AsString()
		num, ok := strings.CutSuffix(strings.TrimSpace(str), "%")
		p, err := strconv.ParseFloat(strings.TrimSpace(num), 64)
		if !ok || err != nil || math.IsNaN(p) || math.IsInf(p, 0) {
			return bad(usage + strconv.Quote(str) + ".")
		}
		if p < 0 || p > 100 {
			return bad(fmt.Sprintf("a percentage of the step's items must be between 0%% and 100%%; got %q.", str))
		}
		s.AllowFailuresPercent = p
	default:
		return bad(usage + "a " + v.Type().FriendlyName() + ".")
	}
	return diags
}
