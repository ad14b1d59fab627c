package taskfile

import (
	"fmt"
	"path/filepath"

	"github.com/hashicorp/hcl/v2"
)

// A PolicyGrant is one capability a step inserted by a policy has: a
// mount, a host its http.fetch or http effects may reach, the file effect,
// a workspace or a model (specs/policies.md, §2.5).
// policylang.ApplyPolicies lists every one in Task.PolicyGrants.
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

// A Capability is one thing a step may reach.
type Capability struct {
	// Kind is "workspace", "mount", "http", "effect http", "effect file"
	// or "model"; Key compares it with another step's of the kind: the
	// workspace mode, the mount's source path, the host pattern, the
	// model's name ("" for the file effect).
	Kind, Key string
	Text      string    // as reports show it (PolicyGrant.Capability)
	Range     hcl.Range // where the step is given it
}

// Capabilities lists what s may reach, each with where it is declared:
// the workspace (rw by default: then the step block itself), its mounts
// (with their source paths resolved), the hosts of its http block and of
// its http effect, the file effect, and the models it names.
func (s *Step) Capabilities() []Capability {
	var caps []Capability
	if ws := s.Workspace; ws != "" && ws != WorkspaceNone {
		rng := s.workspaceRange
		if rng == (hcl.Range{}) {
			rng = s.DeclRange // rw by default: the block itself grants it
		}
		caps = append(caps, Capability{"workspace", ws, "workspace " + ws, rng})
	}
	for _, m := range s.Mounts {
		caps = append(caps, Capability{"mount", filepath.Clean(m.SourcePath), fmt.Sprintf("mount %q (%s)", m.Name, m.SourcePath), m.DeclRange})
	}
	if s.HTTP != nil {
		for _, h := range s.HTTP.Allow {
			caps = append(caps, Capability{"http", h, "http.fetch " + h, s.allowRange})
		}
	}
	for _, kind := range []string{EffectHTTP, EffectFile} {
		e := s.Effects[kind]
		if e == nil {
			continue
		}
		if kind == EffectFile {
			caps = append(caps, Capability{"effect file", "", "effect file", e.DeclRange})
			continue
		}
		for _, h := range e.Hosts {
			caps = append(caps, Capability{"effect http", h, "effect http " + h, e.DeclRange})
		}
	}
	if len(s.modelNames) > 0 {
		rng := s.DeclRange
		if s.modelsAttr != nil {
			rng = s.modelsAttr.Expr.Range()
		}
		for _, name := range s.modelNames {
			caps = append(caps, Capability{"model", name, "model " + name, rng})
		}
	}
	return caps
}

// HostPatternCovers reports whether host pattern p matches every host:port
// that pattern q does: the same pattern, or p is "host:*" for q's host.
func HostPatternCovers(p, q string) bool {
	if p == q {
		return true
	}
	pHost, pPort, err1 := parseHostPattern(p)
	qHost, _, err2 := parseHostPattern(q)
	return err1 == nil && err2 == nil && pPort == "*" && sameHost(pHost, qHost)
}
