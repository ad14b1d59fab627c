// Package policylang reads and applies harness policies (specs/policies.md):
// ParsePolicies reads a policy file into versioned Policy values,
// ParsePinnedPolicy reads back the text of one a run manifest pinned, and
// ApplyPolicies applies a run's policies to a parsed task
// (engine/internal/taskfile): steps inserted next to the steps their globs
// match (decoded as task steps, then adopted by the task and checked as
// its own), parameters handed to plugins, and overrides of step limits.
// The policies a task selects are the task language's (taskfile.PolicyRef);
// finding them on the search path is the plan package's.
//
// As in taskfile, every mistake is an hcl.Diagnostic with a Subject range
// in the policy file, sorted in file order; nothing here prints or panics.
package policylang

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math"
	"path"
	"strconv"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"

	"github.com/lhengine/lhengine/engine/internal/bounds"
	"github.com/lhengine/lhengine/engine/internal/hcldecode"
	"github.com/lhengine/lhengine/engine/internal/jsonval"
	"github.com/lhengine/lhengine/engine/internal/taskfile"
)

// A Policy is one version of a harness policy (specs/policies.md): a
// workaround for what today's models do badly, stated as data the engine
// applies to a task (steps inserted before or after matching steps,
// parameters handed to plugins, overrides of step limits), with the model
// capability it assumes and the evidence for it.
//
// A Policy is immutable once parsed. Its Text is the policy block's own
// source, which is what a run manifest pins: ParsePinnedPolicy reads it back,
// with the same file positions, without the file.
type Policy struct {
	Name       string
	Version    int
	Assumption string
	Evidence   Evidence
	Steps      string                     // glob of the steps Params go to; "*" by default
	Params     map[string][]byte          // parameter name -> JSON value; nil when none
	Inserts    []*Insert                  // in declaration order
	Overrides  []*Override                // in declaration order
	Filename   string                     // the file the block is in
	Start      hcl.Pos                    // where Text starts in that file
	Text       []byte                     // the policy block's source
	SHA256     string                     // of Text, lower-case hex
	DeclRange  hcl.Range                  // the block's header
	ParamsRng  hcl.Range                  // the params attribute, for conflicts
	paramRange map[string]hcl.Range       // each parameter's value
	blocks     map[*Insert]insertTemplate // to decode an insert again for each anchor
}

// Evidence is why a policy is believed to help: text, and the path of an eval
// result file when one backs it.
type Evidence struct {
	Text   string
	Result string // "" when no eval result backs the policy yet
}

// Ref is NAME@VERSION, the way reports and provenance name a policy version.
func (p *Policy) Ref() string { return p.Name + "@" + strconv.Itoa(p.Version) }

// Insert adds a step before or after every task step whose name matches a
// glob. The inserted step is decoded like a task step (the same attributes and
// blocks); in its expressions step.anchor.output is the output of the step it
// was inserted next to, and restart_from = "anchor" names that step.
//
// With Every = N (after only) the step is a window step: it gets one unit
// for every N committed units of the anchor, while the anchor runs, and one
// for the rest when the anchor completes; in its input step.anchor.output is
// the outputs of the window's anchor units, each.key the window's number and
// each.value {from, to, items} (specs/policies.md §2.1).
type Insert struct {
	Name      string
	Before    string // glob; exactly one of Before and After is set
	After     string
	Every     int // 0: next to the anchor; N: a window step of it
	DeclRange hcl.Range
	anchorRng hcl.Range
}

// Anchor is the glob and where the insert goes: "before" or "after".
func (in *Insert) Anchor() (where, glob string) {
	if in.Before != "" {
		return "before", in.Before
	}
	return "after", in.After
}

type insertTemplate struct {
	index int // of the insert block among the policy's insert blocks
}

// Override changes limits of the steps whose names match Steps. A nil field
// leaves the step's own value.
type Override struct {
	Steps      string
	Attempts   *int
	Backoff    *time.Duration
	MaxBackoff *time.Duration
	Timeout    *time.Duration
	Memory     *uint64
	HostCalls  *int
	RepairMax  *int
	DeclRange  hcl.Range
	ranges     map[string]hcl.Range // field -> its value's range
}

