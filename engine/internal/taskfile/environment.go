package taskfile

import (
	"fmt"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"

	"github.com/lhengine/lhengine/engine/internal/githead"
	"github.com/lhengine/lhengine/engine/internal/hcldecode"
)

// Fact kinds (Fact.Kind): what an environment fact reads.
const (
	FactGitHead    = "git_head"    // the HEAD commit of the git repository in a directory
	FactFileSHA256 = "file_sha256" // the sha256 of a file
	FactPlugin     = "plugin"      // the output of a plugin
)

// What a task does when a fact changed since it was last read
// (Environment.OnDrift).
const (
	OnDriftPause    = "pause"    // pause the task, naming the fact
	OnDriftContinue = "continue" // record the change and go on
	OnDriftRestart  = "restart"  // run again from Environment.RestartFrom
)

// Environment is the task's environment block: facts about the world the
// task runs in, read at submit and before every unit, and what to do when
// one changed (specs/task-language.md).
type Environment struct {
	Facts []*Fact
	// OnDrift is OnDriftPause (the default), OnDriftContinue or
	// OnDriftRestart; for a restart, RestartFrom names the step (a step of
	// the task file: policies never insert it).
	OnDrift     string
	RestartFrom string
	DeclRange   hcl.Range

	onDriftRange hcl.Range
}

// Fact is one fact "NAME" block.
type Fact struct {
	Name string
	Kind string // FactGitHead, FactFileSHA256 or FactPlugin
	// Path is the directory, file or plugin as written; ResolvedPath is
	// filepath.Join(Task.Dir, Path) unless Path is absolute.
	Path         string
	ResolvedPath string
	DeclRange    hcl.Range

	pathRange hcl.Range // the source attribute's value
}

// PathRange is the range of the fact's path in the task file, for
// diagnostics about the file it names.
func (f *Fact) PathRange() hcl.Range { return f.pathRange }

var environmentSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{{Name: "on_drift"}},
	Blocks:     []hcl.BlockHeaderSchema{{Type: "fact", LabelNames: []string{"name"}}},
}

var factSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{{Name: FactGitHead}, {Name: FactFileSHA256}, {Name: FactPlugin}},
}

// decodeEnvironmentBlock decodes an environment block. A restart:STEP
// target is resolved later, by resolveEnvironment, once the steps are known.
func decodeEnvironmentBlock(block *hcl.Block) (*Environment, hcl.Diagnostics) {
	env := &Environment{OnDrift: OnDriftPause, DeclRange: block.DefRange}
	content, diags := block.Body.Content(environmentSchema)
	seen := map[string]*Fact{}
	for _, b := range content.Blocks {
		f, d := decodeFactBlock(b)
		diags = append(diags, d...)
		if f == nil {
			continue
		}
		if prev, dup := seen[f.Name]; dup {
			diags = append(diags, hcldecode.LabelError(b, "Duplicate fact", fmt.Sprintf("A fact named %q was already declared at %s. Fact names must be unique within a task.", f.Name, prev.DeclRange)))
			continue
		}
		seen[f.Name] = f
		env.Facts = append(env.Facts, f)
	}
	if len(env.Facts) == 0 && !diags.HasErrors() {
		diags = append(diags, &hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  "Environment has no facts",
			Detail:   `An environment block declares at least one fact, such as fact "head" { git_head = "repo" }.`,
			Subject:  block.DefRange.Ptr(),
		})
	}
	if attr, ok := content.Attributes["on_drift"]; ok {
		v, d := hcldecode.String(attr)
		diags = append(diags, d...)
		if !d.HasErrors() {
			env.onDriftRange = attr.Expr.Range()
			switch {
			case v == OnDriftPause || v == OnDriftContinue:
				env.OnDrift = v
			case strings.HasPrefix(v, OnDriftRestart+":") && len(v) > len(OnDriftRestart)+1:
				env.OnDrift, env.RestartFrom = OnDriftRestart, v[len(OnDriftRestart)+1:]
			default:
				diags = append(diags, hcldecode.Error(attr, "Invalid on_drift",
					fmt.Sprintf("on_drift must be \"pause\", \"continue\" or \"restart:STEP\" (STEP a step of the task); got %q.%s", v,
						hcldecode.DidYouMean(v, []string{OnDriftPause, OnDriftContinue, OnDriftRestart + ":"}))))
			}
		}
	}
	return env, diags
}

