package plan

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"syscall"

	"github.com/hashicorp/hcl/v2"

	"github.com/lhengine/lhengine/engine/internal/bounds"
	"github.com/lhengine/lhengine/engine/internal/policylang"
	"github.com/lhengine/lhengine/engine/internal/taskfile"
	"github.com/lhengine/lhengine/ledger"
)

// PolicyOptions change which policies a run applies beyond the ones its
// task file lists, and where they are looked for (specs/policies.md, §4).
type PolicyOptions struct {
	// Add selects NAME or NAME@VERSION: a policy the task lists is
	// re-versioned, another one is added after the task's own.
	Add []string
	// Without removes policies by name; a name not selected is no error.
	Without []string
	// Grant names policies whose inserted steps may reach what no step of
	// the task does (--grant-policy; policylang.ApplyPolicies).
	Grant []string
	// Dirs are searched after the policies/ directory beside the task file.
	Dirs []string
	// Home, when set, makes Home/policies the last directory searched.
	Home string

	// Files is where the task file, its plugins, prompts and the policy
	// files of the search path are read; nil means the local disk
	// (taskfile.OSFiles). It is not a policy option, but every file a
	// submission reads goes through it, and these options go wherever
	// the submission is read.
	Files taskfile.Files
}

// files is o.Files, or the local disk.
func (o PolicyOptions) files() taskfile.Files {
	if o.Files == nil {
		return taskfile.OSFiles{}
	}
	return o.Files
}

// SearchPath returns the directories policies are looked for in, in order:
// policies/ beside the task file, o.Dirs, then Home/policies.
func (o PolicyOptions) SearchPath(taskDir string) []string {
	var dirs []string
	add := func(d string) {
		if abs, err := filepath.Abs(d); err == nil {
			d = abs
		}
		if !slices.Contains(dirs, d) {
			dirs = append(dirs, d)
		}
	}
	add(filepath.Join(taskDir, "policies"))
	for _, d := range o.Dirs {
		add(d)
	}
	if o.Home != "" {
		add(filepath.Join(o.Home, "policies"))
	}
	return dirs
}

// Selection returns the policies a run of t selects: the task's policies
// attribute, then o.Add (re-versioning or adding), less o.Without.
func (o PolicyOptions) Selection(t *taskfile.Task) ([]taskfile.PolicyRef, hcl.Diagnostics) {
	refs := slices.Clone(t.Policies)
	var diags hcl.Diagnostics
	for _, s := range o.Add {
		r, err := taskfile.ParsePolicyRef(s)
		if err != nil {
			diags = append(diags, &hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  "Invalid policy reference",
				Detail:   fmt.Sprintf("--policy selects NAME or NAME@VERSION: %v.", err),
			})
			continue
		}
		if i := slices.IndexFunc(refs, func(x taskfile.PolicyRef) bool { return x.Name == r.Name }); i >= 0 {
			r.Range = refs[i].Range
			refs[i] = r
			continue
		}
		refs = append(refs, r)
	}
	refs = slices.DeleteFunc(refs, func(r taskfile.PolicyRef) bool { return slices.Contains(o.Without, r.Name) })
	return refs, diags
}

// LoadPolicies reads every *.hcl file of the directories, in order (files in
// lexical order within a directory), and returns the policies found, with
// the sources the diagnostics refer to. A directory that does not exist is
// skipped, unless it is in required. Every mistake of every file read is
// reported.
func LoadPolicies(dirs []string, required []string) ([]*policylang.Policy, map[string][]byte, hcl.Diagnostics) {
	return LoadPoliciesFrom(taskfile.OSFiles{}, dirs, required)
}