var policyFileSchema = &hcl.BodySchema{
	Blocks: []hcl.BlockHeaderSchema{{Type: "policy", LabelNames: []string{"name"}}},
}

var policySchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{
		{Name: "version", Required: true},
		{Name: "assumption", Required: true},
		{Name: "steps"},
		{Name: "params"},
	},
	Blocks: []hcl.BlockHeaderSchema{
		{Type: "evidence"},
		{Type: "insert", LabelNames: []string{"name"}},
		{Type: "override"},
	},
}

var evidenceSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{
		{Name: "text", Required: true},
		{Name: "result"},
	},
}

var insertAnchorSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{{Name: "before"}, {Name: "after"}, {Name: "every"}},
}

// MaxEvery bounds an insert's every: the ledger's bound, store.MaxEvery
// (the plan package's tests hold the two equal).
const MaxEvery = 1000

var overrideSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{
		{Name: "steps", Required: true},
		{Name: "attempts"},
		{Name: "backoff"},
		{Name: "max_backoff"},
		{Name: "timeout"},
		{Name: "memory"},
		{Name: "host_calls"},
		{Name: "repair_max"},
	},
}

// ParsePolicies parses a policy file: one or more policy blocks, each one
// version of a policy. Every mistake is reported, in file order, with a
// Subject range in filename; a syntax error stops the parse. Policies with
// errors are left out of the result. ParsePolicies never panics.
func ParsePolicies(filename string, src []byte) (ps []*Policy, diags hcl.Diagnostics) {
	return parsePolicies(filename, src, hcl.InitialPos)
}

// ParsePinnedPolicy reads back the Text of a policy pinned in a run manifest,
// whose block starts at start in filename. The text must hold exactly one
// policy block.
func ParsePinnedPolicy(filename string, text []byte, start hcl.Pos) (*Policy, hcl.Diagnostics) {
	ps, diags := parsePolicies(filename, text, start)
	if diags.HasErrors() {
		return nil, diags
	}
	if len(ps) != 1 {
		return nil, append(diags, &hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  "Invalid pinned policy",
			Detail:   fmt.Sprintf("A pinned policy holds exactly one policy block; this one holds %d.", len(ps)),
			Subject:  &hcl.Range{Filename: filename, Start: start, End: start},
		})
	}
	return ps[0], diags
}

func parsePolicies(filename string, src []byte, start hcl.Pos) (ps []*Policy, diags hcl.Diagnostics) {
	defer func() {
		if r := recover(); r != nil {
			ps = nil
			diags = append(diags, &hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  "Internal error while parsing the policy file",
				Detail:   fmt.Sprintf("The policy file could not be parsed because of a bug in lhengine: %v. Please report it with the file attached.", r),
				Subject:  &hcl.Range{Filename: filename, Start: start, End: start},
			})
		}
	}()
	if diags := bounds.CheckSource(filename, src); diags.HasErrors() {
		return nil, diags
	}
	file, diags := hclsyntax.ParseConfig(src, filename, start)
	if diags.HasErrors() {
		return nil, diags
	}
	bounds.Instrument(file.Body)
	content, d := file.Body.Content(policyFileSchema)
	diags = append(diags, d...)
	seen := map[string]*Policy{}
	for _, b := range content.Blocks {
		p, d := decodePolicyBlock(b)
		diags = append(diags, d...)
		if d.HasErrors() {
			continue
		}
		rng := b.Body.(*hclsyntax.Body).SrcRange
		from, to := b.DefRange.Start.Byte-start.Byte, rng.End.Byte-start.Byte
		p.Filename = filename
		p.Start = b.DefRange.Start
		p.Text = bytes.Clone(src[from:to])
		sum := sha256.Sum256(p.Text)
		p.SHA256 = hex.EncodeToString(sum[:])
		if prev, dup := seen[p.Ref()]; dup {
			diags = append(diags, hcldecode.LabelError(b, "Duplicate policy version", fmt.Sprintf("Version %d of policy %q was already declared at %s. Give the new one the next version number.", p.Version, p.Name, prev.DeclRange)))
			continue
		}
		seen[p.Ref()] = p
		ps = append(ps, p)
	}
	if len(content.Blocks) == 0 && !diags.HasErrors() {
		diags = append(diags, &hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  "Missing policy block",
			Detail:   `A policy file declares one or more policies: policy "name" { version = 1 ... }.`,
			Subject:  file.Body.MissingItemRange().Ptr(),
		})
	}
	return ps, hcldecode.Sort(diags)
}

