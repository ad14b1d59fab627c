package engine

import (
	"encoding/json"
	"fmt"
	"path/filepath"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"

	"github.com/lhengine/lhengine/engine/internal/plan"
	"github.com/lhengine/lhengine/engine/internal/policylang"
	"github.com/lhengine/lhengine/engine/internal/taskfile"
)

// PolicyInfo is one policy version found on a search path
// (specs/policies.md), as the files say it, without applying it.
type PolicyInfo struct {
	Name    string `json:"name"`
	Version int    `json:"version"`
	// File and Line are where the block starts; Dir is the search path
	// directory it was found in.
	File   string `json:"file"`
	Line   int    `json:"line"`
	Column int    `json:"column"`
	Dir    string `json:"dir"`
	// Text is the block's own source, exactly what a run manifest pins;
	// SHA256 is its hash, lower-case hex.
	Text       string                     `json:"text"`
	SHA256     string                     `json:"sha256"`
	Assumption string                     `json:"assumption"`
	Evidence   PolicyEvidence             `json:"evidence"`
	Steps      string                     `json:"steps"`
	Params     map[string]json.RawMessage `json:"params,omitempty"`
	Inserts    []PolicyInsert             `json:"inserts,omitempty"`
	Overrides  []PolicyOverride           `json:"overrides,omitempty"`
	// ShadowedBy is "file:line" of the copy of the same name and version
	// found earlier on the search path, which is the one a run selects;
	// "" for the copy a run selects.
	ShadowedBy string `json:"shadowed_by,omitempty"`
}

// Ref is NAME@VERSION.
func (p PolicyInfo) Ref() string { return fmt.Sprintf("%s@%d", p.Name, p.Version) }

// PolicyEvidence is why a policy is believed to help.
type PolicyEvidence struct {
	Text   string `json:"text"`
	Result string `json:"result,omitempty"`
}

// PolicyInsert is a step a policy inserts before or after every task step
// whose name matches Glob; Where is "before" or "after". Plugin is the
// plugin attribute as written (relative to the policy file), "" when it is
// not a plain string.
type PolicyInsert struct {
	Name   string `json:"name"`
	Where  string `json:"where"`
	Glob   string `json:"glob"`
	Plugin string `json:"plugin,omitempty"`
}

// PolicyOverride changes limits of the steps matching Steps: Fields maps
// each field it sets to its value as written.
type PolicyOverride struct {
	Steps  string            `json:"steps"`
	Fields map[string]string `json:"fields"`
}

// PolicySearchPath returns the directories policies are looked for in, in
// order, all absolute: policies/ beside taskFile (./policies when taskFile is
// ""), dirs, then home/policies when home is not "".
func PolicySearchPath(taskFile string, dirs []string, home string) []string {
	taskDir := "."
	if taskFile != "" {
		taskDir = filepath.Dir(taskFile)
	}
	return plan.PolicyOptions{Dirs: dirs, Home: home}.SearchPath(taskDir)
}

// Policies reads every policy file of the directories, in search order, and
// returns every policy version found, in that order; a later copy of a name
// and version is marked as shadowed by the first. A directory that does not
// exist is skipped unless it is in required. Policies only reads files.
func Policies(dirs, required []string) ([]PolicyInfo, *Diagnostics) {
	var req []string
	for _, d := range required {
		if abs, err := filepath.Abs(d); err == nil {
			d = abs
		}
		req = append(req, d)
	}
	var all []PolicyInfo
	files := map[string][]byte{}
	var diags hcl.Diagnostics
	first := map[string]string{}
	for _, dir := range dirs {
		ps, fs, d := plan.LoadPolicies([]string{dir}, req)
		diags = append(diags, d...)
		for k, v := range fs {
			files[k] = v
		}
		for _, p := range ps {
			info := policyInfo(p)
			info.Dir = dir
			at := fmt.Sprintf("%s:%d", p.Filename, p.Start.Line)
			if prev, ok := first[p.Ref()]; ok {
				info.ShadowedBy = prev
			} else {
				first[p.Ref()] = at
			}
			all = append(all, info)
		}
	}
	return all, &Diagnostics{diags: diags, files: files}
}

