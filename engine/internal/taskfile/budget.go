package taskfile

import (
	"fmt"
	"math"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"

	"github.com/lhengine/lhengine/engine/internal/hcldecode"
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
	count := func(name string, dst *int64) hcldecode.Field {
		return hcldecode.Set(name, dst, func(attr *hcl.Attribute) (int64, hcl.Diagnostics) {
			v, diags := hcldecode.Typed(attr, cty.Number, "number")
			if diags.HasErrors() {
				return 0, diags
			}
			bf := v.AsBigFloat()
			n, exact := bf.Int64()
			if !bf.IsInt() || exact != 0 || n < 1 || n > MaxBudgetCount {
				return 0, append(diags, hcldecode.Error(attr, "Invalid budget",
					fmt.Sprintf("%s must be a whole number from 1 to %d; got %s.", name, int64(MaxBudgetCount), bf.Text('g', 10))))
			}
			return n, diags
		})
	}
	diags = append(diags, hcldecode.Fields(content.Attributes,
		hcldecode.Set(BudgetWallTime, &b.WallTime,
			hcldecode.DurationIn(time.Second, math.MaxInt64, "Invalid budget", "wall_time must be at least 1s; got %s.")),
		hcldecode.Set(BudgetCost, &b.Cost, hcldecode.Float("Invalid budget",
			"cost must be a finite number of cost units above 0; got %s.", func(f float64) bool { return f > 0 })),
		count(BudgetUnits, &b.Units),
		count(BudgetRepairs, &b.Repairs),
		count(BudgetConsecutiveFailures, &b.ConsecutiveFailures),
	)...)
	return b, diags
}
