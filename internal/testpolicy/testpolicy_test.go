package testpolicy_test

import (
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/stretchr/testify/require"

	"github.com/lhengine/lhengine/internal/testpolicy"
)

// TestInsertIsHCL: the text parses, with the body inside the insert block.
func TestInsertIsHCL(t *testing.T) {
	t.Parallel()
	src := testpolicy.Insert("mark", `    after  = "b"
    plugin = "../step.wasm"`)
	f, diags := hclsyntax.ParseConfig([]byte(src), "mark.hcl", hcl.InitialPos)
	require.False(t, diags.HasErrors(), diags.Error())
	policy := f.Body.(*hclsyntax.Body).Blocks[0]
	require.Equal(t, []string{"mark"}, policy.Labels)
	insert := policy.Body.Blocks[1]
	require.Equal(t, "insert", insert.Type)
	require.Equal(t, []string{"mark"}, insert.Labels)
	require.Contains(t, insert.Body.Attributes, "after")
	require.Contains(t, insert.Body.Attributes, "plugin")
}
