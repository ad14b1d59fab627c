package engine

import (
	"context"
	"io"

	"github.com/hashicorp/hcl/v2"

	"github.com/lhengine/lhengine/engine/internal/guest"
	"github.com/lhengine/lhengine/engine/internal/plan"
	"github.com/lhengine/lhengine/engine/internal/taskfile"
	"github.com/lhengine/lhengine/ledger"
)

// Diagnostics are the problems found in a task file, with the sources they
// point into. Render them with Write; List gives them as data.
type Diagnostics struct {
	diags hcl.Diagnostics
	files map[string][]byte
}

// Diagnostic is one problem in a task file.
type Diagnostic struct {
	Error   bool   `json:"error"` // false: a warning
	Summary string `json:"summary"`
	Detail  string `json:"detail,omitempty"`
	// Range is where it is, as "file:line,col-line,col" ("" when the
	// problem has no place in the file).
	Range string `json:"range,omitempty"`
}

// HasErrors reports whether any diagnostic is an error.
func (d *Diagnostics) HasErrors() bool { return d != nil && d.diags.HasErrors() }

// List returns the diagnostics in order.
func (d *Diagnostics) List() []Diagnostic {
	if d == nil {
		return nil
	}
	out := make([]Diagnostic, 0, len(d.diags))
	for _, x := range d.diags {
		r := ""
		if x.Subject != nil {
			r = x.Subject.String()
		}
		out = append(out, Diagnostic{Error: x.Severity == hcl.DiagError, Summary: x.Summary, Detail: x.Detail, Range: r})
	}
	return out
}

// Write renders the diagnostics with file:line:col and source excerpts,
// wrapped at width columns (0: no wrapping), in color if asked.
func (d *Diagnostics) Write(w io.Writer, width uint, color bool) error {
	if d == nil || len(d.diags) == 0 {
		return nil
	}
	return taskfile.WriteDiagnostics(w, d.files, d.diags, width, color)
}

// InvalidTaskError is returned by Submit for a task file that does not
// validate.
type InvalidTaskError struct{ Diagnostics *Diagnostics }

func (e *InvalidTaskError) Error() string {
	return (&plan.InvalidTaskError{Diagnostics: e.Diagnostics.diags}).Error()
}

// Validate parses and validates a task file, checking its plugin files.
func Validate(ctx context.Context, path string) *Diagnostics {
	_, files, diags := plan.Validate(ctx, path, nil)
	return &Diagnostics{diags: diags, files: files}
}

// ValidateOptions choose the harness policies a validation applies, as
// SubmitOptions choose a submission's (specs/policies.md).
type ValidateOptions struct {
	Policies   []string // NAME or NAME@VERSION: added, or re-versioned
	Without    []string // names removed
	PolicyDirs []string // searched after policies/ beside the task file
	Home       string   // when set, Home/policies is searched last
	// GrantPolicies names policies whose inserted steps may reach what
	// no step of the task does (--grant-policy).
	GrantPolicies []string
}

// ValidateWith is Validate with the policies o chooses applied: what a
// submission with the same choice would check, steps the policies insert
// included.
func ValidateWith(ctx context.Context, path string, o ValidateOptions) *Diagnostics {
	diags, _ := ValidatePolicies(ctx, path, o)
	return diags
}

// PolicyGrant is one capability a step inserted by a policy has
// (specs/policies.md, §2.5): a mount, a host its http.fetch or http
// effects may reach, the file effect, a workspace or a model. ByTask: a
// step of the task's own has it too. Granted: none has, and the run names
// the policy with --grant-policy.
type PolicyGrant struct {
	Policy     string `json:"policy"` // NAME@VERSION
	Step       string `json:"step"`
	Capability string `json:"capability"`
	ByTask     bool   `json:"by_task"`
	Granted    bool   `json:"granted"`
}

// ValidatePolicies is ValidateWith, also returning every capability the
// steps the policies insert have (none when the task does not validate).
func ValidatePolicies(ctx context.Context, path string, o ValidateOptions) (*Diagnostics, []PolicyGrant) {
	t, _, files, diags := plan.ValidateWith(ctx, path, plan.PolicyOptions{
		Add: o.Policies, Without: o.Without, Dirs: o.PolicyDirs, Home: o.Home, Grant: o.GrantPolicies}, nil)
	var grants []PolicyGrant
	if t != nil && !diags.HasErrors() {
		grants = policyGrants(t)
	}
	return &Diagnostics{diags: diags, files: files}, grants
}

// ManifestGrants returns the capabilities of the steps the policies pinned
// in m insert, read back from the pinned task and policy texts; nil when
// they do not parse.
func ManifestGrants(m *ledger.Manifest) []PolicyGrant {
	spec, err := plan.FromManifest(m)
	if err != nil {
		return nil
	}
	return policyGrants(spec.Task)
}

func policyGrants(t *taskfile.Task) []PolicyGrant {
	out := make([]PolicyGrant, 0, len(t.PolicyGrants))
	for _, g := range t.PolicyGrants {
		out = append(out, PolicyGrant{Policy: g.Policy, Step: g.Step, Capability: g.Capability, ByTask: g.ByTask, Granted: !g.ByTask})
	}
	return out
}

// PluginInfo describes a plugin module without running it.
type PluginInfo struct {
	// ABI is the plugin ABI the module speaks: "1" when it imports from
	// lhengine_v1, "1 (envelope only)" when it imports nothing from the host
	// beyond WASI, another major version ("2") when it cannot run here.
	ABI string `json:"abi"`
	// Command reports whether the module is a WASI command (exports _start).
	Command bool `json:"command"`
	// Imports are the imported functions in import order; Exports the
	// exported functions sorted by name.
	Imports []PluginFunc `json:"imports"`
	Exports []PluginFunc `json:"exports"`
	// MemoryMinPages and MemoryMaxPages are the declared limits of the
	// module's memory in 64 KiB pages (max 0: none declared).
	MemoryMinPages uint32 `json:"memory_min_pages"`
	MemoryMaxPages uint32 `json:"memory_max_pages"`
}

// PluginFunc is an imported or exported function; Module is empty for
// exports. Params and Results are Wasm value types ("i32", "i64", ...).
type PluginFunc struct {
	Module  string   `json:"module,omitempty"`
	Name    string   `json:"name"`
	Params  []string `json:"params"`
	Results []string `json:"results"`
}

// String renders f as "module.name(i32, i32) -> i32".
func (f PluginFunc) String() string {
	return guest.Func{Module: f.Module, Name: f.Name, Params: f.Params, Results: f.Results}.String()
}

// InspectPlugin describes a module without running it.
func InspectPlugin(ctx context.Context, wasm []byte) (PluginInfo, error) {
	in, err := guest.Inspect(ctx, wasm)
	if err != nil {
		return PluginInfo{}, err
	}
	funcs := func(fs []guest.Func) []PluginFunc {
		out := make([]PluginFunc, len(fs))
		for i, f := range fs {
			out[i] = PluginFunc{Module: f.Module, Name: f.Name, Params: f.Params, Results: f.Results}
		}
		return out
	}
	return PluginInfo{ABI: in.ABI, Command: in.Command, Imports: funcs(in.Imports), Exports: funcs(in.Exports),
		MemoryMinPages: in.MemoryMinPages, MemoryMaxPages: in.MemoryMaxPages}, nil
}
