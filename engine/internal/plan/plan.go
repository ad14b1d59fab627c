// Package plan turns a parsed task file into what the ledger stores (a run
// manifest and the step list), and back: it re-parses a task's pinned source
// to plan fan-out steps and to evaluate each work unit's input.
package plan

import (
	"cmp"
	"container/list"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"sync"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/convert"

	"github.com/lhengine/lhengine/engine/internal/bounds"
	"github.com/lhengine/lhengine/engine/internal/guest"
	"github.com/lhengine/lhengine/engine/internal/jsonval"
	"github.com/lhengine/lhengine/engine/internal/policylang"
	"github.com/lhengine/lhengine/engine/internal/taskfile"
	"github.com/lhengine/lhengine/fault"
	"github.com/lhengine/lhengine/ledger"
)

// EngineVersion is recorded in every run manifest, with the plugin ABI
// version (guest.ABIVersion, written in decimal).
const EngineVersion = "0.1.0"

// Submission is a validated task file with its variables resolved and its
// plugins hashed: everything store.Submit needs.
type Submission struct {
	Task     *taskfile.Task
	Steps    []ledger.StepState
	Manifest ledger.Manifest
}

// InvalidTaskError carries the diagnostics of a task file that failed
// validation, with the sources needed to render them.
type InvalidTaskError struct {
	Diagnostics hcl.Diagnostics
	Files       map[string][]byte
}

func (e *InvalidTaskError) Error() string {
	n := len(e.Diagnostics.Errs())
	if n == 1 {
		return "task file has 1 error: " + e.Diagnostics.Errs()[0].Error()
	}
	return fmt.Sprintf("task file has %d errors; first: %v", n, e.Diagnostics.Errs()[0])
}

// Prepare validates the task file at path with the given --var values and
// pins it: the absolute path and sha256 of every plugin, the source, and the
// variable values.
//
// check, when set, loads each plugin module the way it will be run (see
// CheckModules); nil uses Inspect.
func Prepare(ctx context.Context, path string, vars map[string]string, check ModuleCheck) (*Submission, error) {
	return PrepareWith(ctx, path, vars, PolicyOptions{}, check)
}

// PrepareWith is Prepare with the run's policies chosen by po: they are
// resolved, applied to the task and pinned in the manifest with their text.
func PrepareWith(ctx context.Context, path string, vars map[string]string, po PolicyOptions, check ModuleCheck) (*Submission, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, err
	}
	t, ps, files, diags := ValidateWith(ctx, abs, po, check)
	if diags.HasErrors() {
		return nil, &InvalidTaskError{Diagnostics: diags, Files: files}
	}
	values, vdiags := t.Vars(vars)
	if vdiags.HasErrors() {
		return nil, &InvalidTaskError{Diagnostics: vdiags, Files: files}
	}
	m := ledger.Manifest{
		Objective:     t.Objective,
		Constraints:   t.Constraints,
		Filename:      t.Filename,
		Source:        t.Source,
		Vars:          map[string]json.RawMessage{},
		Plugins:       map[string]ledger.PluginPin{},
		EngineVersion: EngineVersion,
		ABI:           strconv.Itoa(guest.ABIVersion),
	}
	if len(ps) > 0 {
		m.Policies = Pins(ps)
	}
	for _, md := range t.Models {
		m.Models = append(m.Models, ledger.ModelPin{Name: md.Name, Provider: md.Provider, BaseURL: md.BaseURL,
			ID: md.ID, APIKeyEnv: md.APIKeyEnv, InputPrice: md.InputPrice, OutputPrice: md.OutputPrice})
	}
	m.Prompts = PromptPins(t)
	for name, v := range values {
		b, err := jsonval.ToJSON(v)
		if err != nil {
			return nil, fmt.Errorf("variable %q: %w", name, err)
		}
		m.Vars[name] = b
	}
	steps := make([]ledger.StepState, len(t.Steps))
	sums := map[string]string{} // steps often share a plugin
	for i, s := range t.Steps {
		sum, ok := sums[s.PluginPath]
		if !ok {
			var err error
			if sum, err = taskfile.HashFrom(po.Files, s.PluginPath); err != nil {
				return nil, fmt.Errorf("step %q: %w", s.Name, err)
			}
			sums[s.PluginPath] = sum
		}
		m.Plugins[s.Name] = ledger.PluginPin{Path: s.PluginPath, SHA256: sum}
		steps[i] = ledger.StepState{Name: s.Name, FanOut: s.ForEach != nil || s.Every > 0, Limit: max(s.Concurrency, 1),
			Windows: s.Windows, Every: s.Every, AllowFailures: s.AllowFailures, AllowPercent: s.AllowFailuresPercent}
		for j, a := range t.Steps[:i] {
			if s.Every > 0 && a.Name == s.Anchor {
				steps[i].Anchor = j
			}
		}
	}
	if err := pinFactPlugins(po.Files, t, &m, sums); err != nil { // facts.go
		return nil, err
	}
	return &Submission{Task: t, Steps: steps, Manifest: m}, nil
}

