// Package evalrun is `lhengine eval`: it runs an eval set (an HCL file of
// cases, each a task file with variables and a verifier) in every policy
// state an ablation asks for, each case and state on a fresh store of its
// own, and reports what the durable records of those stores say: success
// rate, attempts, repeated units, repairs, wall time, cost and, for cases
// run through a real crash, whether recovery was correct
// (specs/policies.md, "Ablation evals").
//
// The flow is: LoadSet parses and checks the set file; Run plans the runs
// (cases × states × repeats, in an order the seed decides), works each on
// the public engine API (a crash case in a child lhengine process that
// SIGKILLs itself, then in-process), measures each from its store with
// Measure, and gathers the figures into a Result, which WriteJSON and
// WriteMarkdown render.
package evalrun

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
	ctyjson "github.com/zclconf/go-cty/cty/json"

	"github.com/lhengine/lhengine/engine"
	"github.com/lhengine/lhengine/internal/crashpoint"
	"github.com/lhengine/lhengine/internal/hcldiag"
)

// Set is a parsed eval set file.
type Set struct {
	Name        string
	Description string
	Filename    string   // as given to ParseSet
	Dir         string   // the directory paths in the file are relative to
	SHA256      string   // of the file
	Policies    []string // NAME or NAME@VERSION, added to what each case's task selects
	PolicyDirs  []string // absolute; searched after policies/ beside each task file
	Ablate      []string // NAME (the state without it) or NAME@VERSION (with that version)
	Cases       []*Case  // in file order
	DeclRange   hcl.Range
}

// Case is one case of a set: a task run with fixed variables and checked
// by a verifier.
type Case struct {
	Name     string
	Task     string            // as written in the set file
	TaskPath string            // absolute
	Vars     map[string]string // raw values, as --var gives them
	Repeat   int               // runs per state, >= 1
	Crash    string            // crash point POINT or POINT@N; "" for none
	// ModelReplay is the folder of recorded model responses every run of
	// the case is submitted with (--model-replay), as written; "" for
	// none. ModelReplayPath is absolute.
	ModelReplay, ModelReplayPath string
	Verify                       Verify
	Range                        hcl.Range // the case header
}

// Verify decides whether a case's run passed: every check given must pass.
type Verify struct {
	// Expect, when set, is the JSON the task's output must equal (as
	// values: key order and spacing do not matter).
	Expect json.RawMessage
	// Includes and Excludes are texts that some string of the output must
	// contain, and that no string of it may contain.
	Includes, Excludes []string
	// Plugin, when set, is a step plugin the engine runs on the output; its
	// output {"pass": bool, "reason": "..."} decides. PluginPath is absolute.
	Plugin, PluginPath string
}

// Limits of a set file, checked before it is parsed.
const (
	MaxSetBytes     = 256 << 10
	MaxNestingDepth = 64
	maxNumberLength = 40
	maxRepeat       = 1000
)

var setFileSchema = &hcl.BodySchema{
	Blocks: []hcl.BlockHeaderSchema{{Type: "eval", LabelNames: []string{"name"}}},
}

var setSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{
		{Name: "description"},
		{Name: "policies"},
		{Name: "policy_dirs"},
		{Name: "ablate"},
	},
	Blocks: []hcl.BlockHeaderSchema{{Type: "case", LabelNames: []string{"name"}}},
}

var caseSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{
		{Name: "task", Required: true},
		{Name: "vars"},
		{Name: "repeat"},
		{Name: "crash"},
		{Name: "model_replay"},
	},
	Blocks: []hcl.BlockHeaderSchema{{Type: "verify"}},
}

var verifySchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{
		{Name: "expect"},
		{Name: "output_includes"},
		{Name: "output_excludes"},
		{Name: "plugin"},
	},
}

