package plan

import (
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"

	"github.com/lhengine/lhengine/engine/internal/taskfile"
)

// renderDiags renders the errors among diags as validate does: file and
// line, an excerpt of the task's pinned source with the subject marked,
// the detail, and for an attribute a value does not have, the closest one
// it has. Diagnostics in a file other than the task's (a policy's) are
// written without an excerpt.
func (sp *Spec) renderDiags(diags hcl.Diagnostics) string {
	var errs hcl.Diagnostics
	for _, d := range diags {
		if d.Severity == hcl.DiagError {
			errs = append(errs, suggestAttribute(d))
		}
	}
	files := map[string][]byte{}
	if m := sp.Manifest; m != nil {
		files[m.Filename] = m.Source
	}
	var b strings.Builder
	if err := taskfile.WriteDiagnostics(&b, files, errs, 0, false); err != nil {
		return diagText(diags)
	}
	return strings.TrimRight(b.String(), "\n")
}

// suggestAttribute adds a "Did you mean" to an "Unsupported attribute"
// error of a traversal (step.greet.output.txt) when the object it
// traversed has a close name.
func suggestAttribute(d *hcl.Diagnostic) *hcl.Diagnostic {
	if d.Summary != "Unsupported attribute" || d.Expression == nil || d.EvalContext == nil || d.Subject == nil || strings.Contains(d.Detail, "Did you mean") {
		return d
	}
	tr, diags := hcl.AbsTraversalForExpr(d.Expression)
	if diags.HasErrors() {
		return d
	}
	for i, step := range tr {
		attr, ok := step.(hcl.TraverseAttr)
		if !ok || i == 0 || attr.SrcRange != *d.Subject {
			continue
		}
		v, diags := tr[:i].TraverseAbs(d.EvalContext)
		if diags.HasErrors() || !v.IsKnown() || v.IsNull() || !(v.Type().IsObjectType() || v.Type().IsMapType()) {
			return d
		}
		var names []string
		for it := v.ElementIterator(); it.Next(); {
			k, _ := it.Element()
			if k.Type() == cty.String {
				names = append(names, k.AsString())
			}
		}
		if s := taskfile.DidYouMean(attr.Name, names); s != "" {
			c := *d
			c.Detail += s
			return &c
		}
		return d
	}
	return d
}