// PromptPins pins the task's prompts: each one's text, as read when the
// task was parsed with its files checked, and its sha256. Nil for a task
// without prompts.
func PromptPins(t *taskfile.Task) []ledger.PromptPin {
	var pins []ledger.PromptPin
	for _, p := range t.Prompts {
		sum := sha256.Sum256([]byte(p.Text))
		pins = append(pins, ledger.PromptPin{Name: p.Name, Version: p.Version, File: p.FilePath,
			SHA256: hex.EncodeToString(sum[:]), Text: p.Text})
	}
	return pins
}

// ModuleCheck loads the plugin at path and says why it cannot run, if it
// cannot (a *fault.StepError of kind ABIMismatch, BadModule, ...).
type ModuleCheck func(ctx context.Context, path string) error

// Inspect is the ModuleCheck that decodes the module without a runtime.
func Inspect(ctx context.Context, path string) error {
	return InspectFrom(taskfile.OSFiles{})(ctx, path)
}

// InspectFrom is Inspect reading the module through files.
func InspectFrom(files taskfile.Files) ModuleCheck {
	return func(ctx context.Context, path string) error {
		f, err := files.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		wasm, err := io.ReadAll(f)
		if err != nil {
			return err
		}
		_, err = guest.Inspect(ctx, wasm)
		return err
	}
}

// CheckModules checks every step's plugin and reports, on the step's plugin
// attribute, a file that is not a module lhengine can run: not Wasm, not a
// WASI command, or built for another ABI version. check nil means Inspect.
// Each distinct plugin is checked once, as many at a time as there are
// processors (a check compiles, and a task's plugins are independent), so
// check must be safe for concurrent use; the diagnostics are in step order.
func CheckModules(ctx context.Context, t *taskfile.Task, check ModuleCheck) hcl.Diagnostics {
	if check == nil {
		check = Inspect
	}
	var diags hcl.Diagnostics
	seen := map[string]error{}
	var paths []string
	for _, s := range t.Steps {
		if _, ok := seen[s.PluginPath]; !ok {
			seen[s.PluginPath] = nil
			paths = append(paths, s.PluginPath)
		}
	}
	for _, f := range factPlugins(t) { // facts.go
		if _, ok := seen[f.ResolvedPath]; !ok {
			seen[f.ResolvedPath] = nil
			paths = append(paths, f.ResolvedPath)
		}
	}
	errs := make([]error, len(paths))
	slots := make(chan struct{}, runtime.GOMAXPROCS(0))
	var wg sync.WaitGroup
	for i, p := range paths {
		slots <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-slots }()
			errs[i] = check(ctx, p)
		}()
	}
	wg.Wait()
	for i, p := range paths {
		seen[p] = errs[i]
	}
	for _, s := range t.Steps {
		err := seen[s.PluginPath]
		if err == nil {
			continue
		}
		summary := "Plugin cannot be loaded"
		switch fault.KindOf(err) {
		case fault.ABIMismatch:
			summary = "Plugin ABI mismatch"
		case fault.BadModule:
			summary = "Plugin is not a WASI command module"
		}
		r := s.PluginRange
		diags = append(diags, &hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  summary,
			Detail:   fmt.Sprintf("Step %q: %s: %v", s.Name, s.Plugin, err),
			Subject:  &r,
			Context:  &s.DeclRange,
		})
	}
	for _, f := range factPlugins(t) {
		if err := seen[f.ResolvedPath]; err != nil {
			r := f.PathRange()
			diags = append(diags, &hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  "Plugin cannot be loaded",
				Detail:   fmt.Sprintf("Fact %q: %s: %v", f.Name, f.Path, err),
				Subject:  &r,
				Context:  &f.DeclRange,
			})
		}
	}
	return diags
}