// decodeFactBlock decodes a fact block: exactly one of git_head,
// file_sha256 and plugin, a non-empty path.
func decodeFactBlock(block *hcl.Block) (*Fact, hcl.Diagnostics) {
	f := &Fact{Name: block.Labels[0], DeclRange: block.DefRange}
	var diags hcl.Diagnostics
	if !hclsyntax.ValidIdentifier(f.Name) {
		diags = append(diags, hcldecode.InvalidName("fact", block))
	}
	content, d := block.Body.Content(factSchema)
	diags = append(diags, d...)
	var kinds []*hcl.Attribute
	for _, k := range []string{FactGitHead, FactFileSHA256, FactPlugin} {
		if attr, ok := content.Attributes[k]; ok {
			kinds = append(kinds, attr)
		}
	}
	switch len(kinds) {
	case 0:
		if !d.HasErrors() {
			diags = append(diags, &hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  "Fact has no source",
				Detail:   fmt.Sprintf("Fact %q needs exactly one of git_head = \"DIR\", file_sha256 = \"FILE\" or plugin = \"PLUGIN.wasm\".", f.Name),
				Subject:  block.DefRange.Ptr(),
			})
		}
		return nil, diags
	case 1:
	default:
		diags = append(diags, hcldecode.Error(kinds[1], "Fact has more than one source",
			fmt.Sprintf("Fact %q sets both %s and %s; a fact reads one thing.", f.Name, kinds[0].Name, kinds[1].Name)))
		return nil, diags
	}
	attr := kinds[0]
	p, d := hcldecode.String(attr)
	diags = append(diags, d...)
	if d.HasErrors() {
		return nil, diags
	}
	if p == "" {
		diags = append(diags, hcldecode.Error(attr, "Invalid fact path", attr.Name+" must name a path, relative to the task file's directory or absolute."))
		return nil, diags
	}
	f.Kind, f.Path = attr.Name, p
	f.pathRange = attr.Expr.Range()
	return f, diags
}

// resolveEnvironment resolves the restart:STEP target of on_drift.
func resolveEnvironment(task *Task, steps map[string]*Step) hcl.Diagnostics {
	env := task.Environment
	if env == nil || env.OnDrift != OnDriftRestart {
		return nil
	}
	if _, ok := steps[env.RestartFrom]; !ok {
		return hcl.Diagnostics{undeclaredStep("on_drift restarts from", env.RestartFrom, env.onDriftRange, task.Steps)}
	}
	return nil
}

// ReadFacts reads every fact of the environment now, by name, running a
// plugin fact with plugin. A task without an environment block has none
// (nil).
func (env *Environment) ReadFacts(plugin func(*Fact) (string, error)) (map[string]string, error) {
	if env == nil {
		return nil, nil
	}
	out := make(map[string]string, len(env.Facts))
	for _, f := range env.Facts {
		var (
			v   string
			err error
		)
		if f.Kind == FactPlugin && plugin != nil {
			v, err = plugin(f)
			if err != nil {
				err = fmt.Errorf("fact %q: plugin %s: %w", f.Name, f.Path, err)
			}
		} else {
			v, err = f.Read()
		}
		if err != nil {
			return nil, err
		}
		out[f.Name] = v
	}
	return out, nil
}

// Read reads the fact's current value: for git_head the hex id of the
// commit HEAD points to, for file_sha256 the file's sha256 in lower-case
// hex. A plugin fact is read by ReadFacts' plugin runner only.
func (f *Fact) Read() (string, error) {
	var (
		v   string
		err error
	)
	switch f.Kind {
	case FactGitHead:
		v, err = githead.Read(f.ResolvedPath)
	case FactFileSHA256:
		v, err = HashFile(f.ResolvedPath)
	default:
		err = fmt.Errorf("facts of kind %q cannot be read", f.Kind)
	}
	if err != nil {
		return "", fmt.Errorf("fact %q: %w", f.Name, err)
	}
	return v, nil
}
