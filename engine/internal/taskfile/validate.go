package taskfile

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"

	"github.com/lhengine/lhengine/engine/internal/hcldecode"
)

// validate checks every step's expressions: first the references they make,
// then, where those are sound, their types, by evaluating them with unknown
// values for everything only known at run time.
func (t *Task) validate() hcl.Diagnostics {
	var diags hcl.Diagnostics
	for _, s := range t.Steps {
		forEachDiags := t.checkRefs(s, "for_each", s.ForEach)
		inputDiags := t.checkRefs(s, "input", s.Input)
		if a := s.Approval; a != nil {
			inputDiags = append(inputDiags, t.checkRefs(s, "input", a.When)...)
			inputDiags = append(inputDiags, t.checkRefs(s, "input", a.Prompt)...)
			inputDiags = append(inputDiags, t.checkRefs(s, "input", a.Subject)...)
		}
		diags = append(diags, forEachDiags...)
		diags = append(diags, inputDiags...)
		if forEachDiags.HasErrors() || inputDiags.HasErrors() {
			continue
		}
		diags = append(diags, t.checkTypes(s)...)
	}
	return diags
}

// Adopt makes steps that another file inserts into t steps of t, and
// checks them as Parse checks t's own. The steps are a policy's inserts
// (engine/internal/policylang), already in t.Steps and numbered: Adopt
// gives their expressions t's task attributes and the steps t's limits,
// resolves their plugin and mount paths against the directory of the file
// that declares them and the models they name against t's, and reports the
// references and types in their for_each and input that t cannot satisfy;
// with checkPlugins it also reads their plugin files and mount sources.
func (t *Task) Adopt(inserted []*Step, checkPlugins bool) hcl.Diagnostics {
	for _, s := range inserted {
		s.task = t.info()
		s.Limits = &t.Limits
		dir := filepath.Dir(s.DeclRange.Filename)
		s.PluginPath = resolvePath(dir, s.Plugin)
		for _, m := range s.Mounts {
			m.SourcePath = resolvePath(dir, m.Source)
		}
	}
	diags := resolveModels(&Task{Models: t.Models, Steps: inserted})
	for _, s := range inserted {
		fe := t.checkRefs(s, "for_each", s.ForEach)
		ie := t.checkRefs(s, "input", s.Input)
		diags = append(diags, fe...)
		diags = append(diags, ie...)
		if !fe.HasErrors() && !ie.HasErrors() {
			diags = append(diags, t.checkTypes(s)...)
		}
	}
	if checkPlugins && len(inserted) > 0 {
		only := &Task{Steps: inserted, files: t.files}
		diags = append(diags, only.checkPlugins()...)
		diags = append(diags, only.checkMounts()...)
	}
	return diags
}

// checkRefs checks each reference in expr, the attribute attr of step s.
func (t *Task) checkRefs(s *Step, attr string, expr hcl.Expression) hcl.Diagnostics {
	if expr == nil {
		return nil
	}
	var diags hcl.Diagnostics
	for _, tr := range expr.Variables() {
		if d := t.checkRef(s, attr, tr); d != nil {
			d.Context = expr.Range().Ptr()
			diags = append(diags, d)
		}
	}
	return diags
}