// Validate parses and validates the task file at path, checking that its
// plugin files exist, match any pinned sha256 and are modules lhengine can
// run (with check; nil means Inspect). files holds the sources the
// diagnostics refer to, for rendering.
//
// The policies the task lists are applied, looked for beside the task file
// only; ValidateWith chooses them and the search path.
func Validate(ctx context.Context, path string, check ModuleCheck) (*taskfile.Task, map[string][]byte, hcl.Diagnostics) {
	t, _, files, diags := ValidateWith(ctx, path, PolicyOptions{}, check)
	return t, files, diags
}

// ValidateWith is Validate with the policies chosen by po. It returns the
// task with the policies applied, and the policies in the order they apply.
// Every file it reads is read through po.Files; check, when set, must read
// the plugins there too.
func ValidateWith(ctx context.Context, path string, po PolicyOptions, check ModuleCheck) (*taskfile.Task, []*policylang.Policy, map[string][]byte, hcl.Diagnostics) {
	t, diags := taskfile.ParseFile(path, taskfile.Options{CheckPlugins: true, Files: po.Files})
	files := map[string][]byte{}
	if t != nil {
		files[t.Filename] = t.Source
	} else if src, err := taskfile.ReadFrom(po.Files, path, bounds.MaxSourceBytes); err == nil {
		files[path] = src
	}
	if diags.HasErrors() {
		return t, nil, files, diags
	}
	ps, pfiles, d := ResolvePolicies(t, po)
	maps.Copy(files, pfiles)
	diags = append(diags, d...)
	if diags.HasErrors() {
		return nil, nil, files, diags
	}
	t, d = policylang.ApplyPolicies(t, ps, true, po.Grant...)
	diags = append(diags, d...)
	for _, name := range po.Grant {
		if !slices.ContainsFunc(ps, func(p *policylang.Policy) bool { return p.Name == name }) {
			diags = append(diags, &hcl.Diagnostic{
				Severity: hcl.DiagWarning,
				Summary:  "Granted policy not applied",
				Detail:   fmt.Sprintf("--grant-policy names %q, which this run does not apply.", name),
			})
		}
	}
	if diags.HasErrors() {
		return nil, nil, files, diags
	}
	if check == nil {
		check = InspectFrom(po.files())
	}
	diags = append(diags, CheckModules(ctx, t, check)...)
	return t, ps, files, diags
}

// Spec is a submitted task re-read from its manifest.
type Spec struct {
	Task     *taskfile.Task
	Vars     map[string]cty.Value
	Prompts  map[string]cty.Value // the pinned texts, by prompt name
	Manifest *ledger.Manifest
}

// FromManifest re-parses a task's pinned source and applies the policies
// pinned with it, from their pinned texts. It does not look at plugin or
// policy files: plugins are checked against the pinned hashes when loaded.
func FromManifest(m *ledger.Manifest) (*Spec, error) {
	t, diags := taskfile.Parse(m.Filename, m.Source, taskfile.Options{})
	if diags.HasErrors() {
		return nil, &InvalidTaskError{Diagnostics: diags, Files: map[string][]byte{m.Filename: m.Source}}
	}
	// The pinned texts, never the policy files, which may have changed.
	// What their inserted steps may reach was decided at submit, which
	// refused a policy granting what the task does not unless the run
	// named it (--grant-policy): the pinned run keeps it.
	if len(m.Policies) > 0 {
		ps, diags := pinnedPolicies(m)
		if !diags.HasErrors() {
			names := make([]string, len(ps))
			for i, p := range ps {
				names[i] = p.Name
			}
			t, diags = policylang.ApplyPolicies(t, ps, false, names...)
		}
		if diags.HasErrors() {
			return nil, &InvalidTaskError{Diagnostics: diags, Files: map[string][]byte{m.Filename: m.Source}}
		}
	}
	return specOf(t, m)
}

