// Package taskfile parses, validates and evaluates lhengine task files.
//
// A task file is HCL (see specs/task-language.md). Parse turns the source into a
// *Task whose steps keep their input and for_each expressions unevaluated, with
// source ranges, so that they can be evaluated later against the outputs of
// earlier steps (EvalInput, EvalForEach). Everything that can be checked before
// the task runs is checked by Parse: the schema, names, references between
// steps, constant attributes (durations, memory sizes, retry and repair
// settings), and the types of expressions, found by evaluating them with
// unknown values for everything not yet known.
//
// Every problem is reported as an hcl.Diagnostic with a Subject range in the
// task file; nothing here prints, logs or panics. Render diagnostics at the
// edge with WriteDiagnostics.
package taskfile

import (
	"fmt"
	"io"
	"path/filepath"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"

	"github.com/lhengine/lhengine/engine/internal/bounds"
	"github.com/lhengine/lhengine/engine/internal/hcldecode"
)

// LanguageVersion is the version of the task language this package reads
// (specs/task-language.md): additions that keep every valid file valid with
// the same meaning keep it.
const LanguageVersion = 1

// Defaults applied to a step when the task file leaves an attribute out.
const (
	DefaultTimeout     = 60 * time.Second
	DefaultMemory      = 64 << 20 // 64MiB
	DefaultConcurrency = 16
	DefaultAttempts    = 1
	DefaultBackoff     = time.Second
	DefaultMaxBackoff  = time.Minute
	DefaultRepairMax   = 1

	DefaultHTTPMaxBytes = 4 << 20 // 4MiB
	DefaultHTTPTimeout  = 30 * time.Second
	DefaultWorkspace    = WorkspaceRW
	DefaultEffectMode   = EffectModeResend
)

// Workspace access modes (Step.Workspace).
const (
	WorkspaceRW   = "rw"   // the task workspace is preopened read-write
	WorkspaceRO   = "ro"   // preopened read-only
	WorkspaceNone = "none" // not preopened
)

// Effect kinds (EffectGrant.Kind): the effect journal's kinds of side effect.
const (
	EffectHTTP = "http"
	EffectFile = "file"
)

// Effect modes (EffectGrant.Mode): what the engine does with an effect that
// was journalled but may not have been applied when an attempt was cut short.
const (
	EffectModeResend = "resend" // apply it again with the same idempotency key
	EffectModeCheck  = "check"  // ask CheckURL whether it was applied
	EffectModeManual = "manual" // stop and let a person decide
)

// Limits on step attributes.
const (
	// MinMemory is one WebAssembly page: a smaller cap could not hold any memory.
	MinMemory = 64 << 10
	// MaxMemory is the 32-bit WebAssembly address space.
	MaxMemory = 4 << 30
	// MaxHTTPMaxBytes bounds http.max_bytes: a larger body could not be
	// handed to a plugin.
	MaxHTTPMaxBytes = MaxMemory
)

// Task is a parsed and validated task file.
//
// A Task is immutable after Parse returns it and is safe for concurrent use.
type Task struct {
	Name        string
	Objective   string
	Constraints []string
	Variables   []*Variable
	Steps       []*Step
	Filename    string // as given to Parse
	Dir         string // directory plugin paths are relative to
	Source      []byte
	DeclRange   hcl.Range // the task block's header
	Limits      Limits    // the limits block over DefaultLimits
	Models      []*Model  // the model blocks, in declaration order
	Prompts     []*Prompt // the prompt blocks, in declaration order
	// Budget is the budget block (budget.go); nil when the task has none.
	Budget *Budget
	// Environment is the environment block (environment.go); nil when the
	// task has none.
	Environment *Environment
	// Notify is the notify block (notify.go); nil when the task has none.
	Notify *Notify
	// Progress is the progress block (progress.go); nil when the task has
	// none.
	Progress *Progress
	// Policies are the policies the task selects (specs/policies.md), as
	// written; policylang.ApplyPolicies applies the ones a run resolves.
	Policies []PolicyRef
	// PolicyGrants, set by policylang.ApplyPolicies, are the capabilities
	// of the steps the policies insert, in step order.
	PolicyGrants []PolicyGrant

	// files is where the task's plugins and prompts were read
	// (Options.Files); the steps policies insert read theirs there too.
	files Files
}

// Variable is a declared input of a task.
type Variable struct {
	Name        string
	Description string
	Type        cty.Type  // cty.DynamicPseudoType when no type given
	Default     cty.Value // cty.NilVal when no default (the variable is then required)
	DeclRange   hcl.Range // the variable block's header
}

// Required reports whether the variable has no default, so a value must be given.
func (v *Variable) Required() bool { return v.Default == cty.NilVal }