// checkRef returns a diagnostic for a reference that step s cannot make in
// its attribute attr, or nil.
func (t *Task) checkRef(s *Step, attr string, tr hcl.Traversal) *hcl.Diagnostic {
	rng := tr.SourceRange()
	invalid := func(detail string) *hcl.Diagnostic {
		return &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Invalid reference", Detail: detail, Subject: rng.Ptr()}
	}
	// upTo is the range of the traversal's first n+1 parts.
	upTo := func(n int) *hcl.Range {
		r := hcl.RangeBetween(tr[0].SourceRange(), tr[n].SourceRange())
		return &r
	}

	switch root := tr.RootName(); root {
	case "var":
		name, ok := attrName(tr, 1)
		if !ok {
			return invalid("A variable reference has the form var.<name>.")
		}
		if t.Variable(name) == nil {
			names := make([]string, len(t.Variables))
			for i, v := range t.Variables {
				names[i] = v.Name
			}
			return &hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  "Reference to undeclared variable",
				Detail:   fmt.Sprintf("No variable named %q is declared in this task.%s", name, hcldecode.DidYouMean(name, names)),
				Subject:  upTo(1),
			}
		}
	case "prompt":
		name, ok := attrName(tr, 1)
		if !ok {
			return invalid("A prompt reference has the form prompt.<name>.")
		}
		if t.Prompt(name) == nil {
			names := make([]string, len(t.Prompts))
			for i, p := range t.Prompts {
				names[i] = p.Name
			}
			return &hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  "Reference to undeclared prompt",
				Detail:   fmt.Sprintf("No prompt named %q is declared in this task; declare it with prompt %q { file = \"...\" }.%s", name, name, hcldecode.DidYouMean(name, names)),
				Subject:  upTo(1),
			}
		}
	case "step":
		name, ok := attrName(tr, 1)
		if !ok {
			return invalid("A step output reference has the form step.<name>.output.")
		}
		target := t.Step(name)
		switch {
		case target == nil:
			return &hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  "Reference to undeclared step",
				Detail:   fmt.Sprintf("No step named %q is declared in this task.%s", name, hcldecode.DidYouMean(name, stepNames(t.Steps[:s.Index]))),
				Subject:  upTo(1),
			}
		case target.Index == s.Index:
			return &hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  "Self-referential step",
				Detail:   fmt.Sprintf("Step %q cannot read its own output: the output exists only after the step has run, so this would be a cycle. A step can read the outputs of the steps declared before it.", s.Name),
				Subject:  upTo(1),
			}
		case target.Index > s.Index:
			return &hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  "Reference to a later step",
				Detail:   fmt.Sprintf("Step %q cannot read the output of step %q, which is declared after it: steps run in the order they are declared, so this would be a cycle. Move %q before %q.", s.Name, name, name, s.Name),
				Subject:  upTo(1),
			}
		}
		field, ok := attrName(tr, 2)
		if !ok {
			return invalid(fmt.Sprintf("A step output reference has the form step.%s.output.", name))
		}
		if field != "output" {
			return &hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  "Unsupported step attribute",
				Detail:   fmt.Sprintf("A step has one attribute, output; %q is not one.%s", field, hcldecode.DidYouMean(field, []string{"output"})),
				Subject:  tr[2].SourceRange().Ptr(),
			}
		}
	case "each":
		if s.ForEach == nil && s.Every == 0 {
			return &hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  `Reference to "each" in a step without for_each`,
				Detail:   fmt.Sprintf("each.key and each.value exist only in the input of a step with for_each; step %q has no for_each.", s.Name),
				Subject:  rng.Ptr(),
			}
		}
		if attr != "input" {
			return &hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  `Invalid reference to "each"`,
				Detail:   fmt.Sprintf("each.key and each.value are available only in input; %s is evaluated once for the whole step, before there are any items.", attr),
				Subject:  rng.Ptr(),
			}
		}
		field, ok := attrName(tr, 1)
		if !ok {
			return invalid("A reference to the current item has the form each.key or each.value.")
		}
		if field != "key" && field != "value" {
			return &hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  `Unsupported attribute of "each"`,
				Detail:   fmt.Sprintf("each has the attributes key and value; %q is not one.%s", field, hcldecode.DidYouMean(field, []string{"key", "value"})),
				Subject:  tr[1].SourceRange().Ptr(),
			}
		}
	case "task":
		field, ok := attrName(tr, 1)
		if !ok {
			return invalid("A task attribute reference has the form task.id, task.name, task.objective or task.constraints.")
		}
		if !slices.Contains(taskAttributes, field) {
			return &hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  "Unsupported task attribute",
				Detail:   fmt.Sprintf("task has the attributes id, name, objective and constraints; %q is not one.%s", field, hcldecode.DidYouMean(field, taskAttributes)),
				Subject:  tr[1].SourceRange().Ptr(),
			}
		}
	default:
		return invalid(fmt.Sprintf("%q is not something a task file can refer to. A reference starts with var., prompt., step., each. or task.", root))
	}
	return nil
}