// LoadSet reads and parses the set file at path. files maps the filename
// used in the diagnostics to its source, for WriteDiagnostics.
func LoadSet(path string) (*Set, map[string][]byte, hcl.Diagnostics) {
	src, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, hcl.Diagnostics{{
			Severity: hcl.DiagError,
			Summary:  "Cannot read eval set",
			Detail:   fmt.Sprintf("The eval set file could not be read: %v.", err),
		}}
	}
	s, diags := ParseSet(path, src)
	return s, map[string][]byte{path: src}, diags
}

// ParseSet parses an eval set file. Relative paths in it are relative to
// the directory of filename; the task files and verifier plugins it names
// must exist. Every mistake is reported with a subject range in filename; a
// syntax error stops the parse. ParseSet never panics: a bug is reported
// as a diagnostic. A Set is returned only when there is no error.
func ParseSet(filename string, src []byte) (set *Set, diags hcl.Diagnostics) {
	defer func() {
		if r := recover(); r != nil {
			set = nil
			diags = append(diags, &hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  "Internal error while parsing the eval set",
				Detail:   fmt.Sprintf("The eval set could not be parsed because of a bug in lhengine: %v. Please report it with the file attached.", r),
				Subject:  &hcl.Range{Filename: filename, Start: hcl.InitialPos, End: hcl.InitialPos},
			})
		}
	}()
	if d := checkSource(filename, src); d.HasErrors() {
		return nil, d
	}
	file, diags := hclsyntax.ParseConfig(src, filename, hcl.InitialPos)
	if diags.HasErrors() {
		return nil, diags
	}
	content, d := file.Body.Content(setFileSchema)
	diags = append(diags, d...)
	if len(content.Blocks) == 0 {
		if !diags.HasErrors() {
			diags = append(diags, &hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  "Missing eval block",
				Detail:   `An eval set file declares one set: eval "name" { case "name" { ... } }.`,
				Subject:  file.Body.MissingItemRange().Ptr(),
			})
		}
		return nil, diags
	}
	for _, b := range content.Blocks[1:] {
		diags = append(diags, &hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  "Duplicate eval block",
			Detail:   fmt.Sprintf("An eval set file declares one set; the first is at %s.", content.Blocks[0].DefRange),
			Subject:  b.DefRange.Ptr(),
		})
	}
	dir, err := filepath.Abs(filepath.Dir(filename))
	if err != nil {
		dir = filepath.Dir(filename)
	}
	sum := sha256.Sum256(src)
	s := &Set{Filename: filename, Dir: dir, SHA256: hex.EncodeToString(sum[:])}
	diags = append(diags, s.decode(content.Blocks[0])...)
	if diags.HasErrors() {
		return nil, diags
	}
	return s, diags
}