// specOf is the spec of task t as pinned in m: the variables are read back
// from the manifest's JSON, exactly as a process that only has the manifest
// reads them.
func specOf(t *taskfile.Task, m *ledger.Manifest) (*Spec, error) {
	vars := map[string]cty.Value{}
	for _, v := range t.Variables {
		raw, ok := m.Vars[v.Name]
		if !ok {
			return nil, fmt.Errorf("manifest has no value for variable %q", v.Name)
		}
		val, err := jsonval.FromJSON(raw)
		if err != nil {
			return nil, fmt.Errorf("variable %q: %w", v.Name, err)
		}
		if v.Type != cty.DynamicPseudoType {
			if val, err = convert.Convert(val, v.Type); err != nil {
				return nil, fmt.Errorf("variable %q: %w", v.Name, err)
			}
		}
		vars[v.Name] = val
	}
	// The texts pinned at submit, never the files, which may have changed.
	prompts := map[string]cty.Value{}
	for _, p := range t.Prompts {
		i := slices.IndexFunc(m.Prompts, func(pin ledger.PromptPin) bool { return pin.Name == p.Name })
		if i < 0 {
			return nil, fmt.Errorf("manifest has no text for prompt %q", p.Name)
		}
		prompts[p.Name] = cty.StringVal(m.Prompts[i].Text)
	}
	return &Spec{Task: t, Vars: vars, Prompts: prompts, Manifest: m}, nil
}

// Cache keeps parsed specs and completed step outputs of the tasks this
// process works on. Outputs are keyed by the step's pass, so a repair that
// runs a step again is never served a stale output. Safe for concurrent use.
//
// It is bounded, so that a process that works through tasks for weeks keeps
// a flat footprint: at most MaxSpecs specs and about MaxOutputBytes of
// outputs (counted as the memory their decoded values take, estimated by
// heldSize), the least recently used going first.
// Anything evicted is read from the store again when needed.
type Cache struct {
	mu          sync.Mutex
	specs       *lru[string, *Spec]
	outputs     *lru[outputKey, cty.Value]
	MaxSpecs    int   // 0 = DefaultMaxSpecs
	MaxOutputs  int64 // bytes; 0 = DefaultMaxOutputBytes
	maxInputLen int64
	maxPlanLen  int64
}

// Cache bounds.
const (
	DefaultMaxSpecs       = 1024
	DefaultMaxOutputBytes = 64 << 20
)

// MaxInputBytes bounds the input a unit's plugin receives, and the step
// outputs read to assemble it (a fan-in of many large outputs is refused
// with a too_large failure before it is held in memory).
const MaxInputBytes = 64 << 20

// MaxPlanBytes bounds a fan-out step's whole for_each list as JSON: the
// planner holds it in memory while the store writes its units.
const MaxPlanBytes = 256 << 20

type outputKey struct {
	task       string
	step, pass int
	// done is the step's committed units: a retry of its failed items
	// completes the same pass again with more of them.
	done int
}

// NewCache returns an empty cache.
func NewCache() *Cache {
	return &Cache{specs: newLRU[string, *Spec](), outputs: newLRU[outputKey, cty.Value](), maxInputLen: MaxInputBytes, maxPlanLen: MaxPlanBytes}
}

// Len reports how many specs and outputs the cache holds, and the outputs'
// size in bytes.
func (c *Cache) Len() (specs, outputs int, outputBytes int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.specs.len(), c.outputs.len(), c.outputs.size
}

