package taskfile

import (
	"fmt"
	"math"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/ext/typeexpr"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/convert"

	"github.com/lhengine/lhengine/engine/internal/bounds"
	"github.com/lhengine/lhengine/engine/internal/hcldecode"
)

var fileSchema = &hcl.BodySchema{
	Blocks: []hcl.BlockHeaderSchema{
		{Type: "task", LabelNames: []string{"name"}},
	},
}

var taskSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{
		{Name: "objective"},
		{Name: "constraints"},
		{Name: "policies"},
	},
	Blocks: []hcl.BlockHeaderSchema{
		{Type: "variable", LabelNames: []string{"name"}},
		{Type: "step", LabelNames: []string{"name"}},
		{Type: "limits"},
		{Type: "model", LabelNames: []string{"name"}},
		{Type: "prompt", LabelNames: []string{"name"}},
		{Type: "environment"},
		{Type: "budget"},
		{Type: "notify"},
		{Type: "progress"},
	},
}

var variableSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{
		{Name: "type"},
		{Name: "default"},
		{Name: "description"},
	},
}

var stepSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{
		{Name: "plugin", Required: true},
		{Name: "plugin_sha256"},
		{Name: "input"},
		{Name: "for_each"},
		{Name: "concurrency"},
		{Name: "allow_failures"},
		{Name: "timeout"},
		{Name: "memory"},
		{Name: "workspace"},
		{Name: "host_calls"},
		{Name: "models"},
	},
	Blocks: []hcl.BlockHeaderSchema{
		{Type: "retry"},
		{Type: "repair"},
		{Type: "approval"},
		{Type: "http"},
		{Type: "effect", LabelNames: []string{"kind"}},
		{Type: "mount", LabelNames: []string{"name"}},
	},
}

var retrySchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{
		{Name: "attempts"},
		{Name: "backoff"},
		{Name: "max_backoff"},
	},
}

var repairSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{
		{Name: "restart_from", Required: true},
		{Name: "max"},
	},
}

// decodeFile parses src and decodes its one task block. The task it returns
// may be partial when diags has errors.
func decodeFile(filename string, src []byte, dir string) (*Task, hcl.Diagnostics) {
	file, diags := hclsyntax.ParseConfig(src, filename, hcl.InitialPos)
	if diags.HasErrors() {
		// The recovered body after a syntax error tends to produce a cascade
		// of schema errors that only distract from the real one.
		return nil, diags
	}
	bounds.Instrument(file.Body)
	content, moreDiags := file.Body.Content(fileSchema)
	diags = append(diags, moreDiags...)

	var task *Task
	for _, block := range content.Blocks {
		if task != nil {
			diags = append(diags, &hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  "Duplicate task block",
				Detail:   fmt.Sprintf("A task file holds exactly one task block; task %q was already declared at %s.", task.Name, task.DeclRange),
				Subject:  block.DefRange.Ptr(),
			})
			continue
		}
		var taskDiags hcl.Diagnostics
		task, taskDiags = decodeTaskBlock(block)
		diags = append(diags, taskDiags...)
	}
	if task == nil {
		if !diags.HasErrors() {
			diags = append(diags, &hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  "Missing task block",
				Detail:   `A task file must declare one task: task "name" { ... }.`,
				Subject:  file.Body.MissingItemRange().Ptr(),
			})
		}
		return nil, diags
	}

	task.Filename = filename
	task.Dir = dir
	task.Source = src
	for _, s := range task.Steps {
		s.task = task.info()
		s.Limits = &task.Limits
		for _, m := range s.Mounts {
			m.SourcePath = resolvePath(dir, m.Source)
		}
		s.PluginPath = resolvePath(dir, s.Plugin)
	}
	for _, p := range task.Prompts {
		p.FilePath = resolvePath(dir, p.File)
	}
	if task.Environment != nil {
		for _, f := range task.Environment.Facts {
			f.ResolvedPath = resolvePath(dir, f.Path)
		}
	}
	return task, diags
}

