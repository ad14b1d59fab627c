package jsonval_test

import (
	"fmt"

	"github.com/zclconf/go-cty/cty"

	"github.com/lhengine/lhengine/engine/internal/jsonval"
)

func ExampleFromJSON() {
	v, _ := jsonval.FromJSON([]byte(`{"pages": ["a", "b"], "total": 12345678901234567890}`))
	fmt.Println(v.GetAttr("pages").LengthInt(), v.GetAttr("total").AsBigFloat().Text('f', -1))
	b, _ := jsonval.ToJSON(v)
	fmt.Println(string(b))
	fmt.Println(v.GetAttr("total").Type() == cty.Number)
	// Output:
	// 2 12345678901234567890
	// {"pages":["a","b"],"total":12345678901234567890}
	// true
}