// Spec returns the parsed spec of a task.
func (c *Cache) Spec(r ledger.Reader, id string) (*Spec, error) {
	c.mu.Lock()
	sp, ok := c.specs.get(id)
	c.mu.Unlock()
	if ok {
		return sp, nil
	}
	m, err := r.Manifest(id)
	if err != nil {
		return nil, err
	}
	sp, err = FromManifest(m)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	c.specs.put(id, sp, 1)
	c.specs.trim(int64(cmp.Or(c.MaxSpecs, DefaultMaxSpecs)))
	c.mu.Unlock()
	return sp, nil
}

// perValue is what a decoded cty value costs in memory beyond its JSON
// text: its Value struct, and for objects a map of attributes and an
// object type with another map. Measured: the 100,000 outputs of a fan-out
// ({"item": {...}, "attempt": N}, 3.4 MB of JSON) took about 160 MB as cty
// values, some 250 bytes for each JSON value.
const perValue = 256

// heldSize estimates the memory the cty value decoded from raw takes, for
// the output cache's bound: the JSON's length plus perValue for every value
// in it, counted as the objects, arrays and separators that begin values
// (commas inside strings count too, which only overestimates).
func heldSize(raw []byte) int64 {
	values := int64(1)
	for _, b := range raw {
		if b == '{' || b == '[' || b == ',' {
			values++
		}
	}
	return int64(len(raw)) + perValue*values
}

// Remember caches the spec of task id, just submitted from sub, so that
// this process's workers do not parse the task file again: sub's task was
// parsed from the very source the manifest pins, with the same policies,
// and its variables are read back from the manifest as FromManifest reads
// them.
func (c *Cache) Remember(id string, sub *Submission) error {
	sp, err := specOf(sub.Task, &sub.Manifest)
	if err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.specs.get(id); !ok { // a worker may have read it already
		c.specs.put(id, sp, 1)
		c.specs.trim(int64(cmp.Or(c.MaxSpecs, DefaultMaxSpecs)))
	}
	return nil
}

// Forget drops everything cached about a task.
func (c *Cache) Forget(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.specs.remove(id)
	c.outputs.removeIf(func(k outputKey) bool { return k.task == id })
}

// scope builds the evaluation scope of a step: the outputs of the earlier
// steps it references, read through r.
func (c *Cache) scope(r ledger.Reader, sp *Spec, task *ledger.Task, step *taskfile.Step, refs []string) (taskfile.Scope, error) {
	sc := taskfile.Scope{TaskID: task.ID, Vars: sp.Vars, Prompts: sp.Prompts, Outputs: map[string]cty.Value{}}
	var read int64 // bytes of outputs read from the store for this scope
	for _, name := range refs {
		idx := -1
		for i, s := range task.Steps {
			if s.Name == name {
				idx = i
			}
		}
		if idx < 0 || idx >= step.Index {
			return sc, fmt.Errorf("step %q references step %q, which does not run before it", step.Name, name)
		}
		k := outputKey{task.ID, idx, task.Steps[idx].Pass, task.Steps[idx].Done}
		c.mu.Lock()
		v, ok := c.outputs.get(k)
		c.mu.Unlock()
		if !ok {
			raw, err := r.StepOutputLimited(task, idx, c.maxInputLen-read)
			if errors.Is(err, ledger.ErrTooLarge) {
				return sc, fault.Wrap(fault.TooLarge, err, fmt.Sprintf(
					"step %q reads the outputs of earlier steps, which together exceed the input limit of %d bytes: %v", step.Name, c.maxInputLen, err))
			}
			if err != nil {
				return sc, err
			}
			read += int64(len(raw))
			if v, err = jsonval.FromJSON(raw); err != nil {
				return sc, fmt.Errorf("output of step %q: %w", name, err)
			}
			size := heldSize(raw)
			c.mu.Lock()
			if max := cmp.Or(c.MaxOutputs, DefaultMaxOutputBytes); size <= max/4 {
				c.outputs.put(k, v, size)
				c.outputs.trim(max)
			}
			c.mu.Unlock()
		}
		sc.Outputs[name] = v
	}
	return sc, nil
}