func decodePolicyBlock(block *hcl.Block) (*Policy, hcl.Diagnostics) {
	p := &Policy{Name: block.Labels[0], Steps: "*", DeclRange: block.DefRange, blocks: map[*Insert]insertTemplate{}}
	var diags hcl.Diagnostics
	if !hclsyntax.ValidIdentifier(p.Name) {
		diags = append(diags, hcldecode.InvalidName("policy", block))
	}
	content, d := block.Body.Content(policySchema)
	diags = append(diags, d...)
	if attr, ok := content.Attributes["params"]; ok {
		p.ParamsRng = attr.Range
		p.Params, p.paramRange, d = constParams(attr)
		diags = append(diags, d...)
	}
	diags = append(diags, hcldecode.Fields(content.Attributes,
		hcldecode.Set("version", &p.Version, hcldecode.AtLeast(1, "Invalid policy version", "version is a whole number of at least 1; got %d.")),
		hcldecode.Set("assumption", &p.Assumption, notBlank("assumption", "assumption states the model capability the policy compensates for")),
		hcldecode.Set("steps", &p.Steps, constGlob),
	)...)
	var evidence *hcl.Block
	inserts := map[string]*Insert{}
	for _, b := range content.Blocks {
		switch b.Type {
		case "evidence":
			if evidence != nil {
				diags = append(diags, &hcl.Diagnostic{
					Severity: hcl.DiagError,
					Summary:  "Duplicate evidence block",
					Detail:   fmt.Sprintf("A policy has one evidence block; the first is at %s.", evidence.DefRange),
					Subject:  b.DefRange.Ptr(),
				})
				continue
			}
			evidence = b
			p.Evidence, d = decodeEvidenceBlock(b)
			diags = append(diags, d...)
		case "insert":
			in, d := decodeInsertAnchor(b)
			diags = append(diags, d...)
			if prev, dup := inserts[in.Name]; dup {
				diags = append(diags, hcldecode.LabelError(b, "Duplicate insert", fmt.Sprintf("An insert named %q was already declared at %s.", in.Name, prev.DeclRange)))
				continue
			}
			// Decode the step part once now, for its diagnostics; it is
			// decoded again, fresh, for every step it is inserted next to.
			st, d := decodeInsertStep(b, "")
			diags = append(diags, d...)
			if st != nil && st.ForEach != nil && in.Every > 0 {
				diags = append(diags, &hcl.Diagnostic{
					Severity: hcl.DiagError,
					Summary:  "Invalid insert interval",
					Detail:   "A step inserted with every gets one unit per window of its anchor's units, with the window as each.key and each.value: it has no for_each.",
					Subject:  st.ForEach.Range().Ptr(),
				})
			}
			inserts[in.Name] = in
			p.blocks[in] = insertTemplate{index: len(p.Inserts)}
			p.Inserts = append(p.Inserts, in)
		case "override":
			o, d := decodeOverrideBlock(b)
			diags = append(diags, d...)
			p.Overrides = append(p.Overrides, o)
		}
	}
	if evidence == nil {
		diags = append(diags, &hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  "Missing evidence block",
			Detail:   `A policy says why it is believed to help: evidence { text = "...", result = "path/to/eval/result.json" } (result is optional; say plainly when no eval backs the policy yet).`,
			Subject:  block.DefRange.Ptr(),
		})
	}
	return p, diags
}

// notBlank decodes the text name, which must say something: what says
// what.
func notBlank(name, what string) hcldecode.Decoder[string] {
	return hcldecode.NotBlank("Empty text", fmt.Sprintf("%s must not be blank: %s.", name, what))
}

func decodeEvidenceBlock(b *hcl.Block) (Evidence, hcl.Diagnostics) {
	var e Evidence
	content, diags := b.Body.Content(evidenceSchema)
	return e, append(diags, hcldecode.Fields(content.Attributes,
		hcldecode.Set("text", &e.Text, notBlank("text", "say what backs the policy, or plainly that nothing does yet")),
		hcldecode.Set("result", &e.Result, hcldecode.String),
	)...)
}

