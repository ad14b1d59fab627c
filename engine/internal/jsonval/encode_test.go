package jsonval

import (
	"bytes"
	"encoding/json"
	"math/big"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/zclconf/go-cty/cty"
)

// The fast paths of ToJSON (int64 numbers, plain ASCII strings) must write
// exactly what the general path writes.
func TestToJSONFastPathsMatchTheGeneralEncoding(t *testing.T) {
	t.Parallel()
	huge, _ := new(big.Float).SetPrec(512).SetString("123456789012345678901234567890")
	numbers := []cty.Value{
		cty.NumberIntVal(0), cty.NumberIntVal(7), cty.NumberIntVal(-42),
		cty.NumberIntVal(1 << 62), cty.NumberIntVal(-1 << 63),
		cty.NumberFloatVal(1.5), cty.NumberFloatVal(-0.25), cty.NumberFloatVal(1e20),
		cty.NumberVal(huge),
	}
	for _, n := range numbers {
		got, err := ToJSON(n)
		require.NoError(t, err)
		require.Equal(t, n.AsBigFloat().Text('f', -1), string(got))
	}
	strs := []string{"", "plain", "with space and ~", `quote "x"`, `back\slash`, "tab\there", "line\n",
		"ünïcödé", "<html>&", "\u2028", "\x7f", string([]byte{0xff, 'a'})}
	for _, s := range strs {
		got, err := ToJSON(cty.StringVal(s))
		require.NoError(t, err)
		var want bytes.Buffer
		enc := json.NewEncoder(&want)
		enc.SetEscapeHTML(false)
		require.NoError(t, enc.Encode(s))
		require.Equal(t, bytes.TrimSuffix(want.Bytes(), []byte("\n")), got, "%q", s)
	}
}
