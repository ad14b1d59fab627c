package taskfile

import (
	"io"

	"github.com/hashicorp/hcl/v2"

	"github.com/lhengine/lhengine/engine/internal/bounds"
	"github.com/lhengine/lhengine/engine/internal/hcldecode"
	"github.com/lhengine/lhengine/internal/hcldiag"
)

// WriteDiagnostics renders diags as text: for each, a first line
// "file:line:col: severity: summary" (the form editors and CI logs link to),
// then HCL's rendering: an excerpt of the source with the subject marked, and the detail wrapped to
// width columns (0: no wrapping). files maps a filename, as it appears in the
// diagnostics' ranges, to its source; a diagnostic whose file is not in files
// is written without an excerpt. The filename is
// kept as it is in the diagnostic. color adds terminal colors.
func WriteDiagnostics(w io.Writer, files map[string][]byte, diags hcl.Diagnostics, width uint, color bool) error {
	return hcldiag.Write(w, files, diags, width, color, func(name string, src []byte) bool { return bounds.CheckSource(name, src) == nil })
}

// DidYouMean returns " Did you mean "x"?" for the candidate closest to
// name, or "" when none is close: the suggestion validate makes.
func DidYouMean(name string, candidates []string) string {
	return hcldecode.DidYouMean(name, candidates)
}