// resolvePath returns path joined to dir, or cleaned if it is absolute; ""
// for an empty path.
func resolvePath(dir, path string) string {
	switch {
	case path == "":
		return ""
	case filepath.IsAbs(path):
		return filepath.Clean(path)
	default:
		return filepath.Join(dir, path)
	}
}

// decodeTaskBlock decodes a task block, its variables and its steps, and
// resolves repair targets between steps.
func decodeTaskBlock(block *hcl.Block) (*Task, hcl.Diagnostics) {
	task := &Task{
		Name:      block.Labels[0],
		DeclRange: block.DefRange,
		Limits:    DefaultLimits(),
	}
	var diags hcl.Diagnostics
	if strings.TrimSpace(task.Name) == "" {
		diags = append(diags, &hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  "Invalid task name",
			Detail:   "A task needs a name that is not empty.",
			Subject:  block.LabelRanges[0].Ptr(),
		})
	}

	content, moreDiags := block.Body.Content(taskSchema)
	diags = append(diags, moreDiags...)

	diags = append(diags, hcldecode.Fields(content.Attributes,
		hcldecode.Set("objective", &task.Objective, hcldecode.String),
		hcldecode.Set("constraints", &task.Constraints, hcldecode.StringList),
	)...)
	if attr, ok := content.Attributes["policies"]; ok {
		var d hcl.Diagnostics
		task.Policies, d = decodePolicyRefs(attr) // policyrefs.go
		diags = append(diags, d...)
	}

	variables := map[string]*Variable{}
	steps := map[string]*Step{}
	models := map[string]*Model{}
	prompts := map[string]*Prompt{}
	for _, b := range content.Blocks {
		switch b.Type {
		case "prompt":
			p, d := decodePromptBlock(b)
			diags = append(diags, d...)
			if prev, dup := prompts[p.Name]; dup {
				diags = append(diags, hcldecode.LabelError(b, "Duplicate prompt", fmt.Sprintf("A prompt named %q was already declared at %s. Prompt names must be unique within a task.", p.Name, prev.DeclRange)))
				continue
			}
			prompts[p.Name] = p
			task.Prompts = append(task.Prompts, p)
		case "model":
			m, d := decodeModelBlock(b)
			diags = append(diags, d...)
			if prev, dup := models[m.Name]; dup {
				diags = append(diags, hcldecode.LabelError(b, "Duplicate model", fmt.Sprintf("A model named %q was already declared at %s. Model names must be unique within a task.", m.Name, prev.DeclRange)))
				continue
			}
			models[m.Name] = m
			task.Models = append(task.Models, m)
		case "environment":
			if task.Environment != nil {
				diags = append(diags, duplicateTaskBlock(b, task.Environment.DeclRange))
				continue
			}
			env, d := decodeEnvironmentBlock(b) // environment.go
			diags = append(diags, d...)
			task.Environment = env
		case "budget":
			if task.Budget != nil {
				diags = append(diags, duplicateTaskBlock(b, task.Budget.DeclRange))
				continue
			}
			bg, d := decodeBudgetBlock(b) // budget.go
			diags = append(diags, d...)
			task.Budget = bg
		case "notify":
			if task.Notify != nil {
				diags = append(diags, duplicateTaskBlock(b, task.Notify.DeclRange))
				continue
			}
			n, d := decodeNotifyBlock(b) // notify.go
			diags = append(diags, d...)
			task.Notify = n
		case "progress":
			if task.Progress != nil {
				diags = append(diags, duplicateTaskBlock(b, task.Progress.DeclRange))
				continue
			}
			p, d := decodeProgressBlock(b) // progress.go
			diags = append(diags, d...)
			task.Progress = p
		case "limits":
			if task.Limits.DeclRange != (hcl.Range{}) {
				diags = append(diags, duplicateTaskBlock(b, task.Limits.DeclRange))
				continue
			}
			l, d := decodeLimitsBlock(b)
			diags = append(diags, d...)
			task.Limits = l
		case "variable":
			v, d := decodeVariableBlock(b)
			diags = append(diags, d...)
			if prev, dup := variables[v.Name]; dup {
				diags = append(diags, hcldecode.LabelError(b, "Duplicate variable", fmt.Sprintf("A variable named %q was already declared at %s. Variable names must be unique within a task.", v.Name, prev.DeclRange)))
				continue
			}
			variables[v.Name] = v
			task.Variables = append(task.Variables, v)
		case "step":
			s, d := DecodeStepBlock(b)
			diags = append(diags, d...)
			if prev, dup := steps[s.Name]; dup {
				diags = append(diags, hcldecode.LabelError(b, "Duplicate step", fmt.Sprintf("A step named %q was already declared at %s. Step names must be unique within a task.", s.Name, prev.DeclRange)))
				continue
			}
			s.Index = len(task.Steps)
			steps[s.Name] = s
			task.Steps = append(task.Steps, s)
		}
	}

	if len(task.Steps) == 0 && !diags.HasErrors() {
		diags = append(diags, &hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  "Task has no steps",
			Detail:   `A task needs at least one step "name" { plugin = "..." } block.`,
			Subject:  block.DefRange.Ptr(),
		})
	}

	diags = append(diags, resolveModels(task)...)
	diags = append(diags, resolveEnvironment(task, steps)...)
	diags = append(diags, resolveProgress(task, steps)...)
	for _, s := range task.Steps {
		if s.Repair == nil || s.Repair.RestartFrom == "" {
			continue
		}
		target, ok := steps[s.Repair.RestartFrom]
		switch {
		case !ok:
			diags = append(diags, undeclaredStep("restart_from names", s.Repair.RestartFrom, s.Repair.restartRange, task.Steps[:s.Index+1]))
		case target.Index > s.Index:
			diags = append(diags, &hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  "Invalid repair target",
				Detail:   fmt.Sprintf("restart_from must name step %q or a step declared before it; step %q comes later.", s.Name, target.Name),
				Subject:  s.Repair.restartRange.Ptr(),
			})
		default:
			s.Repair.RestartIndex = target.Index
		}
	}
	return task, diags
}