// constGlob evaluates a constant step-name glob (path.Match syntax).
func constGlob(attr *hcl.Attribute) (string, hcl.Diagnostics) {
	s, diags := hcldecode.String(attr)
	if diags.HasErrors() {
		return "", diags
	}
	if _, err := path.Match(s, ""); err != nil || s == "" {
		return "", append(diags, hcldecode.Error(attr, "Invalid step pattern",
			fmt.Sprintf("%s is a pattern of step names: * matches any run of characters, ? one character, [abc] one of a set; %q is not one.", attr.Name, s)))
	}
	return s, diags
}

// constParams evaluates params: a constant object whose members become JSON.
func constParams(attr *hcl.Attribute) (map[string][]byte, map[string]hcl.Range, hcl.Diagnostics) {
	v, diags := hcldecode.Value(attr)
	if diags.HasErrors() {
		return nil, nil, diags
	}
	ty := v.Type()
	if v.IsNull() || !(ty.IsObjectType() || ty.IsMapType()) {
		return nil, nil, append(diags, hcldecode.WrongType(attr, "an object of parameters required, such as { single_tool = true }"))
	}
	ranges := map[string]hcl.Range{}
	if obj, ok := attr.Expr.(*hclsyntax.ObjectConsExpr); ok {
		for _, item := range obj.Items {
			if k, d := item.KeyExpr.Value(nil); !d.HasErrors() && k.Type() == cty.String && k.IsKnown() && !k.IsNull() {
				ranges[k.AsString()] = hcl.RangeBetween(item.KeyExpr.Range(), item.ValueExpr.Range())
			}
		}
	}
	out := map[string][]byte{}
	for it := v.ElementIterator(); it.Next(); {
		k, e := it.Element()
		b, err := jsonval.ToJSON(e)
		if err != nil {
			return nil, nil, append(diags, hcldecode.WrongType(attr, fmt.Sprintf("parameter %q: %s", k.AsString(), hcldecode.ErrorText(err))))
		}
		out[k.AsString()] = b
		if _, ok := ranges[k.AsString()]; !ok {
			ranges[k.AsString()] = attr.Expr.Range()
		}
	}
	return out, ranges, diags
}

func decodeInsertAnchor(b *hcl.Block) (*Insert, hcl.Diagnostics) {
	in := &Insert{Name: b.Labels[0], DeclRange: b.DefRange, anchorRng: b.DefRange}
	content, _, diags := b.Body.PartialContent(insertAnchorSchema)
	before, hasBefore := content.Attributes["before"]
	after, hasAfter := content.Attributes["after"]
	switch {
	case hasBefore && hasAfter:
		diags = append(diags, &hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  "Conflicting insert anchors",
			Detail:   "An insert goes either before or after the steps it matches; give one of before and after.",
			Subject:  after.Range.Ptr(),
			Context:  b.DefRange.Ptr(),
		})
	case !hasBefore && !hasAfter:
		diags = append(diags, &hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  "Missing insert anchor",
			Detail:   `An insert says where its step goes: before = "glob" or after = "glob", a pattern of task step names such as "draft*".`,
			Subject:  b.DefRange.Ptr(),
		})
	case hasBefore:
		in.anchorRng = before.Expr.Range()
		g, d := constGlob(before)
		diags = append(diags, d...)
		in.Before = g
	default:
		in.anchorRng = after.Expr.Range()
		g, d := constGlob(after)
		diags = append(diags, d...)
		in.After = g
	}
	if every, ok := content.Attributes["every"]; ok {
		n, d := hcldecode.Int(every)
		diags = append(diags, d...)
		switch {
		case d.HasErrors():
		case n < 1 || n > MaxEvery:
			diags = append(diags, &hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  "Invalid insert interval",
				Detail:   fmt.Sprintf("every is the number of the anchor's committed units per unit of the inserted step: from 1 to %d; got %d.", MaxEvery, n),
				Subject:  every.Expr.Range().Ptr(),
			})
		case hasBefore:
			diags = append(diags, &hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  "Invalid insert interval",
				Detail:   "A step inserted with every runs beside its anchor as the anchor's units commit: it goes with after, not before.",
				Subject:  every.NameRange.Ptr(),
			})
		default:
			in.Every = n
		}
	}
	return in, diags
}