// attrName returns the name of the attribute step at tr[i].
func attrName(tr hcl.Traversal, i int) (string, bool) {
	if len(tr) <= i {
		return "", false
	}
	a, ok := tr[i].(hcl.TraverseAttr)
	if !ok {
		return "", false
	}
	return a.Name, true
}

// checkTypes evaluates the step's expressions with unknown values standing in
// for variables, earlier outputs and task.id, which reports type errors
// (calls with wrong arguments, impossible operations, a for_each that is not
// a collection) before the task runs.
func (t *Task) checkTypes(s *Step) hcl.Diagnostics {
	vars := make(map[string]cty.Value, len(t.Variables))
	for _, v := range t.Variables {
		vars[v.Name] = cty.UnknownVal(v.Type)
	}
	prompts := make(map[string]cty.Value, len(t.Prompts))
	for _, p := range t.Prompts {
		prompts[p.Name] = cty.UnknownVal(cty.String)
	}
	outputs := referencedOutputs(s, t.Steps[:s.Index])
	var diags hcl.Diagnostics
	var each *Each
	if s.ForEach != nil {
		ctx := evalContext(vars, prompts, outputs, cty.UnknownVal(cty.String), t.info(), nil, s.ForEach)
		v, d := s.ForEach.Value(ctx)
		diags = append(diags, hcldecode.FillSubject(d, s.ForEach.Range())...)
		if d.HasErrors() {
			return diags
		}
		if d := checkForEachType(s.ForEach, v); d != nil {
			return append(diags, d)
		}
		each = unknownEach(v.Type())
	}
	if s.Every > 0 {
		each = windowEach
	}
	if s.Input != nil {
		ctx := evalContext(vars, prompts, outputs, cty.UnknownVal(cty.String), t.info(), each, s.Input)
		_, d := s.Input.Value(ctx)
		diags = append(diags, hcldecode.FillSubject(d, s.Input.Range())...)
	}
	if s.Approval != nil {
		diags = append(diags, checkApprovalTypes(s.Approval, func(expr hcl.Expression) *hcl.EvalContext {
			return evalContext(vars, prompts, outputs, cty.UnknownVal(cty.String), t.info(), each, expr)
		})...)
	}
	return diags
}

// referencedOutputs returns unknown outputs for the earlier steps that s's
// expressions name: building the evaluation context from every earlier step
// made checking a pipeline quadratic in its length. A reference to `step`
// as a whole (which checkRefs reports) gets every earlier step.
func referencedOutputs(s *Step, earlier []*Step) map[string]cty.Value {
	outputs := map[string]cty.Value{}
	all := func() map[string]cty.Value {
		for _, e := range earlier {
			outputs[e.Name] = cty.DynamicVal
		}
		return outputs
	}
	for _, expr := range append([]hcl.Expression{s.ForEach, s.Input}, s.approvalExprs()...) {
		if expr == nil {
			continue
		}
		for _, tr := range expr.Variables() {
			if tr.RootName() != "step" {
				continue
			}
			name, ok := attrName(tr, 1)
			if !ok {
				return all()
			}
			outputs[name] = cty.DynamicVal
		}
	}
	return outputs
}