// Step is one stage of a task's pipeline.
//
// Input and ForEach are kept as expressions: they are evaluated at run time,
// when the outputs of earlier steps are known (EvalInput, EvalForEach).
type Step struct {
	Name         string
	Index        int // position in Task.Steps
	Plugin       string
	PluginPath   string         // filepath.Join(Task.Dir, Plugin) unless Plugin is absolute
	PluginSHA256 string         // "" if not given; lower-case hex
	Input        hcl.Expression // nil when absent (input is then null)
	ForEach      hcl.Expression // nil when not a fan-out step
	Concurrency  int            // fan-out items run at once; 1 for a step without for_each
	Timeout      time.Duration  // per attempt
	Memory       uint64         // bytes
	Retry        Retry
	Repair       *Repair   // nil when absent
	Approval     *Approval // nil when absent: units run without a person's decision
	DeclRange    hcl.Range // the step block's header
	PluginRange  hcl.Range // the plugin attribute's expression range

	// AllowFailures, or AllowFailuresPercent of the step's items (rounded
	// down), is how many fan-out items may fail beyond their retries
	// without failing the task (allow_failures; Allowed); both 0: none.
	AllowFailures        int
	AllowFailuresPercent float64

	// What the step may reach; everything not granted is denied.
	HTTP      *HTTPGrant              // nil: no http.fetch
	Effects   map[string]*EffectGrant // by kind; nil when the step declares no effect
	Workspace string                  // WorkspaceRW, WorkspaceRO or WorkspaceNone
	Mounts    []*Mount                // extra read-only directories, in declaration order
	HostCalls int                     // host calls allowed per attempt; 0 means unlimited
	Limits    *Limits                 // the task's limits; nil (a Step not from Parse) means DefaultLimits
	Models    map[string]*Model       // the task's models the step may call, by name; nil when it may call none

	// Set by policylang.ApplyPolicies (specs/policies.md): the policy parameters
	// handed to the step's plugin (a JSON object; nil for none), and the
	// policy versions of the run, NAME@VERSION.
	Params   []byte
	Policies []string
	// Every, Anchor: a window step (a policy's insert with every = N) of
	// step Anchor; Windows: the number of window steps right after this
	// one (store.StepState).
	Every   int
	Anchor  string
	Windows int

	modelNames []string       // the models attribute, resolved into Models by resolveModels
	modelsAttr *hcl.Attribute // the models attribute; nil when absent

	task           taskInfo  // for task.name, task.objective, task.constraints
	shaRange       hcl.Range // the plugin_sha256 expression, for a mismatch found later
	workspaceRange hcl.Range // the workspace attribute's value; empty when absent
	allowRange     hcl.Range // the http block's allow value; empty when absent
}

// Retry says how often a failed attempt of a step (or of one fan-out item) is
// tried again, and how long to wait in between.
type Retry struct {
	Attempts   int // total attempts including the first; >= 1
	Backoff    time.Duration
	MaxBackoff time.Duration
}

// Delay returns how long to wait after attempt number failedAttempt (1 for the
// first attempt) failed before the next one: Backoff * 2^(failedAttempt-1),
// capped at MaxBackoff. A failedAttempt below 1 is treated as 1.
func (r Retry) Delay(failedAttempt int) time.Duration {
	if r.Backoff <= 0 {
		return 0
	}
	d := r.Backoff
	for i := 1; i < failedAttempt; i++ {
		if r.MaxBackoff > 0 && d >= r.MaxBackoff {
			break
		}
		if d > (1<<62)/2 { // doubling would overflow
			break
		}
		d *= 2
	}
	if r.MaxBackoff > 0 && d > r.MaxBackoff {
		d = r.MaxBackoff
	}
	return d
}

// Repair says where a task goes back to when this step's plugin reports that
// the work needs repair, and how many times that may happen.
type Repair struct {
	RestartFrom  string // name of this step or an earlier one
	RestartIndex int    // index of RestartFrom in Task.Steps
	Max          int    // repairs allowed before the task fails; >= 0
	DeclRange    hcl.Range

	restartRange hcl.Range // the restart_from expression
}

// RestartRange is the range of the restart_from expression, for a
// mistake in the target found later.
func (r *Repair) RestartRange() hcl.Range { return r.restartRange }

// HTTPGrant lets a step read through the http.fetch capability.
type HTTPGrant struct {
	Allow     []string      // host patterns (HostAllowed), lower-cased; at least one
	MaxBytes  int64         // response body cap
	Timeout   time.Duration // per request
	DeclRange hcl.Range     // the http block's header
}

