package bounds

import (
	"fmt"
	"math/big"

	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/function"
)

// rangeFunc is range(limit), range(start, limit) or range(start, limit,
// step) as go-cty's stdlib has it, without its cap of 1,024 values: a
// for_each = range(3000) is a fan-out of 3,000 items. Its size is known from
// its arguments (estimateRange), so the evaluation limits refuse a range of
// more than MaxCollectionElements values before anything is built.
var rangeFunc = function.New(&function.Spec{
	Description: `Returns a list of numbers spread evenly over a particular range.`,
	VarParam:    &function.Parameter{Name: "params", Type: cty.Number},
	Type:        function.StaticReturnType(cty.List(cty.Number)),
	Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
		start, end, step, err := rangeArgs(args)
		if err != nil {
			return cty.NilVal, err
		}
		n, err := rangeCount(start, end, step)
		if err != nil {
			return cty.NilVal, err
		}
		if n == 0 {
			return cty.ListValEmpty(cty.Number), nil
		}
		if n > MaxCollectionElements {
			return cty.NilVal, fmt.Errorf("range would produce %d values; the limit is %d", n, MaxCollectionElements)
		}
		vals := make([]cty.Value, 0, n)
		if s, ok := smallInt(start); ok {
			if d, ok := smallInt(step); ok {
				for i := range n {
					vals = append(vals, cty.NumberIntVal(s+i*d))
				}
				return cty.ListVal(vals), nil
			}
		}
		num := start
		for range n {
			vals = append(vals, num)
			num = num.Add(step)
		}
		return cty.ListVal(vals), nil
	},
})

// rangeArgs reads range's arguments as go-cty does: one is the limit from
// 0, two are start and limit, and the step is 1 or -1 toward the limit
// unless given.
func rangeArgs(args []cty.Value) (start, end, step cty.Value, err error) {
	switch len(args) {
	case 1:
		start, end, step = cty.Zero, args[0], cty.NumberIntVal(1)
		if args[0].LessThan(cty.Zero).True() {
			step = cty.NumberIntVal(-1)
		}
	case 2:
		start, end, step = args[0], args[1], cty.NumberIntVal(1)
		if args[1].LessThan(args[0]).True() {
			step = cty.NumberIntVal(-1)
		}
	case 3:
		start, end, step = args[0], args[1], args[2]
	default:
		return cty.NilVal, cty.NilVal, cty.NilVal, fmt.Errorf("must have one, two, or three arguments")
	}
	if step.Equals(cty.Zero).True() {
		return cty.NilVal, cty.NilVal, cty.NilVal, function.NewArgErrorf(2, "step must not be zero")
	}
	if step.LessThan(cty.Zero).True() {
		if end.GreaterThan(start).True() {
			return cty.NilVal, cty.NilVal, cty.NilVal, function.NewArgErrorf(1, "end must be less than start when step is negative")
		}
	} else if end.LessThan(start).True() {
		return cty.NilVal, cty.NilVal, cty.NilVal, function.NewArgErrorf(1, "end must be greater than start when step is positive")
	}
	return start, end, step, nil
}

// rangeCount is how many values range(start, end, step) has: the number of
// steps from start that stay short of end, ceil((end - start) / step).
func rangeCount(start, end, step cty.Value) (int64, error) {
	q := new(big.Float).Sub(end.AsBigFloat(), start.AsBigFloat())
	q.Quo(q, step.AsBigFloat())
	if q.Sign() <= 0 {
		return 0, nil
	}
	if q.Cmp(big.NewFloat(1e15)) > 0 {
		return 0, fmt.Errorf("range would produce more than 1e15 values; the limit is %d", MaxCollectionElements)
	}
	whole, _ := q.Int64()
	if new(big.Float).SetInt64(whole).Cmp(q) < 0 {
		whole++
	}
	return whole, nil
}

// smallInt is v as an int64, if it is a whole number within ±2^40 (where
// a million steps of it stay within an int64).
func smallInt(v cty.Value) (int64, bool) {
	f := v.AsBigFloat()
	if !f.IsInt() {
		return 0, false
	}
	i, acc := f.Int64()
	if acc != big.Exact || i > 1<<40 || i < -(1<<40) {
		return 0, false
	}
	return i, true
}

// estimateRange counts range's values from its arguments.
func estimateRange(args []cty.Value) (int64, int64, error) {
	start, end, step, err := rangeArgs(args)
	if err != nil {
		return 0, 0, nil // range says what is wrong
	}
	n, err := rangeCount(start, end, step)
	return n, 0, err
}
