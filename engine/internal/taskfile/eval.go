package taskfile

import (
	"fmt"
	"sort"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"

	"github.com/lhengine/lhengine/engine/internal/bounds"
	"github.com/lhengine/lhengine/engine/internal/hcldecode"
)

// Scope is what an expression sees at run time.
type Scope struct {
	TaskID  string
	Vars    map[string]cty.Value // resolved by Task.Vars
	Prompts map[string]cty.Value // prompt name -> its pinned text (a string)
	Outputs map[string]cty.Value // step name -> output of completed earlier steps
	Each    *Each                // the current item; nil outside a fan-out item
}

// Each is one item of a fan-out step: each.key and each.value.
type Each struct {
	Key, Value cty.Value
}

// EvalInput evaluates the step's input in scope. A step without input gets
// cty.NullVal(cty.DynamicPseudoType).
//
// Every variable, output and each the expression reads must be in scope and
// known; a missing one is an error diagnostic on the reference. Type errors
// that depend on run-time values (indexing a list past its end, an output
// without the attribute read) are error diagnostics on the expression.
func (s *Step) EvalInput(scope Scope) (cty.Value, hcl.Diagnostics) {
	if s.Input == nil {
		return cty.NullVal(cty.DynamicPseudoType), nil
	}
	ctx, b, diags := s.runtimeContext(s.Input, scope, true)
	if diags.HasErrors() {
		return cty.DynamicVal, diags
	}
	v, d := s.Input.Value(ctx)
	d = b.AddFailure(d, s.Input.Range())
	diags = append(diags, hcldecode.FillSubject(d, s.Input.Range())...)
	if d.HasErrors() {
		return cty.DynamicVal, diags
	}
	if !v.IsWhollyKnown() {
		return cty.DynamicVal, append(diags, &hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  "Input not known",
			Detail:   fmt.Sprintf("The input of step %q has a part whose value is not known.", s.Name),
			Subject:  s.Input.Range().Ptr(),
		})
	}
	v, _ = v.UnmarkDeep()
	return v, diags
}

// EvalForEach evaluates the step's for_each in scope and returns its items in
// order: for a list, tuple or set, each.key is the index (a number, from 0)
// and the items are in element order (a set's order is cty's, which is
// stable); for a map or object, each.key is the key (a string) and the items
// are in lexical key order. It returns nil and no diagnostics for a step
// without for_each. scope.Each is ignored. A value of more than
// bounds.MaxCollectionElements items is an error.
func (s *Step) EvalForEach(scope Scope) ([]Each, hcl.Diagnostics) {
	if s.ForEach == nil {
		return nil, nil
	}
	scope.Each = nil
	ctx, b, diags := s.runtimeContext(s.ForEach, scope, false)
	if diags.HasErrors() {
		return nil, diags
	}
	v, d := s.ForEach.Value(ctx)
	d = b.AddFailure(d, s.ForEach.Range())
	diags = append(diags, hcldecode.FillSubject(d, s.ForEach.Range())...)
	if d.HasErrors() {
		return nil, diags
	}
	v, _ = v.UnmarkDeep()
	if d := checkForEachType(s.ForEach, v); d != nil {
		return nil, append(diags, d)
	}
	if !v.IsKnown() {
		return nil, append(diags, &hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  "Invalid for_each argument",
			Detail:   "The for_each value is not known.",
			Subject:  s.ForEach.Range().Ptr(),
		})
	}
	if n := v.LengthInt(); n > bounds.MaxCollectionElements {
		// A variable or an earlier step's output, read as it is, has not
		// been through the checked functions.
		return nil, append(diags, &hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  "Too many fan-out items",
			Detail:   fmt.Sprintf("The for_each value has %d elements; the limit is %d.", n, bounds.MaxCollectionElements),
			Subject:  s.ForEach.Range().Ptr(),
		})
	}

	ty := v.Type()
	byIndex := ty.IsListType() || ty.IsTupleType() || ty.IsSetType()
	items := make([]Each, 0, v.LengthInt())
	for it := v.ElementIterator(); it.Next(); {
		k, e := it.Element()
		if byIndex {
			k = cty.NumberIntVal(int64(len(items)))
		}
		items = append(items, Each{Key: k, Value: e})
	}
	return items, diags
}

