package taskfile

import (
	"fmt"
	"math"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"
)

// Budget is a task's budget block: task-wide limits whose reaching pauses
// the task (never fails it) until a resume raises them. A zero field is no
// limit.
//
//	budget {
//	  wall_time            = "8h"   # time with runnable or running work
//	  cost                 = 20     # cost units (model calls)
//	  units                = 50000  # committed work units
//	  repairs              = 10     # repairs across the task
//	  consecutive_failures = 25     # failed attempts in a row, task-wide
//	}
type Budget struct {
	WallTime            time.Duration
	Cost                float64
	Units               int64
	Repairs             int64
	ConsecutiveFailures int64
	DeclRange           hcl.Range
}

// Budget names, as written in the block and in pause reasons.
const (
	BudgetWallTime            = "wall_time"
	BudgetCost                = "cost"
	BudgetUnits               = "units"
	BudgetRepairs             = "repairs"
	BudgetConsecutiveFailures = "consecutive_failures"
)

// BudgetNames lists the budgets a budget block may set.
var BudgetNames = []string{BudgetWallTime, BudgetCost, BudgetUnits, BudgetRepairs, BudgetConsecutiveFailures}

// MaxBudgetCount bounds the whole-number budgets.
const MaxBudgetCount = 1 << 40

var budgetSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{
		{Name: BudgetWallTime},
		{Name: BudgetCost},
		{Name: BudgetUnits},
		{Name: BudgetRepairs},
		{Name: BudgetConsecutiveFailures},
	},
}

// decodeBudgetBlock decodes a task's budget block. Every problem is
// reported on the attribute's expression; an unknown argument gets hcl's
// "Did you mean".
func decodeBudgetBlock(block *hcl.Block) (*Budget, hcl.Diagnostics) {
	b := &Budget{DeclRange: block.DefRange}
	content, diags := block.Body.Content(budgetSchema)
	invalid := func(attr *hcl.Attribute, detail string) {
		diags = append(diags, &hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  "Invalid budget",
			Detail:   detail,
			Subject:  attr.Expr.Range().Ptr(),
			Context:  attr.Range.Ptr(),
		})
	}
	if attr, ok := content.Attributes[BudgetWallTime]; ok {
		d, dd := constDuration(attr)
		diags = append(diags, dd...)
		if !dd.HasErrors() {
			if d < time.Second {
				invalid(attr, fmt.Sprintf("wall_time must be at least 1s; got %s.", d))
			} else {
				b.WallTime = d
			}
		}
	}
	if attr, ok := content.Attributes[BudgetCost]; ok {
		v, dd := constTyped(attr, cty.Number, "number")
		diags = append(diags, dd...)
		if !dd.HasErrors() {
			f, _ := v.AsBigFloat().Float64()
			if !(f > 0) || math.IsInf(f, 0) {
				invalid(attr, fmt.Sprintf("cost must be a finite number of cost units above 0; got %s.", v.AsBigFloat().Text('g', 10)))
			} else {
				b.Cost = f
			}
		}
	}
	counts := []struct {
		name string
		dst  *int64
	}{
		{BudgetUnits, &b.Units},
		{BudgetRepairs, &b.Repairs},
		{BudgetConsecutiveFailures, &b.ConsecutiveFailures},
	}
	for _, c := range counts {
		attr, ok := content.Attributes[c.name]
		if !ok {
			continue
		}
		v, dd := constTyped(attr, cty.Number, "number")
		diags = append(diags, dd...)
		if dd.HasErrors() {
			continue
		}
		bf := v.AsBigFloat()
		n, exact := bf.Int64()
		if !bf.IsInt() || exact != 0 || n < 1 || n > MaxBudgetCount {
			invalid(attr, fmt.Sprintf("%s must be a whole number from 1 to %d; got %s.", c.name, int64(MaxBudgetCount), bf.Text('g', 10)))
			continue
		}
		*c.dst = n
	}
	return b, diags
}