// decodeInsertStep decodes the step part of an insert block as a task step
// would be, then points step.anchor at the anchor step: references become
// step.<anchor>, and restart_from = "anchor" the anchor's name. With anchor
// "" the references are left alone (for the diagnostics of the block).
func decodeInsertStep(b *hcl.Block, anchor string) (*taskfile.Step, hcl.Diagnostics) {
	_, rest, _ := b.Body.PartialContent(insertAnchorSchema)
	s, diags := taskfile.DecodeStepBlock(&hcl.Block{
		Type: b.Type, Labels: b.Labels, Body: rest,
		DefRange: b.DefRange, TypeRange: b.TypeRange, LabelRanges: b.LabelRanges,
	})
	if anchor == "" {
		return s, diags
	}
	for _, expr := range []hcl.Expression{s.Input, s.ForEach} {
		if expr == nil {
			continue
		}
		se, ok := expr.(hclsyntax.Expression)
		if !ok {
			continue
		}
		_ = hclsyntax.VisitAll(se, func(n hclsyntax.Node) hcl.Diagnostics {
			st, ok := n.(*hclsyntax.ScopeTraversalExpr)
			if !ok || st.Traversal.RootName() != "step" || len(st.Traversal) < 2 {
				return nil
			}
			if a, ok := st.Traversal[1].(hcl.TraverseAttr); ok && a.Name == "anchor" {
				tr := append(hcl.Traversal{}, st.Traversal...)
				tr[1] = hcl.TraverseAttr{Name: anchor, SrcRange: a.SrcRange}
				st.Traversal = tr
			}
			return nil
		})
	}
	if s.Repair != nil && s.Repair.RestartFrom == "anchor" {
		s.Repair.RestartFrom = anchor
	}
	return s, diags
}

func decodeOverrideBlock(b *hcl.Block) (*Override, hcl.Diagnostics) {
	o := &Override{DeclRange: b.DefRange, ranges: map[string]hcl.Range{}}
	content, diags := b.Body.Content(overrideSchema)
	attrs := content.Attributes
	for name, attr := range attrs {
		if name != "steps" {
			o.ranges[name] = attr.Range
		}
	}
	count := func(name string, dst **int, min int, summary string) hcldecode.Field {
		return hcldecode.SetPtr(name, dst, hcldecode.AtLeast(min, summary, fmt.Sprintf("%s must be at least %d; got %%d.", name, min)))
	}
	duration := func(name string, dst **time.Duration, min time.Duration) hcldecode.Field {
		return hcldecode.SetPtr(name, dst, hcldecode.DurationIn(min, math.MaxInt64, "Invalid duration", name+" must be positive; got %s."))
	}
	diags = append(diags, hcldecode.Fields(attrs,
		hcldecode.Set("steps", &o.Steps, constGlob),
		count("attempts", &o.Attempts, 1, "Invalid retry attempts"),
		count("host_calls", &o.HostCalls, 0, "Invalid host call budget"),
		count("repair_max", &o.RepairMax, 0, "Invalid repair budget"),
		duration("backoff", &o.Backoff, 0),
		duration("max_backoff", &o.MaxBackoff, 0),
		duration("timeout", &o.Timeout, 1),
		hcldecode.SetPtr("memory", &o.Memory, taskfile.DecodeMemory),
	)...)
	if o.Backoff != nil && o.MaxBackoff != nil && *o.MaxBackoff < *o.Backoff {
		diags = append(diags, &hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  "Invalid duration",
			Detail:   fmt.Sprintf("max_backoff (%s) must not be less than backoff (%s).", *o.MaxBackoff, *o.Backoff),
			Subject:  attrs["max_backoff"].Expr.Range().Ptr(),
		})
	}
	if len(o.ranges) == 0 && !diags.HasErrors() {
		diags = append(diags, &hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  "Empty override",
			Detail:   "An override sets at least one of attempts, backoff, max_backoff, timeout, memory, host_calls and repair_max.",
			Subject:  b.DefRange.Ptr(),
		})
	}
	return o, diags
}