// Planner returns the ledger.Planner that evaluates for_each expressions.
func (c *Cache) Planner() ledger.Planner {
	return func(ctx context.Context, r ledger.Reader, task *ledger.Task, idx int) ([]ledger.Item, error) {
		sp, err := c.Spec(r, task.ID)
		if err != nil {
			return nil, err
		}
		step := sp.Task.Steps[idx]
		sc, err := c.scope(r, sp, task, step, step.ForEachReferences())
		if err != nil {
			return nil, err
		}
		each, diags := step.EvalForEach(sc)
		if diags.HasErrors() {
			return nil, fault.New(fault.Input, "%s", sp.renderDiags(diags))
		}
		items := make([]ledger.Item, len(each))
		var total int64
		for i, e := range each {
			if i%1024 == 0 {
				if err := ctx.Err(); err != nil {
					return nil, err
				}
			}
			k, err := jsonval.ToJSON(e.Key)
			if err != nil {
				return nil, fault.New(fault.Input, "for_each key %d: %v", i, err)
			}
			v, err := jsonval.ToJSON(e.Value)
			if err != nil {
				return nil, fault.New(fault.Input, "for_each value %d: %v", i, err)
			}
			items[i] = ledger.Item{Key: k, Value: v}
			if total += int64(len(k) + len(v)); total > c.maxPlanLen {
				return nil, fault.New(fault.TooLarge, "the for_each list of step %q is more than %d bytes as JSON (%d of %d items); fan out over references (ids, paths, artifact refs) instead",
					step.Name, c.maxPlanLen, i+1, len(each))
			}
		}
		return items, nil
	}
}

// Input evaluates the input of a leased unit. Errors are *fault.StepError of
// kind input.
func (c *Cache) Input(r ledger.Reader, task *ledger.Task, l ledger.Lease) (json.RawMessage, error) {
	in, _, err := c.Unit(r, task, l)
	return in, err
}

// Unit evaluates the input of a leased unit and what its step's approval
// block asks of it (nil: nothing, or no block). An ask without a subject
// of its own gets the input as its subject. Errors are *fault.StepError
// of kind input.
func (c *Cache) Unit(r ledger.Reader, task *ledger.Task, l ledger.Lease) (json.RawMessage, *taskfile.ApprovalAsk, error) {
	sp, err := c.Spec(r, task.ID)
	if err != nil {
		return nil, nil, fault.Wrap(fault.Internal, err, err.Error())
	}
	step := sp.Task.Steps[l.Step]
	sc, err := c.unitScope(r, sp, task, step, l)
	if err != nil {
		return nil, nil, err
	}
	v, diags := step.EvalInput(sc)
	if diags.HasErrors() {
		return nil, nil, fault.New(fault.Input, "%s", sp.renderDiags(diags))
	}
	b, err := jsonval.ToJSON(v)
	if err != nil {
		return nil, nil, fault.Wrap(fault.Input, err, "input: "+err.Error())
	}
	if int64(len(b)) > c.maxInputLen {
		return nil, nil, fault.New(fault.TooLarge, "the input of step %q is %d bytes; the limit is %d", step.Name, len(b), c.maxInputLen)
	}
	ask, diags := step.EvalApproval(sc)
	if diags.HasErrors() {
		return nil, nil, fault.New(fault.Input, "%s", sp.renderDiags(diags))
	}
	if ask != nil && ask.Subject == nil {
		ask.Subject = b
	}
	return b, ask, nil
}

