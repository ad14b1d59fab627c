package policylang

import (
	"bytes"
	"fmt"
	"path"
	"slices"
	"sort"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"

	"github.com/lhengine/lhengine/engine/internal/bounds"
	"github.com/lhengine/lhengine/engine/internal/hcldecode"
	"github.com/lhengine/lhengine/engine/internal/jsonval"
	"github.com/lhengine/lhengine/engine/internal/taskfile"
)

// ApplyPolicies returns a copy of t with the policies applied, in the order
// given: their steps inserted (before, then the anchor, then after; several
// policies' inserts next to one anchor in policy order), their parameters set
// on the steps they match (Step.Params) and their overrides applied. Every
// step gets the list of the policies (Step.Policies).
//
// Two policies that set the same parameter, or the same override field, of
// one step are an error naming both; so are references and types in inserted
// steps that the task cannot satisfy (a variable it does not declare, a
// later step), reported in the policy's file. With checkPlugins the
// inserted steps' plugin files and mount sources are checked as
// taskfile.Parse checks a task's. t is not changed.
//
// An inserted step may reach only what a step of t may (a mount of the same
// source, hosts its patterns match, the file effect, as wide a workspace,
// a model granted to a step): anything more is an error on its place in
// the policy file, unless the policy's name is in grant (--grant-policy).
// Every capability of an inserted step is listed in Task.PolicyGrants.
func ApplyPolicies(t *taskfile.Task, ps []*Policy, checkPlugins bool, grant ...string) (*taskfile.Task, hcl.Diagnostics) {
	if len(ps) == 0 {
		return t, nil
	}
	a := &application{task: t, policies: ps, out: *t, from: map[*taskfile.Step]*Policy{}}
	a.out.Steps, a.out.PolicyGrants = nil, nil
	a.insert()
	a.warnUnmatched()
	a.number()
	a.resolveRepairs()
	a.diags = append(a.diags, a.out.Adopt(a.inserted, checkPlugins)...)
	a.diags = append(a.diags, checkGrants(&a.out, t.Steps, a.inserted, a.from, grant)...)
	refs := make([]string, len(ps))
	for i, p := range ps {
		refs[i] = p.Ref()
	}
	for _, s := range a.out.Steps {
		s.Policies = refs
	}
	a.diags = append(a.diags, applyParams(a.out.Steps, ps)...)
	a.diags = append(a.diags, applyOverrides(a.out.Steps, ps)...)
	return &a.out, hcldecode.Sort(a.diags)
}

// application is one ApplyPolicies: the task the policies are applied to,
// the copy they change, and what the steps found on the way.
type application struct {
	task     *taskfile.Task
	policies []*Policy
	out      taskfile.Task
	inserted []*taskfile.Step           // the steps the policies insert, in step order
	from     map[*taskfile.Step]*Policy // the policy that inserted each
	diags    hcl.Diagnostics
}

// insert copies the task's steps into out with the policies' inserts next
// to them: for each step of the task, the steps inserted before it, the
// step, its window steps (the anchor's units commit while they run, and
// the ledger finds them right after it), then the steps inserted after it.
func (a *application) insert() {
	for _, orig := range a.task.Steps {
		s := *orig
		if orig.Repair != nil {
			r := *orig.Repair
			s.Repair = &r
		}
		a.insertAt("before", &s)
		a.out.Steps = append(a.out.Steps, &s)
		a.insertAt("every", &s)
		a.insertAt("after", &s)
	}
}

// insertAt inserts, next to anchor, the steps every policy's inserts of
// the kind where ("before", "after" or "every": a window step) whose glob
// matches its name, each decoded afresh and named POLICY.INSERT@ANCHOR.
func (a *application) insertAt(where string, anchor *taskfile.Step) {
	for _, p := range a.policies {
		for _, in := range p.Inserts {
			w, glob := in.Anchor()
			if in.Every > 0 {
				w = "every"
			}
			if w != where {
				continue
			}
			if ok, _ := path.Match(glob, anchor.Name); !ok {
				continue
			}
			s, d := p.instantiate(in, anchor.Name)
			a.diags = append(a.diags, d...)
			if s == nil {
				continue
			}
			s.Name = fmt.Sprintf("%s.%s@%s", p.Name, in.Name, anchor.Name)
			if in.Every > 0 {
				s.Every, s.Anchor = in.Every, anchor.Name
			}
			a.inserted = append(a.inserted, s)
			a.from[s] = p
			a.out.Steps = append(a.out.Steps, s)
		}
	}
}