// decodeVariableBlock decodes a variable block: its type constraint and a
// default converted to that type.
func decodeVariableBlock(block *hcl.Block) (*Variable, hcl.Diagnostics) {
	v := &Variable{
		Name:      block.Labels[0],
		Type:      cty.DynamicPseudoType,
		DeclRange: block.DefRange,
	}
	var diags hcl.Diagnostics
	if !hclsyntax.ValidIdentifier(v.Name) {
		diags = append(diags, hcldecode.InvalidName("variable", block))
	}

	content, moreDiags := block.Body.Content(variableSchema)
	diags = append(diags, moreDiags...)

	typeOK := true
	if attr, ok := content.Attributes["type"]; ok {
		ty, d := typeexpr.TypeConstraint(attr.Expr)
		diags = append(diags, d...)
		if d.HasErrors() {
			typeOK = false
		} else {
			v.Type = ty
		}
	}
	diags = append(diags, hcldecode.Fields(content.Attributes, hcldecode.Set("description", &v.Description, hcldecode.String))...)
	if attr, ok := content.Attributes["default"]; ok {
		val, d := hcldecode.Value(attr)
		diags = append(diags, d...)
		if !d.HasErrors() && typeOK {
			converted, err := convert.Convert(val, v.Type)
			if err != nil {
				diags = append(diags, hcldecode.Error(attr, "Invalid default value for variable",
					fmt.Sprintf("This default value is not compatible with the variable's type constraint %s: %s.", typeexpr.TypeString(v.Type), hcldecode.ErrorText(err))))
			} else {
				v.Default = converted
			}
		}
	}
	return v, diags
}