// unitScope is the scope a leased unit's expressions are evaluated in.
func (c *Cache) unitScope(r ledger.Reader, sp *Spec, task *ledger.Task, step *taskfile.Step, l ledger.Lease) (taskfile.Scope, error) {
	refs := step.InputReferences()
	var window *ledger.WindowItem
	readsAnchor := false
	if step.Every > 0 {
		// A window unit reads its anchor's outputs of the window only.
		window = new(ledger.WindowItem)
		if err := json.Unmarshal(l.Unit.Value, window); err != nil {
			return taskfile.Scope{}, fault.Wrap(fault.Internal, err, "window item: "+err.Error())
		}
		readsAnchor = slices.Contains(refs, step.Anchor)
		refs = slices.DeleteFunc(refs, func(name string) bool { return name == step.Anchor })
	}
	sc, err := c.scope(r, sp, task, step, refs)
	if err != nil {
		var se *fault.StepError
		switch {
		case errors.As(err, &se):
			return taskfile.Scope{}, se
		case errors.Is(err, ledger.ErrNotFound):
			return taskfile.Scope{}, fault.Wrap(fault.Internal, err, err.Error())
		}
		return taskfile.Scope{}, fault.Wrap(fault.Input, err, err.Error())
	}
	if readsAnchor {
		raw, err := r.WindowOutputs(task, task.StepIndex(step.Anchor), window.Items, c.maxInputLen)
		if errors.Is(err, ledger.ErrTooLarge) {
			return taskfile.Scope{}, fault.Wrap(fault.TooLarge, err, err.Error())
		} else if err != nil {
			return taskfile.Scope{}, fault.Wrap(fault.Internal, err, err.Error())
		}
		v, err := jsonval.FromJSON(raw)
		if err != nil {
			return taskfile.Scope{}, fault.Wrap(fault.Input, err, fmt.Sprintf("outputs of step %q: %v", step.Anchor, err))
		}
		sc.Outputs[step.Anchor] = v
	}
	if step.ForEach != nil || window != nil {
		k, err := jsonval.FromJSON(l.Unit.Key)
		if err != nil {
			return taskfile.Scope{}, fault.Wrap(fault.Input, err, "each.key: "+err.Error())
		}
		v, err := jsonval.FromJSON(l.Unit.Value)
		if err != nil {
			return taskfile.Scope{}, fault.Wrap(fault.Input, err, "each.value: "+err.Error())
		}
		sc.Each = &taskfile.Each{Key: k, Value: v}
	}
	return sc, nil
}

// diagText renders diagnostics on one line each with their source position,
// for failure records (the CLI renders full excerpts at validate time).
func diagText(diags hcl.Diagnostics) string {
	var lines []string
	for _, d := range diags.Errs() {
		lines = append(lines, d.Error())
	}
	sort.Strings(lines)
	out := ""
	for i, l := range lines {
		if i > 0 {
			out += "; "
		}
		out += l
	}
	return out
}

// lru is a least-recently-used map whose entries have a size. Not safe for
// concurrent use: Cache guards it.
type lru[K comparable, V any] struct {
	order *list.List // front: most recently used
	items map[K]*list.Element
	size  int64
}

type lruEntry[K comparable, V any] struct {
	key  K
	val  V
	size int64
}

func newLRU[K comparable, V any]() *lru[K, V] {
	return &lru[K, V]{order: list.New(), items: map[K]*list.Element{}}
}

func (l *lru[K, V]) len() int { return len(l.items) }

func (l *lru[K, V]) get(k K) (V, bool) {
	e, ok := l.items[k]
	if !ok {
		var zero V
		return zero, false
	}
	l.order.MoveToFront(e)
	return e.Value.(*lruEntry[K, V]).val, true
}

func (l *lru[K, V]) put(k K, v V, size int64) {
	l.remove(k)
	l.items[k] = l.order.PushFront(&lruEntry[K, V]{key: k, val: v, size: size})
	l.size += size
}

func (l *lru[K, V]) remove(k K) {
	if e, ok := l.items[k]; ok {
		l.drop(e)
	}
}

func (l *lru[K, V]) drop(e *list.Element) {
	en := e.Value.(*lruEntry[K, V])
	l.order.Remove(e)
	delete(l.items, en.key)
	l.size -= en.size
}

func (l *lru[K, V]) removeIf(match func(K) bool) {
	for k, e := range l.items {
		if match(k) {
			l.drop(e)
		}
	}
}

// trim drops the least recently used entries until the total size is at
// most max.
func (l *lru[K, V]) trim(max int64) {
	for l.size > max && l.order.Len() > 0 {
		l.drop(l.order.Back())
	}
}