// warnUnmatched warns of an insert whose glob matches no step of the task.
func (a *application) warnUnmatched() {
	for _, p := range a.policies {
		for _, in := range p.Inserts {
			_, glob := in.Anchor()
			if !slices.ContainsFunc(a.task.Steps, func(s *taskfile.Step) bool { ok, _ := path.Match(glob, s.Name); return ok }) {
				a.diags = append(a.diags, &hcl.Diagnostic{
					Severity: hcl.DiagWarning,
					Summary:  "Insert matches no step",
					Detail:   fmt.Sprintf("Policy %s inserts %q next to steps matching %q, and task %q has none.", p.Ref(), in.Name, glob, a.task.Name),
					Subject:  in.anchorRng.Ptr(),
				})
			}
		}
	}
}

// number gives every step of out its index, and each anchor the count of
// its window steps.
func (a *application) number() {
	index := map[string]int{}
	for i, s := range a.out.Steps {
		s.Index = i
		index[s.Name] = i
		if s.Every > 0 {
			a.out.Steps[index[s.Anchor]].Windows++
		}
	}
}

// resolveRepairs points every repair of out at the index of the step it
// restarts from: the same step or one that runs before it, never a window
// step ("anchor" already names the insert's anchor).
func (a *application) resolveRepairs() {
	index := map[string]int{}
	for i, s := range a.out.Steps {
		index[s.Name] = i
	}
	for _, s := range a.out.Steps {
		if s.Repair == nil || s.Repair.RestartFrom == "" {
			continue
		}
		target, ok := index[s.Repair.RestartFrom]
		rng := s.Repair.RestartRange()
		switch {
		case !ok:
			a.diags = append(a.diags, &hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  "Reference to undeclared step",
				Detail:   fmt.Sprintf("restart_from names step %q, but the task declares no such step; restart_from = \"anchor\" names the step an insert is next to.", s.Repair.RestartFrom),
				Subject:  rng.Ptr(),
			})
		case target > s.Index:
			a.diags = append(a.diags, &hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  "Invalid repair target",
				Detail:   fmt.Sprintf("restart_from must name step %q or a step that runs before it; step %q comes later.", s.Name, s.Repair.RestartFrom),
				Subject:  rng.Ptr(),
			})
		case a.out.Steps[target].Every > 0:
			anchor := a.out.Steps[target].Anchor
			a.diags = append(a.diags, &hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  "Invalid repair target",
				Detail:   fmt.Sprintf("Step %q is inserted with every: its windows exist only while its anchor %q runs, so a repair restarts from %q or earlier.", s.Repair.RestartFrom, anchor, anchor),
				Subject:  rng.Ptr(),
			})
		default:
			s.Repair.RestartIndex = target
		}
	}
}

// instantiate decodes insert in afresh, pointed at anchor: every step it is
// inserted next to gets its own expressions.
func (p *Policy) instantiate(in *Insert, anchor string) (*taskfile.Step, hcl.Diagnostics) {
	file, diags := hclsyntax.ParseConfig(p.Text, p.Filename, p.Start)
	if diags.HasErrors() {
		return nil, diags
	}
	bounds.Instrument(file.Body)
	content, _ := file.Body.Content(policyFileSchema)
	if len(content.Blocks) != 1 {
		return nil, diags
	}
	pc, _ := content.Blocks[0].Body.Content(policySchema)
	i := 0
	for _, b := range pc.Blocks {
		if b.Type != "insert" {
			continue
		}
		if i == p.blocks[in].index {
			s, d := decodeInsertStep(b, anchor)
			if d.HasErrors() {
				return nil, d
			}
			return s, d
		}
		i++
	}
	return nil, diags
}