func (s *Set) decode(b *hcl.Block) hcl.Diagnostics {
	s.Name, s.DeclRange = b.Labels[0], b.DefRange
	var diags hcl.Diagnostics
	if !hclsyntax.ValidIdentifier(s.Name) {
		diags = append(diags, &hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  "Invalid eval name",
			Detail:   "An eval set's name starts with a letter or underscore and holds letters, digits, underscores and dashes: it names the result files.",
			Subject:  b.LabelRanges[0].Ptr(),
		})
	}
	content, d := b.Body.Content(setSchema)
	diags = append(diags, d...)
	if a, ok := content.Attributes["description"]; ok {
		s.Description, d = stringAttr(a)
		diags = append(diags, d...)
	}
	if a, ok := content.Attributes["policies"]; ok {
		s.Policies, d = policyRefs(a, "Duplicate policy")
		diags = append(diags, d...)
	}
	if a, ok := content.Attributes["ablate"]; ok {
		s.Ablate, d = policyRefs(a, "Duplicate ablation")
		diags = append(diags, d...)
	}
	if a, ok := content.Attributes["policy_dirs"]; ok {
		dirs, rngs, d := stringList(a)
		diags = append(diags, d...)
		for i, dir := range dirs {
			p := s.path(dir)
			if fi, err := os.Stat(p); err != nil || !fi.IsDir() {
				why := "it is not a directory"
				if err != nil {
					why = err.Error()
				}
				diags = append(diags, &hcl.Diagnostic{
					Severity: hcl.DiagError,
					Summary:  "Cannot read policy directory",
					Detail:   fmt.Sprintf("The policy directory %s (relative to the eval set's directory) cannot be used: %s.", dir, why),
					Subject:  rngs[i].Ptr(),
				})
				continue
			}
			s.PolicyDirs = append(s.PolicyDirs, p)
		}
	}
	seen := map[string]*Case{}
	for _, cb := range content.Blocks {
		c, d := s.decodeCase(cb)
		diags = append(diags, d...)
		if prev, dup := seen[cb.Labels[0]]; dup {
			diags = append(diags, &hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  "Duplicate case",
				Detail:   fmt.Sprintf("A case named %q was already declared at %s.", cb.Labels[0], prev.Range),
				Subject:  cb.LabelRanges[0].Ptr(),
			})
			continue
		}
		if c != nil {
			seen[c.Name] = c
			s.Cases = append(s.Cases, c)
		}
	}
	if len(content.Blocks) == 0 {
		diags = append(diags, &hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  "Missing case block",
			Detail:   `An eval set has at least one case: case "name" { task = "FILE.hcl" verify { ... } }.`,
			Subject:  b.DefRange.Ptr(),
		})
	}
	return diags
}

// path resolves p against the set file's directory.
func (s *Set) path(p string) string {
	if filepath.IsAbs(p) {
		return filepath.Clean(p)
	}
	return filepath.Join(s.Dir, p)
}

func (s *Set) decodeCase(b *hcl.Block) (*Case, hcl.Diagnostics) {
	c := &Case{Name: b.Labels[0], Repeat: 1, Range: b.DefRange}
	var diags hcl.Diagnostics
	if !hclsyntax.ValidIdentifier(c.Name) {
		diags = append(diags, &hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  "Invalid case name",
			Detail:   "A case's name starts with a letter or underscore and holds letters, digits, underscores and dashes.",
			Subject:  b.LabelRanges[0].Ptr(),
		})
	}
	content, d := b.Body.Content(caseSchema)
	diags = append(diags, d...)
	if a, ok := content.Attributes["task"]; ok {
		var d hcl.Diagnostics
		c.Task, d = stringAttr(a)
		diags = append(diags, d...)
		if !d.HasErrors() {
			c.TaskPath = s.path(c.Task)
			diags = append(diags, fileExists(c.TaskPath, c.Task, "Cannot read task file", "task file", a.Expr.Range())...)
		}
	}
	if a, ok := content.Attributes["vars"]; ok {
		c.Vars, d = varsAttr(a)
		diags = append(diags, d...)
	}
	if a, ok := content.Attributes["repeat"]; ok {
		v, d := a.Expr.Value(nil)
		diags = append(diags, d...)
		if !d.HasErrors() {
			n, ok := wholeNumber(v)
			if !ok || n < 1 || n > maxRepeat {
				diags = append(diags, &hcl.Diagnostic{
					Severity: hcl.DiagError,
					Summary:  "Invalid repeat count",
					Detail:   fmt.Sprintf("repeat is how many times the case runs in each state: a whole number from 1 to %d.", maxRepeat),
					Subject:  a.Expr.Range().Ptr(),
				})
			} else {
				c.Repeat = n
			}
		}
	}
	if a, ok := content.Attributes["crash"]; ok {
		var d hcl.Diagnostics
		c.Crash, d = stringAttr(a)
		diags = append(diags, d...)
		if !d.HasErrors() && !validCrashPoint(c.Crash) {
			diags = append(diags, &hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  "Invalid crash point",
				Detail: fmt.Sprintf("crash is POINT or POINT@N (the Nth time the point is reached, N >= 1), POINT one of %s.",
					strings.Join(crashPoints(), ", ")),
				Subject: a.Expr.Range().Ptr(),
			})
		}
	}
	if a, ok := content.Attributes["model_replay"]; ok {
		var d hcl.Diagnostics
		c.ModelReplay, d = stringAttr(a)
		diags = append(diags, d...)
		if !d.HasErrors() {
			c.ModelReplayPath = s.path(c.ModelReplay)
			diags = append(diags, replayDir(c.ModelReplayPath, c.ModelReplay, a.Expr.Range())...)
		}
	}
	var verify *hcl.Block
	for _, vb := range content.Blocks {
		if verify != nil {
			diags = append(diags, &hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  "Duplicate verify block",
				Detail:   fmt.Sprintf("A case has one verify block; the first is at %s. Put every check in it.", verify.DefRange),
				Subject:  vb.DefRange.Ptr(),
			})
			continue
		}
		verify = vb
		diags = append(diags, s.decodeVerify(vb, &c.Verify)...)
	}
	if verify == nil {
		diags = append(diags, &hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  "Missing verify block",
			Detail:   "A case says how its run is judged: verify { expect = {...} }, output_includes, output_excludes or plugin.",
			Subject:  b.DefRange.Ptr(),
		})
	}
	if diags.HasErrors() {
		return nil, diags
	}
	return c, diags
}

