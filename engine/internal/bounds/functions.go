package bounds

import (
	"errors"

	"github.com/hashicorp/hcl/v2/ext/tryfunc"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/function"
	"github.com/zclconf/go-cty/cty/function/stdlib"
)

// newFunctions returns the functions an expression of a task or policy
// file may call, under the names Terraform gives them, each checked
// (checkedFunc): a result too large is refused, before it is built where
// its size can be known from the arguments, and what each call builds is
// charged to b (nil: not charged). The functions Instrument inserts
// (forFunc, templatePartFunc) are among them. With names it returns only
// those named (the others would cost time to wrap for nothing); with nil,
// all.
func newFunctions(b *Budget, names []string) map[string]function.Function {
	for _, name := range names {
		if _, ok := baseFunctions[name]; !ok && name != forFunc && name != templatePartFunc {
			names = nil // an unknown name: HCL's "did you mean" needs them all
			break
		}
	}
	if names == nil {
		names = []string{forFunc, templatePartFunc}
		for name := range baseFunctions {
			names = append(names, name)
		}
	}
	funcs := make(map[string]function.Function, len(names))
	for _, name := range names {
		if _, done := funcs[name]; done {
			continue
		}
		switch name {
		case forFunc:
			funcs[name] = forCollectionFunc(b)
			continue
		case templatePartFunc:
			funcs[name] = templatePart(b)
			continue
		}
		f, ok := baseFunctions[name]
		if !ok {
			continue
		}
		switch name {
		case "can", "try":
			funcs[name] = checkedTry(f, b)
		default:
			funcs[name] = checkedFunc(name, f, estimates[name], b)
		}
	}
	return funcs
}

// baseFunctions are the functions of the task language, unchecked. All are
// pure: the same arguments always give the same result, so a step's input is
// the same when the step is replayed. That is why there is no timestamp,
// uuid or file function. Read only.
var baseFunctions = map[string]function.Function{
	// numbers
	"abs":      stdlib.AbsoluteFunc,
	"ceil":     stdlib.CeilFunc,
	"floor":    stdlib.FloorFunc,
	"log":      stdlib.LogFunc,
	"max":      stdlib.MaxFunc,
	"min":      stdlib.MinFunc,
	"parseint": stdlib.ParseIntFunc,
	"pow":      stdlib.PowFunc,
	"signum":   stdlib.SignumFunc,

	// strings
	"chomp":      stdlib.ChompFunc,
	"format":     stdlib.FormatFunc,
	"formatlist": stdlib.FormatListFunc,
	"indent":     stdlib.IndentFunc,
	"join":       stdlib.JoinFunc,
	"lower":      stdlib.LowerFunc,
	"regex":      stdlib.RegexFunc,
	"regexall":   stdlib.RegexAllFunc,
	"replace":    stdlib.ReplaceFunc,
	"split":      stdlib.SplitFunc,
	"strrev":     stdlib.ReverseFunc,
	"substr":     stdlib.SubstrFunc,
	"title":      stdlib.TitleFunc,
	"trim":       stdlib.TrimFunc,
	"trimprefix": stdlib.TrimPrefixFunc,
	"trimspace":  stdlib.TrimSpaceFunc,
	"trimsuffix": stdlib.TrimSuffixFunc,
	"upper":      stdlib.UpperFunc,

	// collections
	"chunklist":       stdlib.ChunklistFunc,
	"coalesce":        stdlib.CoalesceFunc,
	"coalescelist":    stdlib.CoalesceListFunc,
	"compact":         stdlib.CompactFunc,
	"concat":          stdlib.ConcatFunc,
	"contains":        stdlib.ContainsFunc,
	"distinct":        stdlib.DistinctFunc,
	"element":         stdlib.ElementFunc,
	"flatten":         stdlib.FlattenFunc,
	"keys":            stdlib.KeysFunc,
	"length":          lengthFunc,
	"lookup":          stdlib.LookupFunc,
	"merge":           stdlib.MergeFunc,
	"range":           rangeFunc,
	"reverse":         stdlib.ReverseListFunc,
	"setintersection": stdlib.SetIntersectionFunc,
	"setproduct":      stdlib.SetProductFunc,
	"setsubtract":     stdlib.SetSubtractFunc,
	"setunion":        stdlib.SetUnionFunc,
	"slice":           stdlib.SliceFunc,
	"sort":            stdlib.SortFunc,
	"values":          stdlib.ValuesFunc,
	"zipmap":          stdlib.ZipmapFunc,

	// encoding
	"csvdecode":  stdlib.CSVDecodeFunc,
	"jsondecode": stdlib.JSONDecodeFunc,
	"jsonencode": stdlib.JSONEncodeFunc,

	// dates (pure: they only transform their arguments)
	"formatdate": stdlib.FormatDateFunc,
	"timeadd":    stdlib.TimeAddFunc,

	// type conversion
	"tobool":   stdlib.MakeToFunc(cty.Bool),
	"tolist":   stdlib.MakeToFunc(cty.List(cty.DynamicPseudoType)),
	"tomap":    stdlib.MakeToFunc(cty.Map(cty.DynamicPseudoType)),
	"tonumber": stdlib.MakeToFunc(cty.Number),
	"toset":    stdlib.MakeToFunc(cty.Set(cty.DynamicPseudoType)),
	"tostring": stdlib.MakeToFunc(cty.String),

	// error handling
	"can": tryfunc.CanFunc,
	"try": tryfunc.TryFunc,
}

// lengthFunc is Terraform's length: the number of characters of a string, or
// of elements of a collection.
var lengthFunc = function.New(&function.Spec{
	Description: "Returns the number of characters in a string or elements in a list, tuple, set, map or object.",
	Params: []function.Parameter{{
		Name:             "value",
		Type:             cty.DynamicPseudoType,
		AllowDynamicType: true,
		AllowUnknown:     true,
	}},
	Type: func(args []cty.Value) (cty.Type, error) {
		ty := args[0].Type()
		switch {
		case ty == cty.DynamicPseudoType, ty == cty.String,
			ty.IsListType(), ty.IsTupleType(), ty.IsSetType(), ty.IsMapType(), ty.IsObjectType():
			return cty.Number, nil
		default:
			return cty.NilType, errors.New("argument must be a string, a collection type, or a structural type")
		}
	},
	Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
		v := args[0]
		switch ty := v.Type(); {
		case ty == cty.DynamicPseudoType:
			return cty.UnknownVal(cty.Number), nil
		case ty == cty.String:
			return stdlib.Strlen(v)
		case ty.IsTupleType() || ty.IsObjectType():
			// The length of a tuple or object is part of its type.
			return stdlib.Length(v)
		default:
			if !v.IsKnown() {
				return cty.UnknownVal(cty.Number), nil
			}
			return stdlib.Length(v)
		}
	},
})
