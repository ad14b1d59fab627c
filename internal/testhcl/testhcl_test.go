package testhcl_test

import (
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/stretchr/testify/require"

	"github.com/lhengine/lhengine/internal/testhcl"
)

// TestMarkers: each summary of an # ERROR: comment is an error expected on
// its line, "|" between several; # VAR: lines give variables.
func TestMarkers(t *testing.T) {
	t.Parallel()
	want, vars := testhcl.Markers([]byte("# VAR: n=3\nx = 1 # ERROR: Bad thing\ny { # ERROR: One | Two \n"))
	require.Equal(t, []testhcl.Marked{{Line: 2, Summary: "Bad thing"}, {Line: 3, Summary: "One"}, {Line: 3, Summary: "Two"}}, want)
	require.Equal(t, map[string]string{"n": "3"}, vars)
}

// TestErrors: the errors of diagnostics, by line and summary; warnings are
// not among them.
func TestErrors(t *testing.T) {
	t.Parallel()
	at := func(line int) *hcl.Range {
		return &hcl.Range{Filename: "f.hcl", Start: hcl.Pos{Line: line}, End: hcl.Pos{Line: line}}
	}
	diags := hcl.Diagnostics{
		{Severity: hcl.DiagError, Summary: "Bad thing", Subject: at(2)},
		{Severity: hcl.DiagWarning, Summary: "Only a warning", Subject: at(3)},
	}
	require.Equal(t, []testhcl.Marked{{Line: 2, Summary: "Bad thing"}}, testhcl.Errors(t, "f.hcl", diags))
}

// TestHostileExprs: the file's expressions, without its comments.
func TestHostileExprs(t *testing.T) {
	t.Parallel()
	exprs := testhcl.HostileExprs(t, "../../testdata/bounds/hostile.txt")
	require.NotEmpty(t, exprs)
	for _, e := range exprs {
		require.NotEmpty(t, e)
		require.NotEqual(t, byte('#'), e[0])
	}
}