func (s *Set) decodeVerify(b *hcl.Block, v *Verify) hcl.Diagnostics {
	content, diags := b.Body.Content(verifySchema)
	if len(content.Attributes) == 0 && !diags.HasErrors() {
		return hcl.Diagnostics{{
			Severity: hcl.DiagError,
			Summary:  "Empty verify",
			Detail:   "A verify block sets at least one check: expect, output_includes, output_excludes or plugin.",
			Subject:  b.DefRange.Ptr(),
		}}
	}
	if a, ok := content.Attributes["expect"]; ok {
		val, d := a.Expr.Value(nil)
		diags = append(diags, d...)
		if !d.HasErrors() {
			js, err := ctyjson.Marshal(val, val.Type())
			if err != nil {
				diags = append(diags, &hcl.Diagnostic{
					Severity: hcl.DiagError,
					Summary:  "Incorrect attribute value type",
					Detail:   fmt.Sprintf("expect must be a JSON value: %v.", err),
					Subject:  a.Expr.Range().Ptr(),
				})
			}
			v.Expect = js
		}
	}
	for name, dst := range map[string]*[]string{"output_includes": &v.Includes, "output_excludes": &v.Excludes} {
		a, ok := content.Attributes[name]
		if !ok {
			continue
		}
		list, rngs, d := stringList(a)
		diags = append(diags, d...)
		for i, x := range list {
			if x == "" {
				diags = append(diags, &hcl.Diagnostic{
					Severity: hcl.DiagError,
					Summary:  "Empty text",
					Detail:   "Every output is said to include the empty text: give the text to look for.",
					Subject:  rngs[i].Ptr(),
				})
			}
		}
		*dst = list
	}
	if a, ok := content.Attributes["plugin"]; ok {
		var d hcl.Diagnostics
		v.Plugin, d = stringAttr(a)
		diags = append(diags, d...)
		if !d.HasErrors() {
			v.PluginPath = s.path(v.Plugin)
			diags = append(diags, fileExists(v.PluginPath, v.Plugin, "Cannot read verifier plugin", "verifier plugin", a.Expr.Range())...)
		}
	}
	return diags
}

func fileExists(path, written, summary, what string, rng hcl.Range) hcl.Diagnostics {
	fi, err := os.Stat(path)
	if err == nil && fi.Mode().IsRegular() {
		return nil
	}
	why := "it is not a regular file"
	if err != nil {
		why = err.Error()
	}
	return hcl.Diagnostics{{
		Severity: hcl.DiagError,
		Summary:  summary,
		Detail:   fmt.Sprintf("The %s %s (relative to the eval set's directory) cannot be read: %s.", what, written, why),
		Subject:  rng.Ptr(),
	}}
}

