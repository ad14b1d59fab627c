package taskfile

import (
	"fmt"
	"path/filepath"
	"slices"

	"github.com/hashicorp/hcl/v2"
)

// A PolicyGrant is one capability a step inserted by a policy has: a
// mount, a host its http.fetch or http effects may reach, the file effect,
// a workspace or a model (specs/policies.md, §2.5). ApplyPolicies lists
// every one in Task.PolicyGrants.
type PolicyGrant struct {
	Policy string // NAME@VERSION
	Step   string // the inserted step, POLICY.INSERT@ANCHOR
	// Capability as reports show it: mount "NAME" (SOURCE), http.fetch
	// HOST, effect http HOST, effect file, workspace rw|ro, model NAME.
	Capability string
	// ByTask: a step of the task's own has the capability, so the policy
	// widens nothing. Otherwise the policy was named as granted.
	ByTask bool
	Range  hcl.Range // where the policy file gives it
}

// capability is one thing a step may reach. kind and key compare it with
// what the task grants.
type capability struct {
	kind string // "mount", "http", "effect http", "effect file", "workspace", "model"
	key  string // the mount's source path, the host pattern, the mode, the model's name
	text string // PolicyGrant.Capability
	rng  hcl.Range
}

// workspaceRank orders the workspace modes by what they allow.
var workspaceRank = map[string]int{WorkspaceNone: 0, WorkspaceRO: 1, WorkspaceRW: 2}

// capabilitiesOf lists what step s may reach, each with where it is
// declared; declRange is the place of a default (the workspace).
func capabilitiesOf(s *Step) []capability {
	var caps []capability
	if ws := s.Workspace; ws != "" && ws != WorkspaceNone {
		rng := s.workspaceRange
		if rng == (hcl.Range{}) {
			rng = s.DeclRange // rw by default: the block itself grants it
		}
		caps = append(caps, capability{"workspace", ws, "workspace " + ws, rng})
	}
	for _, m := range s.Mounts {
		caps = append(caps, capability{"mount", filepath.Clean(m.SourcePath), fmt.Sprintf("mount %q (%s)", m.Name, m.SourcePath), m.DeclRange})
	}
	if s.HTTP != nil {
		for _, h := range s.HTTP.Allow {
			caps = append(caps, capability{"http", h, "http.fetch " + h, s.allowRange})
		}
	}
	for _, kind := range []string{EffectHTTP, EffectFile} {
		e := s.Effects[kind]
		if e == nil {
			continue
		}
		if kind == EffectFile {
			caps = append(caps, capability{"effect file", "", "effect file", e.DeclRange})
			continue
		}
		for _, h := range e.Hosts {
			caps = append(caps, capability{"effect http", h, "effect http " + h, e.DeclRange})
		}
	}
	if len(s.modelNames) > 0 {
		rng := s.DeclRange
		if s.modelsAttr != nil {
			rng = s.modelsAttr.Expr.Range()
		}
		for _, name := range s.modelNames {
			caps = append(caps, capability{"model", name, "model " + name, rng})
		}
	}
	return caps
}

// granted is what a task's own steps may reach, together.
type granted struct {
	workspace int                 // the highest workspaceRank
	keys      map[string][]string // kind -> keys
}

func grantedBy(steps []*Step) granted {
	g := granted{keys: map[string][]string{}}
	for _, s := range steps {
		for _, c := range capabilitiesOf(s) {
			if c.kind == "workspace" {
				g.workspace = max(g.workspace, workspaceRank[c.key])
				continue
			}
			g.keys[c.kind] = append(g.keys[c.kind], c.key)
		}
	}
	return g
}

// covers reports whether the task's steps already have c: the same mount
// source, a host pattern matching every host and port c's does, the file
// effect, a workspace mode as wide, the same model.
func (g granted) covers(c capability) bool {
	switch c.kind {
	case "workspace":
		return workspaceRank[c.key] <= g.workspace
	case "http", "effect http":
		return slices.ContainsFunc(g.keys[c.kind], func(p string) bool { return patternCovers(p, c.key) })
	default:
		return slices.Contains(g.keys[c.kind], c.key)
	}
}

// patternCovers reports whether host pattern p matches every host:port
// that pattern q does: the same pattern, or p is "host:*" for q's host.
func patternCovers(p, q string) bool {
	if p == q {
		return true
	}
	pHost, pPort, err1 := parseHostPattern(p)
	qHost, _, err2 := parseHostPattern(q)
	return err1 == nil && err2 == nil && pPort == "*" && sameHost(pHost, qHost)
}

// checkGrants lists the capabilities of the inserted steps (policy of each
// in from) in out.PolicyGrants and refuses, once per policy, insert and
// capability, one no step of the task's own has, unless the policy's name
// is in allow.
func checkGrants(out *Task, own []*Step, inserted []*Step, from map[*Step]*Policy, allow []string) hcl.Diagnostics {
	var diags hcl.Diagnostics
	task := grantedBy(own)
	reported := map[string]bool{}
	for _, s := range inserted {
		p := from[s]
		for _, c := range capabilitiesOf(s) {
			byTask := task.covers(c)
			out.PolicyGrants = append(out.PolicyGrants, PolicyGrant{Policy: p.Ref(), Step: s.Name, Capability: c.text, ByTask: byTask, Range: c.rng})
			if byTask || slices.Contains(allow, p.Name) {
				continue
			}
			key := fmt.Sprintf("%s\x00%s\x00%s", p.Ref(), c.rng, c.text)
			if reported[key] {
				continue
			}
			reported[key] = true
			rng := c.rng
			diags = append(diags, &hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  "Policy grants what the task does not",
				Detail: fmt.Sprintf("Policy %s gives the step it inserts, %q, %s, and no step of task %q has it. "+
					"A policy may not widen what a task may reach: grant it to a step in the task file, or run with --grant-policy %s to allow it for this run.",
					p.Ref(), s.Name, c.text, out.Name, p.Name),
				Subject: &rng,
			})
		}
	}
	return diags
}