// LoadPoliciesFrom is LoadPolicies reading through from.
func LoadPoliciesFrom(from taskfile.Files, dirs []string, required []string) ([]*policylang.Policy, map[string][]byte, hcl.Diagnostics) {
	files := map[string][]byte{}
	var all []*policylang.Policy
	var diags hcl.Diagnostics
	for _, dir := range dirs {
		entries, err := from.ReadDir(dir)
		var names []string
		for _, e := range entries {
			// As a glob of *.hcl would: whatever the entry's kind, which
			// reading it then judges.
			if n := e.Name(); strings.HasSuffix(n, ".hcl") {
				names = append(names, filepath.Join(dir, n))
			}
		}
		if errors.Is(err, syscall.ENOTDIR) {
			continue // a file in a directory's place holds no policies
		}
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) && !slices.Contains(required, dir) {
				continue
			}
			diags = append(diags, &hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  "Cannot read policy directory",
				Detail:   fmt.Sprintf("The policy directory %s could not be read: %v.", dir, err),
			})
			continue
		}
		sort.Strings(names)
		for _, name := range names {
			src, err := taskfile.ReadFrom(from, name, bounds.MaxSourceBytes)
			if err != nil {
				diags = append(diags, &hcl.Diagnostic{
					Severity: hcl.DiagError,
					Summary:  "Cannot read policy file",
					Detail:   fmt.Sprintf("The policy file %s could not be read: %v.", name, err),
				})
				continue
			}
			files[name] = src
			ps, d := policylang.ParsePolicies(name, src)
			diags = append(diags, d...)
			all = append(all, ps...)
		}
	}
	return all, files, diags
}

// ResolvePolicies finds the policies a run of t applies, in selection order:
// NAME@VERSION is the first block of that name and version in search order,
// NAME alone the highest version found in any directory (the first found
// among equal versions). Nothing is read when no policy is selected.
func ResolvePolicies(t *taskfile.Task, o PolicyOptions) ([]*policylang.Policy, map[string][]byte, hcl.Diagnostics) {
	refs, diags := o.Selection(t)
	if len(refs) == 0 || diags.HasErrors() {
		return nil, nil, diags
	}
	var required []string
	for _, d := range o.Dirs {
		if abs, err := filepath.Abs(d); err == nil {
			required = append(required, abs)
		}
	}
	lib, files, d := LoadPoliciesFrom(o.files(), o.SearchPath(t.Dir), required)
	diags = append(diags, d...)
	if diags.HasErrors() {
		return nil, files, diags
	}
	var out []*policylang.Policy
	for _, r := range refs {
		i, versions := r.Select(len(lib), func(i int) (string, int) { return lib[i].Name, lib[i].Version })
		if i >= 0 {
			out = append(out, lib[i])
			continue
		}
		d := &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Unknown policy"}
		if r.Range != (hcl.Range{}) {
			d.Subject = r.Range.Ptr()
		}
		if len(versions) == 0 {
			d.Detail = fmt.Sprintf("No policy %q was found in %v (specs/policies.md, the search path).", r.Name, o.SearchPath(t.Dir))
		} else {
			d.Summary = "Unknown policy version"
			d.Detail = fmt.Sprintf("Policy %q has versions %v, not %d.", r.Name, versions, r.Version)
		}
		diags = append(diags, d)
	}
	if diags.HasErrors() {
		return nil, files, diags
	}
	return out, files, diags
}

// Pins returns the manifest records of the policies.
func Pins(ps []*policylang.Policy) []ledger.PolicyPin {
	pins := make([]ledger.PolicyPin, len(ps))
	for i, p := range ps {
		pins[i] = ledger.PolicyPin{
			Name: p.Name, Version: p.Version, SHA256: p.SHA256, Filename: p.Filename,
			Line: p.Start.Line, Column: p.Start.Column, Byte: p.Start.Byte, Text: string(p.Text),
		}
	}
	return pins
}

// pinnedPolicies reads back the policies a manifest pins, from their texts
// alone, checking each text against its sha256.
func pinnedPolicies(m *ledger.Manifest) ([]*policylang.Policy, hcl.Diagnostics) {
	var ps []*policylang.Policy
	var diags hcl.Diagnostics
	for _, pin := range m.Policies {
		sum := sha256.Sum256([]byte(pin.Text))
		if hex.EncodeToString(sum[:]) != pin.SHA256 {
			diags = append(diags, &hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  "Pinned policy damaged",
				Detail:   fmt.Sprintf("The text pinned for policy %s does not have the sha256 pinned with it (%s).", pin.Ref(), pin.SHA256),
			})
			continue
		}
		start := hcl.Pos{Line: pin.Line, Column: pin.Column, Byte: pin.Byte}
		p, d := policylang.ParsePinnedPolicy(pin.Filename, []byte(pin.Text), start)
		diags = append(diags, d...)
		if p != nil {
			ps = append(ps, p)
		}
	}
	return ps, diags
}
