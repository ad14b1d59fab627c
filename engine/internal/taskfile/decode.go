package taskfile

import (
	"fmt"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/ext/typeexpr"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/convert"

	"github.com/lhengine/lhengine/engine/internal/bounds"
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

// labelDiag is an error on a block's first label (a duplicate or unknown
// name), shown inside the block's header.
func labelDiag(b *hcl.Block, summary, detail string) *hcl.Diagnostic {
	return &hcl.Diagnostic{
		Severity: hcl.DiagError,
		Summary:  summary,
		Detail:   detail,
		Subject:  b.LabelRanges[0].Ptr(),
		Context:  b.DefRange.Ptr(),
	}
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

	if attr, ok := content.Attributes["objective"]; ok {
		var d hcl.Diagnostics
		task.Objective, d = constString(attr)
		diags = append(diags, d...)
	}
	if attr, ok := content.Attributes["constraints"]; ok {
		var d hcl.Diagnostics
		task.Constraints, d = constStringList(attr)
		diags = append(diags, d...)
	}
	if attr, ok := content.Attributes["policies"]; ok {
		var d hcl.Diagnostics
		task.Policies, d = decodePolicyRefs(attr) // policy.go
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
				diags = append(diags, labelDiag(b, "Duplicate prompt", fmt.Sprintf("A prompt named %q was already declared at %s. Prompt names must be unique within a task.", p.Name, prev.DeclRange)))
				continue
			}
			prompts[p.Name] = p
			task.Prompts = append(task.Prompts, p)
		case "model":
			m, d := decodeModelBlock(b)
			diags = append(diags, d...)
			if prev, dup := models[m.Name]; dup {
				diags = append(diags, labelDiag(b, "Duplicate model", fmt.Sprintf("A model named %q was already declared at %s. Model names must be unique within a task.", m.Name, prev.DeclRange)))
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
				diags = append(diags, labelDiag(b, "Duplicate variable", fmt.Sprintf("A variable named %q was already declared at %s. Variable names must be unique within a task.", v.Name, prev.DeclRange)))
				continue
			}
			variables[v.Name] = v
			task.Variables = append(task.Variables, v)
		case "step":
			s, d := decodeStepBlock(b)
			diags = append(diags, d...)
			if prev, dup := steps[s.Name]; dup {
				diags = append(diags, labelDiag(b, "Duplicate step", fmt.Sprintf("A step named %q was already declared at %s. Step names must be unique within a task.", s.Name, prev.DeclRange)))
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
			diags = append(diags, &hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  "Reference to undeclared step",
				Detail:   fmt.Sprintf("restart_from names step %q, but this task declares no such step.%s", s.Repair.RestartFrom, didYouMean(s.Repair.RestartFrom, stepNames(task.Steps[:s.Index+1]))),
				Subject:  s.Repair.restartRange.Ptr(),
			})
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
		diags = append(diags, invalidName("variable", block))
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
	if attr, ok := content.Attributes["description"]; ok {
		var d hcl.Diagnostics
		v.Description, d = constString(attr)
		diags = append(diags, d...)
	}
	if attr, ok := content.Attributes["default"]; ok {
		val, d := constValue(attr)
		diags = append(diags, d...)
		if !d.HasErrors() && typeOK {
			converted, err := convert.Convert(val, v.Type)
			if err != nil {
				diags = append(diags, &hcl.Diagnostic{
					Severity: hcl.DiagError,
					Summary:  "Invalid default value for variable",
					Detail:   fmt.Sprintf("This default value is not compatible with the variable's type constraint %s: %s.", typeexpr.TypeString(v.Type), errorText(err)),
					Subject:  attr.Expr.Range().Ptr(),
					Context:  attr.Range.Ptr(),
				})
			} else {
				v.Default = converted
			}
		}
	}
	return v, diags
}

// decodeStepBlock decodes a step block with its retry and repair blocks and
// what the step may reach (decodeCapabilities).
// Repair targets are resolved by decodeTaskBlock, which knows every step.
func decodeStepBlock(block *hcl.Block) (*Step, hcl.Diagnostics) {
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
		diags = append(diags, invalidName("step", block))
	}

	content, moreDiags := block.Body.Content(stepSchema)
	diags = append(diags, moreDiags...)
	attrs := content.Attributes

	if attr, ok := attrs["plugin"]; ok {
		s.PluginRange = attr.Expr.Range()
		plugin, d := constString(attr)
		diags = append(diags, d...)
		if !d.HasErrors() && strings.TrimSpace(plugin) == "" {
			diags = append(diags, &hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  "Empty plugin path",
				Detail:   "plugin must be the path of a WebAssembly module, relative to the task file's directory.",
				Subject:  attr.Expr.Range().Ptr(),
				Context:  attr.Range.Ptr(),
			})
		}
		s.Plugin = plugin
	}
	if attr, ok := attrs["plugin_sha256"]; ok {
		s.shaRange = attr.Expr.Range()
		sum, d := constString(attr)
		diags = append(diags, d...)
		if !d.HasErrors() {
			if !sha256Pattern.MatchString(sum) {
				diags = append(diags, &hcl.Diagnostic{
					Severity: hcl.DiagError,
					Summary:  "Invalid plugin checksum",
					Detail:   fmt.Sprintf("plugin_sha256 must be a SHA-256 digest: 64 hexadecimal digits. This value has %d characters.", len(sum)),
					Subject:  attr.Expr.Range().Ptr(),
					Context:  attr.Range.Ptr(),
				})
			} else {
				s.PluginSHA256 = strings.ToLower(sum)
			}
		}
	}
	if attr, ok := attrs["input"]; ok {
		s.Input = attr.Expr
	}
	if attr, ok := attrs["for_each"]; ok {
		s.ForEach = attr.Expr
		s.Concurrency = DefaultConcurrency
	}
	if attr, ok := attrs["concurrency"]; ok {
		if s.ForEach == nil {
			diags = append(diags, &hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  "Concurrency without for_each",
				Detail:   "concurrency limits how many fan-out items run at once, so it is only valid in a step with for_each.",
				Subject:  attr.Range.Ptr(),
				Context:  block.DefRange.Ptr(),
			})
		} else {
			n, d := constInt(attr)
			diags = append(diags, d...)
			if !d.HasErrors() {
				if n < 1 {
					diags = append(diags, &hcl.Diagnostic{
						Severity: hcl.DiagError,
						Summary:  "Invalid concurrency",
						Detail:   fmt.Sprintf("concurrency must be at least 1; got %d.", n),
						Subject:  attr.Expr.Range().Ptr(),
						Context:  attr.Range.Ptr(),
					})
				} else {
					s.Concurrency = n
				}
			}
		}
	}
	if attr, ok := attrs["allow_failures"]; ok {
		diags = append(diags, decodeAllowFailures(s, attr, block)...)
	}
	if attr, ok := attrs["timeout"]; ok {
		d, moreDiags := constDuration(attr)
		diags = append(diags, moreDiags...)
		if !moreDiags.HasErrors() {
			if d <= 0 {
				diags = append(diags, &hcl.Diagnostic{
					Severity: hcl.DiagError,
					Summary:  "Invalid duration",
					Detail:   fmt.Sprintf("timeout must be positive; got %q.", d),
					Subject:  attr.Expr.Range().Ptr(),
					Context:  attr.Range.Ptr(),
				})
			} else {
				s.Timeout = d
			}
		}
	}
	if attr, ok := attrs["memory"]; ok {
		m, d := constMemory(attr)
		diags = append(diags, d...)
		if !d.HasErrors() {
			s.Memory = m
		}
	}

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

	if attr, ok := content.Attributes["attempts"]; ok {
		n, d := constInt(attr)
		diags = append(diags, d...)
		if !d.HasErrors() {
			if n < 1 {
				diags = append(diags, &hcl.Diagnostic{
					Severity: hcl.DiagError,
					Summary:  "Invalid retry attempts",
					Detail:   fmt.Sprintf("attempts counts every attempt including the first, so it must be at least 1; got %d.", n),
					Subject:  attr.Expr.Range().Ptr(),
					Context:  attr.Range.Ptr(),
				})
			} else {
				r.Attempts = n
			}
		}
	}
	backoffAttr, hasBackoff := content.Attributes["backoff"]
	if hasBackoff {
		d, moreDiags := constDuration(backoffAttr)
		diags = append(diags, moreDiags...)
		if !moreDiags.HasErrors() {
			if d < 0 {
				diags = append(diags, negativeDuration(backoffAttr, d))
			} else {
				r.Backoff = d
			}
		}
	}
	maxAttr, hasMax := content.Attributes["max_backoff"]
	if hasMax {
		d, moreDiags := constDuration(maxAttr)
		diags = append(diags, moreDiags...)
		if !moreDiags.HasErrors() {
			switch {
			case d < 0:
				diags = append(diags, negativeDuration(maxAttr, d))
			case d < r.Backoff:
				diags = append(diags, &hcl.Diagnostic{
					Severity: hcl.DiagError,
					Summary:  "Invalid duration",
					Detail:   fmt.Sprintf("max_backoff (%s) must not be less than backoff (%s).", d, r.Backoff),
					Subject:  maxAttr.Expr.Range().Ptr(),
					Context:  maxAttr.Range.Ptr(),
				})
			default:
				r.MaxBackoff = d
			}
		}
	} else if r.Backoff > r.MaxBackoff {
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
		name, d := constString(attr)
		diags = append(diags, d...)
		if !d.HasErrors() {
			if name == "" {
				diags = append(diags, &hcl.Diagnostic{
					Severity: hcl.DiagError,
					Summary:  "Invalid repair target",
					Detail:   "restart_from must name this step or a step declared before it.",
					Subject:  attr.Expr.Range().Ptr(),
					Context:  attr.Range.Ptr(),
				})
			}
			r.RestartFrom = name
		}
	}
	if attr, ok := content.Attributes["max"]; ok {
		n, d := constInt(attr)
		diags = append(diags, d...)
		if !d.HasErrors() {
			if n < 0 {
				diags = append(diags, &hcl.Diagnostic{
					Severity: hcl.DiagError,
					Summary:  "Invalid repair budget",
					Detail:   fmt.Sprintf("max is how many repairs are allowed and must be 0 or more; got %d.", n),
					Subject:  attr.Expr.Range().Ptr(),
					Context:  attr.Range.Ptr(),
				})
			} else {
				r.Max = n
			}
		}
	}
	return r, diags
}

var sha256Pattern = regexp.MustCompile(`^[0-9a-fA-F]{64}$`)

func invalidName(kind string, block *hcl.Block) *hcl.Diagnostic {
	return &hcl.Diagnostic{
		Severity: hcl.DiagError,
		Summary:  fmt.Sprintf("Invalid %s name", kind),
		Detail:   fmt.Sprintf("A %s name must start with a letter or underscore and contain only letters, digits, underscores and dashes, so that expressions can refer to it.", kind),
		Subject:  block.LabelRanges[0].Ptr(),
		Context:  block.DefRange.Ptr(),
	}
}

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

func negativeDuration(attr *hcl.Attribute, d fmt.Stringer) *hcl.Diagnostic {
	return &hcl.Diagnostic{
		Severity: hcl.DiagError,
		Summary:  "Invalid duration",
		Detail:   fmt.Sprintf("%s must not be negative; got %s.", attr.Name, d),
		Subject:  attr.Expr.Range().Ptr(),
		Context:  attr.Range.Ptr(),
	}
}

func stepNames(steps []*Step) []string {
	names := make([]string, len(steps))
	for i, s := range steps {
		names[i] = s.Name
	}
	return names
}