// References returns the names of the steps whose outputs the step's input
// and for_each read, sorted and without duplicates. After Parse these are all
// earlier steps.
func (s *Step) References() []string { return references(s.ForEach, s.Input) }

// ForEachReferences names the earlier steps the step's for_each reads: what
// planning its items needs.
func (s *Step) ForEachReferences() []string { return references(s.ForEach) }

// InputReferences names the earlier steps the step's input reads: what
// evaluating one unit's input needs (its item comes with the unit).
func (s *Step) InputReferences() []string {
	return references(append([]hcl.Expression{s.Input}, s.approvalExprs()...)...)
}

func references(exprs ...hcl.Expression) []string {
	seen := map[string]bool{}
	for _, expr := range exprs {
		if expr == nil {
			continue
		}
		for _, tr := range expr.Variables() {
			if tr.RootName() != "step" {
				continue
			}
			if name, ok := attrName(tr, 1); ok {
				seen[name] = true
			}
		}
	}
	names := make([]string, 0, len(seen))
	for name := range seen {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}

// runtimeContext builds the evaluation context for expr from scope, with
// the budget its functions share, first checking that everything expr reads
// is there.
func (s *Step) runtimeContext(expr hcl.Expression, scope Scope, eachAllowed bool) (*hcl.EvalContext, *bounds.Budget, hcl.Diagnostics) {
	var diags hcl.Diagnostics
	missing := func(tr hcl.Traversal, summary, detail string) {
		diags = append(diags, &hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  summary,
			Detail:   detail,
			Subject:  tr.SourceRange().Ptr(),
			Context:  expr.Range().Ptr(),
		})
	}
	var roots rootSet
	for _, tr := range expr.Variables() {
		roots = roots.with(tr.RootName())
		switch tr.RootName() {
		case "var":
			if name, ok := attrName(tr, 1); ok {
				if _, ok := scope.Vars[name]; !ok {
					missing(tr, "No value for variable", fmt.Sprintf("Variable %q has no value in this run.", name))
				}
			}
		case "prompt":
			if name, ok := attrName(tr, 1); ok {
				if _, ok := scope.Prompts[name]; !ok {
					missing(tr, "No text for prompt", fmt.Sprintf("Prompt %q has no pinned text in this run.", name))
				}
			}
		case "step":
			if name, ok := attrName(tr, 1); ok {
				if _, ok := scope.Outputs[name]; !ok {
					missing(tr, "Step output not available", fmt.Sprintf("Step %q reads the output of step %q, which has not completed.", s.Name, name))
				}
			}
		case "each":
			if !eachAllowed || scope.Each == nil {
				missing(tr, `No value for "each"`, fmt.Sprintf("each is only available in the input of one item of a fan-out step; step %q is not evaluating one.", s.Name))
			}
		}
	}
	if diags.HasErrors() {
		return nil, nil, diags
	}
	var each *Each
	if eachAllowed {
		each = scope.Each
	}
	ctx := scopeContext(scope.Vars, scope.Prompts, scope.Outputs, cty.StringVal(scope.TaskID), s.task, each, roots)
	// Only the functions expr calls: a step's input is evaluated once per
	// fan-out item, and wrapping all of them each time would cost more
	// than the evaluation.
	ctx, b := bounds.Context(ctx, bounds.CalledFunctions(expr))
	return ctx, b, nil
}

