package taskfile

import (
	"fmt"
	"sort"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"

	"github.com/lhengine/lhengine/engine/internal/hcldecode"
)

// Progress is a task's progress block: how a person reads the task's
// progress (specs/task-language.md, "Progress").
//
//	progress {
//	  unit   = "pages"
//	  step   = "check"
//	  labels = { missing_title = "pages without a title" }
//	}
//
// Unit names what one unit of the progress step is. Step is the step whose
// units the progress counts; "" lets the engine choose at submit (the
// task's largest fan-out, see specs/task-language.md). A step without
// for_each is allowed: its units (one a pass) are then the count. Labels
// give counters (progress.count) words for people, by counter name.
type Progress struct {
	Unit      string
	Step      string
	Labels    map[string]string // nil when the block has none
	DeclRange hcl.Range

	stepRange hcl.Range // the step attribute's value; empty when absent
}

var progressSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{
		{Name: "unit", Required: true},
		{Name: "step"},
		{Name: "labels"},
	},
}

// decodeProgressBlock decodes a task's progress block. Its attributes are
// constants; step is resolved against the task's steps by resolveProgress.
func decodeProgressBlock(block *hcl.Block) (*Progress, hcl.Diagnostics) {
	p := &Progress{DeclRange: block.DefRange}
	content, diags := block.Body.Content(progressSchema)
	if attr, ok := content.Attributes["step"]; ok {
		p.stepRange = attr.Expr.Range()
	}
	diags = append(diags, hcldecode.Fields(content.Attributes,
		hcldecode.Set("unit", &p.Unit, hcldecode.NotBlank("Empty progress unit",
			`unit names what one unit of the progress step is, such as "pages" or "files"; it must not be empty.`)),
		hcldecode.Set("step", &p.Step, hcldecode.String),
		hcldecode.Set("labels", &p.Labels, decodeProgressLabels),
	)...)
	p.Unit = strings.TrimSpace(p.Unit)
	return p, diags
}

// decodeProgressLabels evaluates labels: a constant map of strings, none
// of them empty.
func decodeProgressLabels(attr *hcl.Attribute) (map[string]string, hcl.Diagnostics) {
	v, diags := hcldecode.Value(attr)
	if diags.HasErrors() {
		return nil, diags
	}
	ty := v.Type()
	if v.IsNull() || !(ty.IsMapType() || ty.IsObjectType()) {
		return nil, append(diags, hcldecode.WrongType(attr, "a map of strings is required, such as { missing_title = \"pages without a title\" }"))
	}
	out := make(map[string]string, v.LengthInt())
	var bad []string
	for it := v.ElementIterator(); it.Next(); {
		k, e := it.Element()
		if e.IsNull() || !e.Type().Equals(cty.String) {
			bad = append(bad, k.AsString())
			continue
		}
		text := strings.TrimSpace(e.AsString())
		if text == "" {
			bad = append(bad, k.AsString())
			continue
		}
		out[k.AsString()] = text
	}
	if len(bad) > 0 {
		sort.Strings(bad)
		return nil, append(diags, hcldecode.WrongType(attr, fmt.Sprintf("a map of strings is required, and every label must be words, not empty or null; %s are not", quoteList(bad))))
	}
	return out, diags
}

// resolveProgress checks that the progress block's step names a step of
// the task.
func resolveProgress(task *Task, steps map[string]*Step) hcl.Diagnostics {
	p := task.Progress
	if p == nil || p.Step == "" {
		return nil
	}
	if _, ok := steps[p.Step]; !ok {
		return hcl.Diagnostics{undeclaredStep("The progress block counts the units of", p.Step, p.stepRange, task.Steps)}
	}
	return nil
}