// replayDir checks that a case's model_replay folder exists and holds
// recordings (*.json files, as --model-record writes them). The engine
// reads and checks each recording when the case's runs are submitted.
func replayDir(path, written string, rng hcl.Range) hcl.Diagnostics {
	entries, err := os.ReadDir(path)
	if err != nil {
		return hcl.Diagnostics{{
			Severity: hcl.DiagError,
			Summary:  "Cannot read replay set",
			Detail:   fmt.Sprintf("The model replay folder %s (relative to the eval set's directory) cannot be read: %v. Record it with --model-record.", written, err),
			Subject:  rng.Ptr(),
		}}
	}
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".json") && !strings.HasPrefix(e.Name(), ".") && e.Type().IsRegular() {
			return nil
		}
	}
	return hcl.Diagnostics{{
		Severity: hcl.DiagError,
		Summary:  "Empty replay set",
		Detail:   fmt.Sprintf("The model replay folder %s (relative to the eval set's directory) holds no recordings (<request sha256>.json files). Record them with --model-record.", written),
		Subject:  rng.Ptr(),
	}}
}

func stringAttr(a *hcl.Attribute) (string, hcl.Diagnostics) {
	v, diags := a.Expr.Value(nil)
	if diags.HasErrors() {
		return "", diags
	}
	if v.IsNull() || v.Type() != cty.String {
		return "", append(diags, &hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  "Incorrect attribute value type",
			Detail:   fmt.Sprintf("%s must be a string.", a.Name),
			Subject:  a.Expr.Range().Ptr(),
		})
	}
	return v.AsString(), diags
}

// stringList decodes a list of strings, with each element's range.
func stringList(a *hcl.Attribute) ([]string, []hcl.Range, hcl.Diagnostics) {
	bad := func() hcl.Diagnostics {
		return hcl.Diagnostics{{
			Severity: hcl.DiagError,
			Summary:  "Incorrect attribute value type",
			Detail:   fmt.Sprintf("%s must be a list of strings.", a.Name),
			Subject:  a.Expr.Range().Ptr(),
		}}
	}
	exprs, diags := hcl.ExprList(a.Expr)
	if diags.HasErrors() {
		return nil, nil, bad()
	}
	var out []string
	var rngs []hcl.Range
	for _, e := range exprs {
		v, d := e.Value(nil)
		diags = append(diags, d...)
		if d.HasErrors() {
			continue
		}
		if v.IsNull() || v.Type() != cty.String {
			diags = append(diags, &hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  "Incorrect attribute value type",
				Detail:   fmt.Sprintf("Every element of %s must be a string.", a.Name),
				Subject:  e.Range().Ptr(),
			})
			continue
		}
		out = append(out, v.AsString())
		rngs = append(rngs, e.Range())
	}
	return out, rngs, diags
}

// policyRefs decodes a list of NAME[@VERSION], each name once.
func policyRefs(a *hcl.Attribute, dupSummary string) ([]string, hcl.Diagnostics) {
	list, rngs, diags := stringList(a)
	var out []string
	seen := map[string]hcl.Range{}
	for i, ref := range list {
		if !engine.IsPolicyRef(ref) {
			diags = append(diags, &hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  "Invalid policy reference",
				Detail:   fmt.Sprintf("%q is not NAME or NAME@VERSION (a policy name, then optionally @ and a whole number of at least 1).", ref),
				Subject:  rngs[i].Ptr(),
			})
			continue
		}
		name, _, _ := strings.Cut(ref, "@")
		if prev, dup := seen[name]; dup {
			diags = append(diags, &hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  dupSummary,
				Detail:   fmt.Sprintf("Policy %q is already named at %s; name each policy once.", name, prev),
				Subject:  rngs[i].Ptr(),
			})
			continue
		}
		seen[name] = rngs[i]
		out = append(out, ref)
	}
	return out, diags
}