// DecodeStepBlock decodes a step block with its retry and repair blocks and
// what the step may reach (decodeCapabilities): a task's, or the step part
// of a policy's insert, which Task.Adopt then makes a step of a task.
// Repair targets are resolved by decodeTaskBlock, which knows every step
// (for an insert, by the policy language).
func DecodeStepBlock(block *hcl.Block) (*Step, hcl.Diagnostics) {
	s := &Step{
		Name:        block.Labels[0],
		Timeout:     DefaultTimeout,
		Memory:      DefaultMemory,
		Concurrency: 1,
		Workspace:   DefaultWorkspace,
		Retry:       Retry{Attempts: DefaultAttempts, Backoff: DefaultBackoff, MaxBackoff: DefaultMaxBackoff},
		DeclRange:   block.DefRange,
		PluginRange: block.DefRange,
	}
	var diags hcl.Diagnostics
	if !hclsyntax.ValidIdentifier(s.Name) {
		diags = append(diags, hcldecode.InvalidName("step", block))
	}

	content, moreDiags := block.Body.Content(stepSchema)
	diags = append(diags, moreDiags...)
	attrs := content.Attributes

	if attr, ok := attrs["plugin"]; ok {
		// Kept even when blank: a later check reports the path it names.
		s.PluginRange = attr.Expr.Range()
		var d hcl.Diagnostics
		s.Plugin, d = hcldecode.String(attr)
		diags = append(diags, d...)
		if !d.HasErrors() && strings.TrimSpace(s.Plugin) == "" {
			diags = append(diags, hcldecode.Error(attr, "Empty plugin path", "plugin must be the path of a WebAssembly module, relative to the task file's directory."))
		}
	}
	if attr, ok := attrs["plugin_sha256"]; ok {
		s.shaRange = attr.Expr.Range()
	}
	if attr, ok := attrs["input"]; ok {
		s.Input = attr.Expr
	}
	if attr, ok := attrs["for_each"]; ok {
		s.ForEach = attr.Expr
		s.Concurrency = DefaultConcurrency
	}
	if attr, ok := attrs["concurrency"]; ok && s.ForEach == nil {
		diags = append(diags, &hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  "Concurrency without for_each",
			Detail:   "concurrency limits how many fan-out items run at once, so it is only valid in a step with for_each.",
			Subject:  attr.Range.Ptr(),
			Context:  block.DefRange.Ptr(),
		})
	} else {
		diags = append(diags, hcldecode.Fields(attrs, hcldecode.Set("concurrency", &s.Concurrency,
			hcldecode.AtLeast(1, "Invalid concurrency", "concurrency must be at least 1; got %d.")))...)
	}
	if attr, ok := attrs["allow_failures"]; ok {
		diags = append(diags, decodeAllowFailures(s, attr, block)...)
	}
	diags = append(diags, hcldecode.Fields(attrs,
		hcldecode.Set("plugin_sha256", &s.PluginSHA256, hcldecode.Check(hcldecode.String, "Invalid plugin checksum", func(sum string) string {
			if sha256Pattern.MatchString(sum) {
				return ""
			}
			return fmt.Sprintf("plugin_sha256 must be a SHA-256 digest: 64 hexadecimal digits. This value has %d characters.", len(sum))
		})),
		hcldecode.Set("timeout", &s.Timeout, hcldecode.Positive("timeout must be positive; got %q.")),
		hcldecode.Set("memory", &s.Memory, DecodeMemory),
	)...)
	s.PluginSHA256 = strings.ToLower(s.PluginSHA256)

	diags = append(diags, decodeCapabilities(s, attrs, content.Blocks)...)

	var retryBlock, repairBlock, approvalBlock *hcl.Block
	for _, b := range content.Blocks {
		switch b.Type {
		case "retry":
			if retryBlock != nil {
				diags = append(diags, duplicateBlock(b, retryBlock))
				continue
			}
			retryBlock = b
			r, d := decodeRetryBlock(b)
			diags = append(diags, d...)
			s.Retry = r
		case "repair":
			if repairBlock != nil {
				diags = append(diags, duplicateBlock(b, repairBlock))
				continue
			}
			repairBlock = b
			r, d := decodeRepairBlock(b)
			diags = append(diags, d...)
			s.Repair = r
		case "approval":
			if approvalBlock != nil {
				diags = append(diags, duplicateBlock(b, approvalBlock))
				continue
			}
			approvalBlock = b
			a, d := decodeApprovalBlock(b)
			diags = append(diags, d...)
			s.Approval = a
		}
	}
	return s, diags
}