// applyParams sets Step.Params from the policies' params, reporting a
// parameter two policies set for one step.
func applyParams(steps []*taskfile.Step, ps []*Policy) hcl.Diagnostics {
	var diags hcl.Diagnostics
	reported := map[string]bool{}
	for _, s := range steps {
		params := map[string][]byte{}
		from := map[string]*Policy{}
		for _, p := range ps {
			if len(p.Params) == 0 {
				continue
			}
			if ok, _ := path.Match(p.Steps, s.Name); !ok {
				continue
			}
			for k, v := range p.Params {
				if prev, dup := from[k]; dup {
					key := prev.Ref() + "\x00" + p.Ref() + "\x00" + k
					if !reported[key] {
						reported[key] = true
						r := p.paramRange[k]
						diags = append(diags, &hcl.Diagnostic{
							Severity: hcl.DiagError,
							Summary:  "Conflicting policy parameter",
							Detail:   fmt.Sprintf("Policies %s and %s both set parameter %q for step %q (%s at %s). Enable one of them, or narrow their steps patterns so that they do not overlap.", prev.Ref(), p.Ref(), k, s.Name, prev.Ref(), prev.paramRange[k]),
							Subject:  &r,
						})
					}
					continue
				}
				from[k] = p
				params[k] = v
			}
		}
		if len(params) > 0 {
			s.Params = encodeParams(params)
		} else {
			s.Params = nil
		}
	}
	return diags
}

// encodeParams writes params as one JSON object with sorted keys.
func encodeParams(params map[string][]byte) []byte {
	keys := make([]string, 0, len(params))
	for k := range params {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var buf bytes.Buffer
	buf.WriteByte('{')
	for i, k := range keys {
		if i > 0 {
			buf.WriteByte(',')
		}
		key, _ := jsonval.ToJSON(cty.StringVal(k))
		buf.Write(key)
		buf.WriteByte(':')
		buf.Write(params[k])
	}
	buf.WriteByte('}')
	return buf.Bytes()
}

// applyOverrides changes the limits of matching steps, reporting a field two
// overrides set for one step.
func applyOverrides(steps []*taskfile.Step, ps []*Policy) hcl.Diagnostics {
	var diags hcl.Diagnostics
	reported := map[string]bool{}
	type setBy struct {
		p *Policy
		o *Override
	}
	for _, s := range steps {
		from := map[string]setBy{}
		for _, p := range ps {
			for _, o := range p.Overrides {
				if ok, _ := path.Match(o.Steps, s.Name); !ok {
					continue
				}
				fields := make([]string, 0, len(o.ranges))
				for f := range o.ranges {
					fields = append(fields, f)
				}
				sort.Strings(fields)
				for _, f := range fields {
					if prev, dup := from[f]; dup {
						key := fmt.Sprintf("%p\x00%p\x00%s", prev.o, o, f)
						if !reported[key] {
							reported[key] = true
							r := o.ranges[f]
							diags = append(diags, &hcl.Diagnostic{
								Severity: hcl.DiagError,
								Summary:  "Conflicting policy override",
								Detail:   fmt.Sprintf("Policies %s and %s both override %s of step %q (%s at %s). Enable one of them, or narrow their steps patterns so that they do not overlap.", prev.p.Ref(), p.Ref(), f, s.Name, prev.p.Ref(), prev.o.ranges[f]),
								Subject:  &r,
							})
						}
						continue
					}
					from[f] = setBy{p, o}
					o.apply(s, f)
				}
			}
		}
	}
	return diags
}

// apply sets one field of the override on s. repair_max changes only a step
// that has a repair block.
func (o *Override) apply(s *taskfile.Step, field string) {
	switch field {
	case "attempts":
		if o.Attempts != nil {
			s.Retry.Attempts = *o.Attempts
		}
	case "backoff":
		if o.Backoff != nil {
			s.Retry.Backoff = *o.Backoff
			if s.Retry.MaxBackoff < s.Retry.Backoff {
				s.Retry.MaxBackoff = s.Retry.Backoff
			}
		}
	case "max_backoff":
		if o.MaxBackoff != nil {
			s.Retry.MaxBackoff = max(*o.MaxBackoff, s.Retry.Backoff)
		}
	case "timeout":
		if o.Timeout != nil {
			s.Timeout = *o.Timeout
		}
	case "memory":
		if o.Memory != nil {
			s.Memory = *o.Memory
		}
	case "host_calls":
		if o.HostCalls != nil {
			s.HostCalls = *o.HostCalls
		}
	case "repair_max":
		if o.RepairMax != nil && s.Repair != nil {
			s.Repair.Max = *o.RepairMax
		}
	}
}