// varsAttr decodes a case's vars: an object whose values become raw
// --var values (a string as it is, anything else as its JSON text, which
// the task language reads as an HCL literal).
func varsAttr(a *hcl.Attribute) (map[string]string, hcl.Diagnostics) {
	pairs, diags := hcl.ExprMap(a.Expr)
	if diags.HasErrors() {
		return nil, hcl.Diagnostics{{
			Severity: hcl.DiagError,
			Summary:  "Incorrect attribute value type",
			Detail:   "vars must be an object: { name = value, ... }.",
			Subject:  a.Expr.Range().Ptr(),
		}}
	}
	out := map[string]string{}
	for _, p := range pairs {
		k, d := p.Key.Value(nil)
		diags = append(diags, d...)
		if d.HasErrors() {
			continue
		}
		if k.IsNull() || k.Type() != cty.String || !hclsyntax.ValidIdentifier(k.AsString()) {
			diags = append(diags, &hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  "Invalid variable name",
				Detail:   "A variable name starts with a letter or underscore and holds letters, digits, underscores and dashes.",
				Subject:  p.Key.Range().Ptr(),
			})
			continue
		}
		name := k.AsString()
		if _, dup := out[name]; dup {
			diags = append(diags, &hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  "Duplicate variable",
				Detail:   fmt.Sprintf("Variable %q is given twice.", name),
				Subject:  p.Key.Range().Ptr(),
			})
			continue
		}
		v, d := p.Value.Value(nil)
		diags = append(diags, d...)
		if d.HasErrors() {
			continue
		}
		if !v.IsNull() && v.Type() == cty.String {
			out[name] = v.AsString()
			continue
		}
		js, err := ctyjson.Marshal(v, v.Type())
		if err != nil {
			diags = append(diags, &hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  "Incorrect attribute value type",
				Detail:   fmt.Sprintf("The value of %q must be a constant: %v.", name, err),
				Subject:  p.Value.Range().Ptr(),
			})
			continue
		}
		out[name] = string(js)
	}
	return out, diags
}

func wholeNumber(v cty.Value) (int, bool) {
	if v.IsNull() || v.Type() != cty.Number {
		return 0, false
	}
	bf := v.AsBigFloat()
	if !bf.IsInt() {
		return 0, false
	}
	i, acc := bf.Int64()
	if acc != 0 || i < -1<<31 || i > 1<<31-1 {
		return 0, false
	}
	return int(i), true
}

// crashPoints are the points a case may crash at.
func crashPoints() []string {
	return append(slices.Clone(crashpoint.Points), crashpoint.ModelAfterRecord)
}

func validCrashPoint(s string) bool {
	name, n, hasN := strings.Cut(s, "@")
	if !slices.Contains(crashPoints(), name) {
		return false
	}
	if hasN {
		k, err := strconv.Atoi(n)
		return err == nil && k >= 1
	}
	return true
}