// checkForEachType reports a for_each value that cannot be a collection of
// items, judging only from what is known of it.
func checkForEachType(expr hcl.Expression, v cty.Value) *hcl.Diagnostic {
	if v.IsKnown() && v.IsNull() {
		return &hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  "Invalid for_each argument",
			Detail:   "for_each must be a list, tuple, set, map or object; it must not be null.",
			Subject:  expr.Range().Ptr(),
		}
	}
	ty := v.Type()
	if ty == cty.DynamicPseudoType || isCollection(ty) {
		return nil
	}
	return &hcl.Diagnostic{
		Severity: hcl.DiagError,
		Summary:  "Invalid for_each argument",
		Detail:   fmt.Sprintf("for_each must be a list, tuple, set, map or object; this value is a %s.", ty.FriendlyName()),
		Subject:  expr.Range().Ptr(),
	}
}

func isCollection(ty cty.Type) bool {
	return ty.IsListType() || ty.IsTupleType() || ty.IsSetType() || ty.IsMapType() || ty.IsObjectType()
}

// unknownEach is what each.key and each.value are known to be, at validation
// time, for a for_each value of type ty.
// windowEach is each in a window step's input: the window's number, and
// which of the anchor's commits and items it holds.
var windowEach = &Each{Key: cty.UnknownVal(cty.Number), Value: cty.UnknownVal(cty.Object(map[string]cty.Type{
	"from": cty.Number, "to": cty.Number, "items": cty.List(cty.Number),
}))}

func unknownEach(ty cty.Type) *Each {
	switch {
	case ty.IsListType() || ty.IsSetType():
		return &Each{Key: cty.UnknownVal(cty.Number), Value: cty.UnknownVal(ty.ElementType())}
	case ty.IsTupleType():
		return &Each{Key: cty.UnknownVal(cty.Number), Value: cty.DynamicVal}
	case ty.IsMapType():
		return &Each{Key: cty.UnknownVal(cty.String), Value: cty.UnknownVal(ty.ElementType())}
	case ty.IsObjectType():
		return &Each{Key: cty.UnknownVal(cty.String), Value: cty.DynamicVal}
	default:
		return &Each{Key: cty.DynamicVal, Value: cty.DynamicVal}
	}
}

// checkPlugins stats and hashes each step's plugin file.
func (t *Task) checkPlugins() hcl.Diagnostics {
	var diags hcl.Diagnostics
	sums := map[string]string{}
	for _, s := range t.Steps {
		if s.PluginPath == "" {
			continue
		}
		sum, ok := sums[s.PluginPath]
		if !ok {
			var err error
			sum, err = HashFrom(t.files, s.PluginPath)
			if err != nil {
				diags = append(diags, pluginFileError(s, err))
				sums[s.PluginPath] = ""
				continue
			}
			sums[s.PluginPath] = sum
		}
		if sum == "" || s.PluginSHA256 == "" || sum == s.PluginSHA256 {
			continue
		}
		diags = append(diags, &hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  "Plugin checksum mismatch",
			Detail:   fmt.Sprintf("The plugin file %s has SHA-256 %s, but plugin_sha256 is %s. If the plugin was rebuilt on purpose, update plugin_sha256.", s.PluginPath, sum, s.PluginSHA256),
			Subject:  s.shaRange.Ptr(),
		})
	}
	return diags
}

func pluginFileError(s *Step, err error) *hcl.Diagnostic {
	d := &hcl.Diagnostic{
		Severity: hcl.DiagError,
		Summary:  "Cannot read plugin file",
		Detail:   fmt.Sprintf("The plugin %q (%s) could not be read: %s.", s.Plugin, s.PluginPath, err),
		Subject:  s.PluginRange.Ptr(),
	}
	switch {
	case errors.Is(err, fs.ErrNotExist):
		d.Summary = "Plugin file not found"
		d.Detail = fmt.Sprintf("There is no file %s. Plugin paths are relative to the directory of the task file.", s.PluginPath)
	case errors.Is(err, errNotRegular):
		d.Summary = "Plugin is not a file"
		d.Detail = fmt.Sprintf("%s is not a regular file; plugin must name a WebAssembly module.", s.PluginPath)
	}
	return d
}