// evalContext builds the context expr is evaluated in, for one evaluation:
// the functions expr calls share a fresh budget (bounds.Context; wrapping
// every function of the language for each evaluation cost more than the
// evaluation). A cty.NilVal anywhere stands for null.
func evalContext(vars, prompts, outputs map[string]cty.Value, taskID cty.Value, task taskInfo, each *Each, expr hcl.Expression) *hcl.EvalContext {
	ctx, _ := bounds.Context(scopeContext(vars, prompts, outputs, taskID, task, each, allRoots), bounds.CalledFunctions(expr))
	return ctx
}

// rootSet is a set of the root names of an expression's variables (var,
// prompt, step, task, each): scopeContext builds only those, since an
// input is evaluated once per fan-out item and building an object of every
// step's output for an input that reads each.value alone cost more than
// evaluating it.
type rootSet uint8

const (
	rootVar rootSet = 1 << iota
	rootPrompt
	rootStep
	rootTask
	rootEach
	allRoots = rootVar | rootPrompt | rootStep | rootTask | rootEach
)

// with adds the root name to the set; other names change nothing (an
// expression naming one fails as it would with the others built).
func (r rootSet) with(name string) rootSet {
	switch name {
	case "var":
		return r | rootVar
	case "prompt":
		return r | rootPrompt
	case "step":
		return r | rootStep
	case "task":
		return r | rootTask
	case "each":
		return r | rootEach
	}
	return r
}

// scopeContext is evalContext without functions.
func scopeContext(vars, prompts, outputs map[string]cty.Value, taskID cty.Value, task taskInfo, each *Each, roots rootSet) *hcl.EvalContext {
	ctx := &hcl.EvalContext{Variables: map[string]cty.Value{}}
	if roots&rootVar != 0 {
		varVals := make(map[string]cty.Value, len(vars))
		for name, v := range vars {
			varVals[name] = orNull(v)
		}
		ctx.Variables["var"] = cty.ObjectVal(varVals)
	}
	if roots&rootPrompt != 0 {
		promptVals := make(map[string]cty.Value, len(prompts))
		for name, v := range prompts {
			promptVals[name] = orNull(v)
		}
		ctx.Variables["prompt"] = cty.ObjectVal(promptVals)
	}
	if roots&rootStep != 0 {
		stepVals := make(map[string]cty.Value, len(outputs))
		for name, v := range outputs {
			stepVals[name] = cty.ObjectVal(map[string]cty.Value{"output": orNull(v)})
		}
		ctx.Variables["step"] = cty.ObjectVal(stepVals)
	}
	if roots&rootTask != 0 {
		ctx.Variables["task"] = cty.ObjectVal(map[string]cty.Value{
			"id":          taskID,
			"name":        cty.StringVal(task.name),
			"objective":   cty.StringVal(task.objective),
			"constraints": task.constraintsVal(),
		})
	}
	if each != nil && roots&rootEach != 0 {
		ctx.Variables["each"] = cty.ObjectVal(map[string]cty.Value{
			"key":   orNull(each.Key),
			"value": orNull(each.Value),
		})
	}
	return ctx
}

func orNull(v cty.Value) cty.Value {
	if v == cty.NilVal {
		return cty.NullVal(cty.DynamicPseudoType)
	}
	return v
}

// taskAttributes are the attributes of task in expressions.
var taskAttributes = []string{"id", "name", "objective", "constraints"}

// taskInfo is what expressions read of their task beside its id: its
// name, objective and constraints, verbatim.
type taskInfo struct {
	name, objective string
	constraints     []string
}

func (t *Task) info() taskInfo {
	return taskInfo{name: t.Name, objective: t.Objective, constraints: t.Constraints}
}

// constraintsVal is task.constraints: a list of strings (an empty list for
// none).
func (i taskInfo) constraintsVal() cty.Value {
	if len(i.constraints) == 0 {
		return cty.ListValEmpty(cty.String)
	}
	vals := make([]cty.Value, len(i.constraints))
	for n, c := range i.constraints {
		vals[n] = cty.StringVal(c)
	}
	return cty.ListVal(vals)
}