// EffectGrant lets a step make side effects of one kind through the effect
// journal.
type EffectGrant struct {
	Kind      string    // EffectHTTP or EffectFile
	Hosts     []string  // host patterns (HostAllowed), lower-cased; kind http only
	Mode      string    // EffectModeResend, EffectModeCheck or EffectModeManual
	CheckURL  string    // http(s) URL without query; set exactly when Mode is EffectModeCheck
	DeclRange hcl.Range // the effect block's header
}

// Mount is an extra directory preopened read-only for a step at /mnt/<Name>.
type Mount struct {
	Name       string
	Source     string    // as written
	SourcePath string    // filepath.Join(Task.Dir, Source) unless Source is absolute
	DeclRange  hcl.Range // the mount block's header

	sourceRange hcl.Range // the source expression
}

// Options controls Parse.
type Options struct {
	// CheckPlugins makes Parse stat and hash plugin files, reporting a missing
	// file and a plugin_sha256 mismatch, stat mount sources, reporting one
	// that is missing or not a directory, and read the text of file prompts
	// (Prompt.Text), reporting one that cannot be read. Without it none is
	// read.
	CheckPlugins bool

	// BaseDir, when not empty, is the directory plugin paths are relative to
	// (Task.Dir), instead of the directory of the filename given to Parse.
	// It is for sources whose filename is only a display name.
	BaseDir string

	// Files is where ParseFile reads the task file and CheckPlugins the
	// plugin and prompt files; nil means the local disk (OSFiles).
	Files Files
}

// Parse parses and validates a task file from bytes. filename is used in
// diagnostics and, unless opts.BaseDir is set, to resolve plugin paths.
//
// Parse reports as many independent mistakes as it can in one call, in file
// order, each with a Subject range in filename; a syntax error stops it
// early, and so does a source larger than bounds.MaxSourceBytes or nested more
// deeply than bounds.MaxNestingDepth, which is not parsed at all. Plugin files are
// only read when opts.CheckPlugins is set. If the returned diagnostics
// contain errors the task is nil; warnings may come with a valid task. Parse never panics, whatever the input: a bug that would
// panic is reported as an error diagnostic instead.
func Parse(filename string, src []byte, opts Options) (task *Task, diags hcl.Diagnostics) {
	defer func() {
		if r := recover(); r != nil {
			task = nil
			diags = append(diags, &hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  "Internal error while parsing the task file",
				Detail:   fmt.Sprintf("The task file could not be parsed because of a bug in lhengine: %v. Please report it with the file attached.", r),
				Subject:  &hcl.Range{Filename: filename, Start: hcl.InitialPos, End: hcl.InitialPos},
			})
		}
	}()
	return parse(filename, src, opts)
}

// readSource reads a task file, at most one byte past bounds.MaxSourceBytes:
// enough for Parse to report it as too large.
func readSource(files Files, path string) ([]byte, error) {
	f, err := orOS(files).Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, bounds.MaxSourceBytes+1))
}

// ParseFile reads the task file at path and parses it with Parse. Task.Dir is
// filepath.Dir(path) unless opts.BaseDir is set.
func ParseFile(path string, opts Options) (*Task, hcl.Diagnostics) {
	src, err := readSource(opts.Files, path)
	if err != nil {
		return nil, hcl.Diagnostics{{
			Severity: hcl.DiagError,
			Summary:  "Cannot read task file",
			Detail:   fmt.Sprintf("The task file %s could not be read: %s.", path, err),
		}}
	}
	return Parse(path, src, opts)
}

// Step returns the step with the given name, or nil.
func (t *Task) Step(name string) *Step {
	for _, s := range t.Steps {
		if s.Name == name {
			return s
		}
	}
	return nil
}

// Variable returns the variable with the given name, or nil.
func (t *Task) Variable(name string) *Variable {
	for _, v := range t.Variables {
		if v.Name == name {
			return v
		}
	}
	return nil
}

func parse(filename string, src []byte, opts Options) (*Task, hcl.Diagnostics) {
	// The parser recurses once per level of nesting, and a stack overflow
	// cannot be recovered from: the depth is checked first.
	if diags := bounds.CheckSource(filename, src); diags.HasErrors() {
		return nil, diags
	}
	dir := opts.BaseDir
	if dir == "" {
		dir = filepath.Dir(filename)
	}
	t, diags := decodeFile(filename, src, dir)
	if t == nil {
		return nil, hcldecode.Sort(diags)
	}
	t.files = orOS(opts.Files)
	// A partly decoded task is still checked, so that one run reports as
	// many independent mistakes as it can.
	diags = append(diags, t.validate()...)
	if opts.CheckPlugins {
		diags = append(diags, t.checkPlugins()...)
		diags = append(diags, t.checkMounts()...)
		diags = append(diags, t.readPrompts()...)
	}
	diags = hcldecode.Sort(diags)
	if diags.HasErrors() {
		return nil, diags
	}
	return t, diags
}