// checkSource refuses, before the HCL parser sees it, a file too large, one
// nested too deeply (the parser recurses on nesting) and a number literal
// too long to write out again.
func checkSource(filename string, src []byte) hcl.Diagnostics {
	at := func(tok hclsyntax.Token) *hcl.Range { return tok.Range.Ptr() }
	if len(src) > MaxSetBytes {
		pos := hcl.InitialPos
		return hcl.Diagnostics{{
			Severity: hcl.DiagError,
			Summary:  "Eval set too large",
			Detail:   fmt.Sprintf("The eval set file is %d bytes; the limit is %d.", len(src), MaxSetBytes),
			Subject:  &hcl.Range{Filename: filename, Start: pos, End: pos},
		}}
	}
	tokens, _ := hclsyntax.LexConfig(src, filename, hcl.InitialPos)
	depth := 0
	for _, tok := range tokens {
		switch tok.Type {
		case hclsyntax.TokenOBrace, hclsyntax.TokenOBrack, hclsyntax.TokenOParen,
			hclsyntax.TokenTemplateInterp, hclsyntax.TokenTemplateControl, hclsyntax.TokenOQuote, hclsyntax.TokenOHeredoc:
			depth++
		case hclsyntax.TokenCBrace, hclsyntax.TokenCBrack, hclsyntax.TokenCParen,
			hclsyntax.TokenTemplateSeqEnd, hclsyntax.TokenCQuote, hclsyntax.TokenCHeredoc:
			depth--
		case hclsyntax.TokenNumberLit:
			if numberTooLong(tok.Bytes) {
				return hcl.Diagnostics{{
					Severity: hcl.DiagError,
					Summary:  "Number too large",
					Detail:   fmt.Sprintf("A number literal in an eval set is at most %d characters long, with an exponent below 1000.", maxNumberLength),
					Subject:  at(tok),
				}}
			}
		}
		if depth > MaxNestingDepth {
			return hcl.Diagnostics{{
				Severity: hcl.DiagError,
				Summary:  "Nesting too deep",
				Detail:   fmt.Sprintf("An eval set nests brackets, braces and templates at most %d levels deep.", MaxNestingDepth),
				Subject:  at(tok),
			}}
		}
	}
	if unaryRun(tokens) > MaxNestingDepth {
		return hcl.Diagnostics{{
			Severity: hcl.DiagError,
			Summary:  "Nesting too deep",
			Detail:   fmt.Sprintf("An eval set chains at most %d operators.", MaxNestingDepth),
			Subject:  &hcl.Range{Filename: filename, Start: hcl.InitialPos, End: hcl.InitialPos},
		}}
	}
	if !utf8.Valid(src) {
		return hcl.Diagnostics{{
			Severity: hcl.DiagError,
			Summary:  "Invalid character encoding",
			Detail:   "An eval set file is UTF-8 text.",
			Subject:  &hcl.Range{Filename: filename, Start: hcl.InitialPos, End: hcl.InitialPos},
		}}
	}
	return nil
}

// unaryRun returns the most operator tokens found in one expression
// statement (between newlines at brace level), a bound on how deep the
// parser recurses through operators.
func unaryRun(tokens hclsyntax.Tokens) int {
	most, n := 0, 0
	for _, tok := range tokens {
		switch tok.Type {
		case hclsyntax.TokenNewline, hclsyntax.TokenComma, hclsyntax.TokenOBrace, hclsyntax.TokenCBrace:
			n = 0
		case hclsyntax.TokenMinus, hclsyntax.TokenBang, hclsyntax.TokenPlus, hclsyntax.TokenStar,
			hclsyntax.TokenSlash, hclsyntax.TokenPercent, hclsyntax.TokenAnd, hclsyntax.TokenOr,
			hclsyntax.TokenEqualOp, hclsyntax.TokenNotEqual, hclsyntax.TokenLessThan, hclsyntax.TokenLessThanEq,
			hclsyntax.TokenGreaterThan, hclsyntax.TokenGreaterThanEq, hclsyntax.TokenQuestion:
			n++
			most = max(most, n)
		}
	}
	return most
}

func numberTooLong(b []byte) bool {
	if len(b) > maxNumberLength {
		return true
	}
	if i := bytes.IndexAny(b, "eE"); i >= 0 {
		exp := strings.TrimLeft(string(b[i+1:]), "+-")
		n, err := strconv.Atoi(exp)
		return err != nil || n >= 1000
	}
	return false
}

// WriteDiagnostics renders diags as the task file's are rendered: a line
// "file:line:col: severity: summary", then a source excerpt and the detail.
// files maps a filename to its source.
func WriteDiagnostics(w io.Writer, files map[string][]byte, diags hcl.Diagnostics) error {
	return hcldiag.Write(w, files, diags, 0, false, func(name string, src []byte) bool { return !checkSource(name, src).HasErrors() })
}
