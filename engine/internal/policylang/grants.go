package policylang

import (
	"fmt"
	"slices"

	"github.com/hashicorp/hcl/v2"

	"github.com/lhengine/lhengine/engine/internal/taskfile"
)

// workspaceRank orders the workspace modes by what they allow.
var workspaceRank = map[string]int{taskfile.WorkspaceNone: 0, taskfile.WorkspaceRO: 1, taskfile.WorkspaceRW: 2}

// granted is what a task's own steps may reach, together.
type granted struct {
	workspace int                 // the highest workspaceRank
	keys      map[string][]string // kind -> keys
}

func grantedBy(steps []*taskfile.Step) granted {
	g := granted{keys: map[string][]string{}}
	for _, s := range steps {
		for _, c := range s.Capabilities() {
			if c.Kind == "workspace" {
				g.workspace = max(g.workspace, workspaceRank[c.Key])
				continue
			}
			g.keys[c.Kind] = append(g.keys[c.Kind], c.Key)
		}
	}
	return g
}

// covers reports whether the task's steps already have c: the same mount
// source, a host pattern matching every host and port c's does, the file
// effect, a workspace mode as wide, the same model.
func (g granted) covers(c taskfile.Capability) bool {
	switch c.Kind {
	case "workspace":
		return workspaceRank[c.Key] <= g.workspace
	case "http", "effect http":
		return slices.ContainsFunc(g.keys[c.Kind], func(p string) bool { return taskfile.HostPatternCovers(p, c.Key) })
	default:
		return slices.Contains(g.keys[c.Kind], c.Key)
	}
}

// checkGrants lists the capabilities of the inserted steps (policy of each
// in from) in out.PolicyGrants and refuses, once per policy, insert and
// capability, one no step of the task's own has, unless the policy's name
// is in allow.
func checkGrants(out *taskfile.Task, own []*taskfile.Step, inserted []*taskfile.Step, from map[*taskfile.Step]*Policy, allow []string) hcl.Diagnostics {
	var diags hcl.Diagnostics
	task := grantedBy(own)
	reported := map[string]bool{}
	for _, s := range inserted {
		p := from[s]
		for _, c := range s.Capabilities() {
			byTask := task.covers(c)
			out.PolicyGrants = append(out.PolicyGrants, taskfile.PolicyGrant{Policy: p.Ref(), Step: s.Name, Capability: c.Text, ByTask: byTask, Range: c.Range})
			if byTask || slices.Contains(allow, p.Name) {
				continue
			}
			key := fmt.Sprintf("%s\x00%s\x00%s", p.Ref(), c.Range, c.Text)
			if reported[key] {
				continue
			}
			reported[key] = true
			rng := c.Range
			diags = append(diags, &hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  "Policy grants what the task does not",
				Detail: fmt.Sprintf("Policy %s gives the step it inserts, %q, %s, and no step of task %q has it. "+
					"A policy may not widen what a task may reach: grant it to a step in the task file, or run with --grant-policy %s to allow it for this run.",
					p.Ref(), s.Name, c.Text, out.Name, p.Name),
				Subject: &rng,
			})
		}
	}
	return diags
}