// FindPolicy returns the copy a run selecting ref (NAME or NAME@VERSION)
// would apply: NAME@VERSION the first of that name and version in list
// order, NAME the highest version, the first among equal ones.
func FindPolicy(list []PolicyInfo, ref string) (PolicyInfo, error) {
	r, err := taskfile.ParsePolicyRef(ref)
	if err != nil {
		return PolicyInfo{}, err
	}
	found, versions := r.Select(len(list), func(i int) (string, int) { return list[i].Name, list[i].Version })
	if found >= 0 {
		return list[found], nil
	}
	if len(versions) == 0 {
		return PolicyInfo{}, fmt.Errorf("no policy %q on the search path", r.Name)
	}
	return PolicyInfo{}, fmt.Errorf("policy %q has versions %v, not %d", r.Name, versions, r.Version)
}

// IsPolicyRef reports whether s is NAME or NAME@VERSION.
func IsPolicyRef(s string) bool {
	_, err := taskfile.ParsePolicyRef(s)
	return err == nil
}

func policyInfo(p *policylang.Policy) PolicyInfo {
	info := PolicyInfo{
		Name: p.Name, Version: p.Version, File: p.Filename, Line: p.Start.Line, Column: p.Start.Column,
		Text: string(p.Text), SHA256: p.SHA256, Assumption: p.Assumption,
		Evidence: PolicyEvidence{Text: p.Evidence.Text, Result: p.Evidence.Result},
		Steps:    p.Steps,
	}
	if len(p.Params) > 0 {
		info.Params = map[string]json.RawMessage{}
		for k, v := range p.Params {
			info.Params[k] = json.RawMessage(v)
		}
	}
	plugins, overrides := blockSources(p)
	for i, in := range p.Inserts {
		where, glob := in.Anchor()
		pi := PolicyInsert{Name: in.Name, Where: where, Glob: glob}
		if i < len(plugins) {
			pi.Plugin = plugins[i]
		}
		info.Inserts = append(info.Inserts, pi)
	}
	for i, o := range p.Overrides {
		po := PolicyOverride{Steps: o.Steps, Fields: map[string]string{}}
		if i < len(overrides) {
			po.Fields = overrides[i]
		}
		info.Overrides = append(info.Overrides, po)
	}
	return info
}

// blockSources reads from the policy's text the plugin of each insert and
// the fields each override sets, as written, in declaration order.
func blockSources(p *policylang.Policy) (plugins []string, overrides []map[string]string) {
	file, diags := hclsyntax.ParseConfig(p.Text, p.Filename, p.Start)
	if diags.HasErrors() {
		return nil, nil
	}
	body, ok := file.Body.(*hclsyntax.Body)
	if !ok || len(body.Blocks) != 1 {
		return nil, nil
	}
	src := func(r hcl.Range) string {
		from, to := r.Start.Byte-p.Start.Byte, r.End.Byte-p.Start.Byte
		if from < 0 || to > len(p.Text) || from > to {
			return ""
		}
		return string(p.Text[from:to])
	}
	for _, b := range body.Blocks[0].Body.Blocks {
		switch b.Type {
		case "insert":
			plugin := ""
			if attr, ok := b.Body.Attributes["plugin"]; ok {
				if v, d := attr.Expr.Value(nil); !d.HasErrors() && v.Type() == cty.String && v.IsKnown() && !v.IsNull() {
					plugin = v.AsString()
				}
			}
			plugins = append(plugins, plugin)
		case "override":
			fields := map[string]string{}
			for name, attr := range b.Body.Attributes {
				if name != "steps" {
					fields[name] = src(attr.Expr.Range())
				}
			}
			overrides = append(overrides, fields)
		}
	}
	return plugins, overrides
}
