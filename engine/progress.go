package engine

import (
	"github.com/lhengine/lhengine/engine/internal/plan"
	"github.com/lhengine/lhengine/engine/internal/taskfile"
	"github.com/lhengine/lhengine/ledger"
)

// progressSpec is the progress the task of sub pins at submit
// (specs/task-language.md, "Progress"): the progress block's step, or
// when it names none the task's largest fan-out whose items are known at
// submit (a for_each that reads no step's output), else its first
// fan-out, else every step's units. vars are the task's --var values. A
// task without a progress block counts "units".
func progressSpec(sub *plan.Submission, vars map[string]string) *ledger.ProgressSpec {
	spec := &ledger.ProgressSpec{Unit: "units", StepIndex: -1}
	p := sub.Task.Progress
	if p != nil {
		spec.Unit, spec.Labels = p.Unit, p.Labels
	}
	index := func(name string) int {
		for i, s := range sub.Steps {
			if s.Name == name {
				return i
			}
		}
		return -1
	}
	if p != nil && p.Step != "" {
		spec.Step, spec.StepIndex = p.Step, index(p.Step)
		return spec
	}
	values, diags := sub.Task.Vars(vars)
	best, bestItems := "", -1
	for _, s := range sub.Task.Steps {
		if s.ForEach == nil || s.Every > 0 {
			continue // not a fan-out, or a policy's window step
		}
		if best == "" {
			best = s.Name // the first fan-out, when no size is known
		}
		if diags.HasErrors() || len(s.ForEachReferences()) > 0 {
			continue
		}
		items, d := s.EvalForEach(taskfile.Scope{Vars: values})
		if !d.HasErrors() && len(items) > bestItems {
			best, bestItems = s.Name, len(items)
		}
	}
	if best != "" {
		spec.Step, spec.StepIndex = best, index(best)
	}
	return spec
}