// decodeRetryBlock decodes a retry block, applying defaults for what it
// leaves out.
func decodeRetryBlock(block *hcl.Block) (Retry, hcl.Diagnostics) {
	r := Retry{Attempts: DefaultAttempts, Backoff: DefaultBackoff, MaxBackoff: DefaultMaxBackoff}
	content, diags := block.Body.Content(retrySchema)

	notNegative := func(name string) hcldecode.Decoder[time.Duration] {
		return hcldecode.DurationIn(0, math.MaxInt64, "Invalid duration", name+" must not be negative; got %s.")
	}
	diags = append(diags, hcldecode.Fields(content.Attributes,
		hcldecode.Set("attempts", &r.Attempts, hcldecode.AtLeast(1, "Invalid retry attempts",
			"attempts counts every attempt including the first, so it must be at least 1; got %d.")),
		hcldecode.Set("backoff", &r.Backoff, notNegative("backoff")),
		hcldecode.Set("max_backoff", &r.MaxBackoff, hcldecode.Check(notNegative("max_backoff"), "Invalid duration", func(d time.Duration) string {
			if d < r.Backoff { // the backoff decoded before, or the default
				return fmt.Sprintf("max_backoff (%s) must not be less than backoff (%s).", d, r.Backoff)
			}
			return ""
		})),
	)...)
	if _, ok := content.Attributes["max_backoff"]; !ok && r.Backoff > r.MaxBackoff {
		r.MaxBackoff = r.Backoff
	}
	return r, diags
}

// decodeRepairBlock decodes a repair block. RestartIndex is filled in by
// decodeTaskBlock once every step is known.
func decodeRepairBlock(block *hcl.Block) (*Repair, hcl.Diagnostics) {
	r := &Repair{Max: DefaultRepairMax, DeclRange: block.DefRange, restartRange: block.DefRange}
	content, diags := block.Body.Content(repairSchema)

	if attr, ok := content.Attributes["restart_from"]; ok {
		r.restartRange = attr.Expr.Range()
	}
	diags = append(diags, hcldecode.Fields(content.Attributes,
		hcldecode.Set("restart_from", &r.RestartFrom, hcldecode.NotEmpty("Invalid repair target", "restart_from must name this step or a step declared before it.")),
		hcldecode.Set("max", &r.Max, hcldecode.AtLeast(0, "Invalid repair budget", "max is how many repairs are allowed and must be 0 or more; got %d.")),
	)...)
	return r, diags
}

var sha256Pattern = regexp.MustCompile(`^[0-9a-fA-F]{64}$`)

// duplicateTaskBlock refuses a second block of a kind a task has at most
// one of (environment, budget, limits, notify, progress); first is where the first one is.
func duplicateTaskBlock(block *hcl.Block, first hcl.Range) *hcl.Diagnostic {
	return &hcl.Diagnostic{
		Severity: hcl.DiagError,
		Summary:  fmt.Sprintf("Duplicate %s block", block.Type),
		Detail:   fmt.Sprintf("A task has at most one %s block; one was already declared at %s.", block.Type, first),
		Subject:  block.DefRange.Ptr(),
	}
}

func duplicateBlock(block, first *hcl.Block) *hcl.Diagnostic {
	return &hcl.Diagnostic{
		Severity: hcl.DiagError,
		Summary:  fmt.Sprintf("Duplicate %s block", block.Type),
		Detail:   fmt.Sprintf("A step may have only one %s block; the first is at %s.", block.Type, first.DefRange),
		Subject:  block.DefRange.Ptr(),
	}
}

// undeclaredStep refuses a reference, at rng, to a step name the task
// does not declare, suggesting the closest of candidates; what says what
// names it ("restart_from names").
func undeclaredStep(what, name string, rng hcl.Range, candidates []*Step) *hcl.Diagnostic {
	return &hcl.Diagnostic{
		Severity: hcl.DiagError,
		Summary:  "Reference to undeclared step",
		Detail:   fmt.Sprintf("%s step %q, but this task declares no such step.%s", what, name, hcldecode.DidYouMean(name, stepNames(candidates))),
		Subject:  rng.Ptr(),
	}
}

func stepNames(steps []*Step) []string {
	names := make([]string, len(steps))
	for i, s := range steps {
		names[i] = s.Name
	}
	return names
}
