package policylang

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/stretchr/testify/require"
	"github.com/zclconf/go-cty/cty"

	"github.com/lhengine/lhengine/engine/internal/jsonval"
	"github.com/lhengine/lhengine/engine/internal/taskfile"
	"github.com/lhengine/lhengine/internal/testhcl"
)

// policyTestdata is the repository's testdata/policies directory.
const policyTestdata = "../../../testdata/policies"

func renderText(t *testing.T, filename string, src []byte, diags hcl.Diagnostics) string {
	t.Helper()
	var buf bytes.Buffer
	require.NoError(t, taskfile.WriteDiagnostics(&buf, map[string][]byte{filename: src}, diags, 80, false))
	return buf.String()
}

// TestPolicyErrorFixtures parses every testdata/policies/errors/*.hcl: each
// error must start on a line marked "# ERROR: <summary>" ("|" between
// several on one line), every marker must be matched, and the rendered
// diagnostics carry file:line:col.
func TestPolicyErrorFixtures(t *testing.T) {
	t.Parallel()
	testhcl.EachFixture(t, filepath.Join(policyTestdata, "errors"), 4, func(t *testing.T, f testhcl.Fixture) {
		display := "policies/" + f.Name
		_, diags := ParsePolicies(display, f.Src)
		rendered := renderText(t, display, f.Src, diags)
		require.ElementsMatch(t, f.Want, testhcl.Errors(t, display, diags), "diagnostics:\n%s", rendered)
		require.Regexp(t, `(?m)^policies/`+regexp.QuoteMeta(f.Name)+`:\d+:\d+: error: `, rendered)
	})
}

// TestPolicyLibrary parses the repository's policies/ library: every file
// is free of mistakes and every policy states its assumption and evidence.
func TestPolicyLibrary(t *testing.T) {
	t.Parallel()
	paths, err := filepath.Glob("../../../policies/*.hcl")
	require.NoError(t, err)
	names := map[string][]int{}
	for _, path := range paths {
		src, err := os.ReadFile(path)
		require.NoError(t, err)
		ps, diags := ParsePolicies(path, src)
		require.False(t, diags.HasErrors(), "%s: %s", path, diags.Error())
		require.Empty(t, diags)
		for _, p := range ps {
			require.NotEmpty(t, strings.TrimSpace(p.Assumption), p.Ref())
			require.NotEmpty(t, strings.TrimSpace(p.Evidence.Text), p.Ref())
			require.True(t, len(p.Inserts) > 0 || len(p.Params) > 0 || len(p.Overrides) > 0, "%s does nothing", p.Ref())
			names[p.Name] = append(names[p.Name], p.Version)
		}
	}
	for _, want := range []string{"critic-after-draft", "periodic-summary", "single-tool-at-a-time", "context-reset-every-n", "plan-before-execute"} {
		require.Contains(t, names, want)
	}
	require.Equal(t, []int{1, 2}, names["critic-after-draft"], "both versions stay loadable")
}

// TestPinnedPolicyRoundTrip reads each policy back from its pinned text
// alone: the same sha256, and positions that are the file's.
func TestPinnedPolicyRoundTrip(t *testing.T) {
	t.Parallel()
	src := []byte("# two versions\n\npolicy \"p\" {\n  version    = 1\n  assumption = \"a\"\n  evidence {\n    text = \"e\"\n  }\n  params = { x = 1 }\n}\n\npolicy \"p\" {\n  version    = 2\n  assumption = \"a\"\n  evidence {\n    text = \"e\"\n  }\n  insert \"i\" {\n    after  = \"*\"\n    plugin = \"p.wasm\"\n    input  = var.missing\n  }\n}\n")
	ps, diags := ParsePolicies("lib/p.hcl", src)
	require.Empty(t, diags)
	require.Len(t, ps, 2)
	require.Equal(t, 3, ps[0].Start.Line)
	require.Equal(t, 12, ps[1].Start.Line)
	require.True(t, strings.HasPrefix(string(ps[1].Text), `policy "p" {`))
	require.True(t, strings.HasSuffix(string(ps[1].Text), "}"))
	for _, p := range ps {
		back, diags := ParsePinnedPolicy(p.Filename, p.Text, p.Start)
		require.Empty(t, diags)
		require.Equal(t, p.SHA256, back.SHA256)
		require.Equal(t, p.Ref(), back.Ref())
	}
	// Adding a version to the file changes neither hash.
	more := append(append([]byte{}, src...), []byte("\npolicy \"p\" {\n  version    = 3\n  assumption = \"a\"\n  evidence {\n    text = \"e\"\n  }\n}\n")...)
	ps3, diags := ParsePolicies("lib/p.hcl", more)
	require.Empty(t, diags)
	require.Equal(t, ps[0].SHA256, ps3[0].SHA256)
	require.Equal(t, ps[1].SHA256, ps3[1].SHA256)

	// A mistake found when the pinned text is applied points at the file's
	// line, not the text's.
	back, _ := ParsePinnedPolicy(ps[1].Filename, ps[1].Text, ps[1].Start)
	task := parseTask(t, "task \"t\" {\n  step \"a\" {\n    plugin = \"a.wasm\"\n  }\n}\n")
	_, diags = ApplyPolicies(task, []*Policy{back}, false)
	require.True(t, diags.HasErrors())
	require.Equal(t, "Reference to undeclared variable", diags.Errs()[0].(*hcl.Diagnostic).Summary)
	require.Equal(t, "lib/p.hcl", diags.Errs()[0].(*hcl.Diagnostic).Subject.Filename)
	require.Equal(t, 21, diags.Errs()[0].(*hcl.Diagnostic).Subject.Start.Line)
}

func parseTask(t *testing.T, src string) *taskfile.Task {
	t.Helper()
	task, diags := taskfile.Parse("task.hcl", []byte(src), taskfile.Options{})
	require.False(t, diags.HasErrors(), diags.Error())
	return task
}

func parsePolicy(t *testing.T, src string) *Policy {
	t.Helper()
	ps, diags := ParsePolicies("policies/test.hcl", []byte(src))
	require.False(t, diags.HasErrors(), diags.Error())
	require.Len(t, ps, 1)
	return ps[0]
}

func stepNamesOf(task *taskfile.Task) []string {
	out := make([]string, len(task.Steps))
	for i, s := range task.Steps {
		out[i] = s.Name
	}
	return out
}

const threeSteps = `
task "t" {
  variable "topic" {
    default = "x"
  }
  step "draft1" {
    plugin = "a.wasm"
    input  = { topic = var.topic }
  }
  step "review" {
    plugin = "a.wasm"
    input  = step.draft1.output
    repair {
      restart_from = "draft1"
    }
  }
  step "draft2" {
    plugin = "a.wasm"
    input  = step.review.output
  }
}
`

// TestInsertAnchors inserts steps after and before every step matching a
// glob: the order, the derived names, anchor outputs in inputs, restart_from
// "anchor", and the indexes that repairs use.
func TestInsertAnchors(t *testing.T) {
	t.Parallel()
	task := parseTask(t, threeSteps)
	after := parsePolicy(t, `
policy "critic" {
  version    = 2
  assumption = "a"
  evidence {
    text = "e"
  }
  insert "check" {
    after  = "draft*"
    plugin = "../critic.wasm"
    input  = { draft = step.anchor.output, topic = var.topic, n = length(step.anchor.output) }
    repair {
      restart_from = "anchor"
      max          = 2
    }
  }
}`)
	before := parsePolicy(t, `
policy "plan" {
  version    = 1
  assumption = "a"
  evidence {
    text = "e"
  }
  insert "plan" {
    before = "draft*"
    plugin = "plan.wasm"
    input  = { task = task.name }
  }
}`)
	out, diags := ApplyPolicies(task, []*Policy{after, before}, false)
	require.Empty(t, diags)
	require.Equal(t, []string{
		"plan.plan@draft1", "draft1", "critic.check@draft1", "review",
		"plan.plan@draft2", "draft2", "critic.check@draft2",
	}, stepNamesOf(out))
	require.Equal(t, []string{"draft1", "review", "draft2"}, stepNamesOf(task), "the task given is not changed")
	for i, s := range out.Steps {
		require.Equal(t, i, s.Index)
		require.Equal(t, []string{"critic@2", "plan@1"}, s.Policies)
	}

	critic := out.Steps[6]
	require.Equal(t, []string{"draft2"}, critic.References())
	require.Equal(t, filepath.Clean("critic.wasm"), critic.PluginPath, "plugin paths are relative to the policy file")
	require.Equal(t, "draft2", critic.Repair.RestartFrom)
	require.Equal(t, 5, critic.Repair.RestartIndex)
	require.Equal(t, 2, critic.Repair.Max)
	require.Equal(t, 1, out.Steps[3].Repair.RestartIndex, "review still restarts from draft1, now at index 1")
	require.Equal(t, 0, task.Steps[1].Repair.RestartIndex)

	v, d := critic.EvalInput(taskfile.Scope{TaskID: "id", Vars: map[string]cty.Value{"topic": cty.StringVal("y")},
		Outputs: map[string]cty.Value{"draft2": cty.StringVal("text")}})
	require.Empty(t, d)
	b, err := jsonval.ToJSON(v)
	require.NoError(t, err)
	require.JSONEq(t, `{"draft":"text","topic":"y","n":4}`, string(b))

	v, d = out.Steps[0].EvalInput(taskfile.Scope{TaskID: "id"})
	require.Empty(t, d)
	b, _ = jsonval.ToJSON(v)
	require.JSONEq(t, `{"task":"t"}`, string(b))
}

// TestInsertReferenceMistakes reports, in the policy file, what an inserted
// step reads that the task cannot give it.
func TestInsertReferenceMistakes(t *testing.T) {
	t.Parallel()
	task := parseTask(t, threeSteps)
	p := parsePolicy(t, `
policy "bad" {
  version    = 1
  assumption = "a"
  evidence {
    text = "e"
  }
  insert "early" {
    before = "review"
    plugin = "x.wasm"
    input  = step.anchor.output
  }
  insert "vars" {
    after  = "draft2"
    plugin = "x.wasm"
    input  = var.nope
    repair {
      restart_from = "nowhere"
    }
  }
  insert "none" {
    after  = "zzz*"
    plugin = "x.wasm"
  }
}`)
	_, diags := ApplyPolicies(task, []*Policy{p}, false)
	var got []string
	for _, d := range diags {
		require.Equal(t, "policies/test.hcl", d.Subject.Filename)
		got = append(got, d.Summary+"@"+strings.TrimSpace(strings.Split(string(p.Text), "\n")[d.Subject.Start.Line-2]))
	}
	sort.Strings(got)
	require.Equal(t, []string{
		"Insert matches no step@after  = \"zzz*\"",
		"Reference to a later step@input  = step.anchor.output",
		"Reference to undeclared step@restart_from = \"nowhere\"",
		"Reference to undeclared variable@input  = var.nope",
	}, got)
}

// TestPolicyParams hands parameters to the steps each policy matches, and
// reports a parameter two policies set for one step, naming both.
func TestPolicyParams(t *testing.T) {
	t.Parallel()
	task := parseTask(t, threeSteps)
	mk := func(name, steps, params string) *Policy {
		return parsePolicy(t, `
policy "`+name+`" {
  version    = 1
  assumption = "a"
  evidence {
    text = "e"
  }
  steps  = "`+steps+`"
  params = `+params+`
}`)
	}
	single := mk("single-tool", "*", `{ single_tool = true }`)
	fewShot := mk("few-shot", "draft*", `{ few_shot = "examples/v2", n = 3 }`)
	out, diags := ApplyPolicies(task, []*Policy{single, fewShot}, false)
	require.Empty(t, diags)
	require.JSONEq(t, `{"single_tool":true,"few_shot":"examples/v2","n":3}`, string(out.Steps[0].Params))
	require.JSONEq(t, `{"single_tool":true}`, string(out.Steps[1].Params))
	require.Nil(t, task.Steps[0].Params)

	// Disjoint patterns setting one key are no conflict.
	reviewOnly := mk("review-shots", "review", `{ few_shot = "examples/review" }`)
	out, diags = ApplyPolicies(task, []*Policy{fewShot, reviewOnly}, false)
	require.Empty(t, diags)
	require.JSONEq(t, `{"few_shot":"examples/review"}`, string(out.Steps[1].Params))

	// Overlapping ones are, once per pair and key, on the second's value.
	other := mk("other-shots", "*", `{ few_shot = "examples/v3" }`)
	_, diags = ApplyPolicies(task, []*Policy{fewShot, other}, false)
	require.Len(t, diags, 1)
	require.Equal(t, "Conflicting policy parameter", diags[0].Summary)
	require.Contains(t, diags[0].Detail, "few-shot@1")
	require.Contains(t, diags[0].Detail, "other-shots@1")
	require.Contains(t, diags[0].Detail, `"few_shot"`)
	require.Equal(t, 9, diags[0].Subject.Start.Line)
}

// TestPolicyOverrides changes limits of matching steps and reports a field
// two policies override for one step.
func TestPolicyOverrides(t *testing.T) {
	t.Parallel()
	task := parseTask(t, threeSteps)
	mk := func(name, body string) *Policy {
		return parsePolicy(t, `
policy "`+name+`" {
  version    = 1
  assumption = "a"
  evidence {
    text = "e"
  }
  `+body+`
}`)
	}
	patient := mk("patient", `override {
    steps    = "draft*"
    attempts = 3
    backoff  = "2s"
    timeout  = "5m"
    memory   = "128MiB"
  }
  override {
    steps      = "review"
    repair_max = 4
    host_calls = 50
  }`)
	out, diags := ApplyPolicies(task, []*Policy{patient}, false)
	require.Empty(t, diags)
	d1 := out.Steps[0]
	require.Equal(t, 3, d1.Retry.Attempts)
	require.Equal(t, 2*time.Second, d1.Retry.Backoff)
	require.Equal(t, 5*time.Minute, d1.Timeout)
	require.Equal(t, uint64(128<<20), d1.Memory)
	require.Equal(t, 4, out.Steps[1].Repair.Max)
	require.Equal(t, 50, out.Steps[1].HostCalls)
	require.Equal(t, taskfile.DefaultTimeout, out.Steps[1].Timeout)
	require.Equal(t, 1, task.Steps[1].Repair.Max, "the task given is not changed")
	require.Equal(t, taskfile.DefaultTimeout, task.Steps[0].Timeout)

	hasty := mk("hasty", `override {
    steps   = "draft2"
    timeout = "1s"
  }`)
	_, diags = ApplyPolicies(task, []*Policy{patient, hasty}, false)
	require.Len(t, diags, 1)
	require.Equal(t, "Conflicting policy override", diags[0].Summary)
	require.Contains(t, diags[0].Detail, "patient@1 and hasty@1")
	require.Contains(t, diags[0].Detail, `timeout of step "draft2"`)
}

func FuzzParsePolicies(f *testing.F) {
	paths, _ := filepath.Glob(filepath.Join(policyTestdata, "errors", "*.hcl"))
	lib, _ := filepath.Glob("../../../policies/*.hcl")
	for _, path := range append(paths, lib...) {
		src, err := os.ReadFile(path)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(src)
	}
	task, diags := taskfile.Parse("task.hcl", []byte(threeSteps), taskfile.Options{})
	if diags.HasErrors() {
		f.Fatal(diags)
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		ps, diags := ParsePolicies("fuzz.hcl", src)
		for _, d := range diags {
			if d.Summary == "Internal error while parsing the policy file" {
				t.Fatalf("parser bug: %s", d.Detail)
			}
		}
		if diags.HasErrors() && len(ps) > 0 {
			for _, p := range ps {
				if p.SHA256 == "" {
					t.Fatal("a policy without its hash")
				}
			}
		}
		for _, p := range ps {
			back, d := ParsePinnedPolicy(p.Filename, p.Text, p.Start)
			if d.HasErrors() || back.SHA256 != p.SHA256 {
				t.Fatalf("pinned text of %s does not read back: %v", p.Ref(), d)
			}
		}
		_, _ = ApplyPolicies(task, ps, false)
	})
}

// TestInsertEvery inserts window steps: right after their anchor, before
// the steps inserted after it, counted on the anchor; each and the anchor's
// output in their input; and no repair may restart from one.
func TestInsertEvery(t *testing.T) {
	t.Parallel()
	task := parseTask(t, `
task "t" {
  step "list" {
    plugin = "a.wasm"
  }
  step "fetch" {
    plugin   = "a.wasm"
    for_each = step.list.output
    input    = each.value
  }
}`)
	summary := parsePolicy(t, `
policy "summary" {
  version    = 1
  assumption = "a"
  evidence {
    text = "e"
  }
  insert "check" {
    after  = "fetch"
    plugin = "c.wasm"
    input  = length(step.anchor.output)
  }
  insert "sum" {
    after  = "f*"
    every  = 50
    plugin = "s.wasm"
    input  = { n = each.key, from = each.value.from, first = each.value.items[0], outputs = step.anchor.output }
    repair {
      restart_from = "anchor"
    }
  }
}`)
	out, diags := ApplyPolicies(task, []*Policy{summary}, false)
	require.Empty(t, diags)
	require.Equal(t, []string{"list", "fetch", "summary.sum@fetch", "summary.check@fetch"}, stepNamesOf(out))
	sum := out.Steps[2]
	require.Equal(t, 50, sum.Every)
	require.Equal(t, "fetch", sum.Anchor)
	require.Equal(t, 1, out.Steps[1].Windows)
	require.Equal(t, 1, sum.Repair.RestartIndex, "restart_from = \"anchor\" is the anchor")
	require.Equal(t, []string{"fetch"}, sum.InputReferences())

	v, d := sum.EvalInput(taskfile.Scope{TaskID: "id",
		Outputs: map[string]cty.Value{"fetch": cty.TupleVal([]cty.Value{cty.StringVal("a"), cty.StringVal("b")})},
		Each: &taskfile.Each{Key: cty.NumberIntVal(1), Value: cty.ObjectVal(map[string]cty.Value{
			"from": cty.NumberIntVal(50), "to": cty.NumberIntVal(52),
			"items": cty.ListVal([]cty.Value{cty.NumberIntVal(7), cty.NumberIntVal(3)}),
		})}})
	require.Empty(t, d)
	b, err := jsonval.ToJSON(v)
	require.NoError(t, err)
	require.JSONEq(t, `{"n":1,"from":50,"first":7,"outputs":["a","b"]}`, string(b))

	bad := parsePolicy(t, `
policy "bad" {
  version    = 1
  assumption = "a"
  evidence {
    text = "e"
  }
  insert "sum" {
    after  = "fetch"
    every  = 2
    plugin = "s.wasm"
    input  = each.value.nope
  }
  insert "again" {
    after  = "fetch"
    plugin = "c.wasm"
    repair {
      restart_from = "bad.sum@fetch"
    }
  }
}`)
	_, diags = ApplyPolicies(task, []*Policy{bad}, false)
	var got []string
	for _, d := range diags {
		got = append(got, d.Summary)
	}
	sort.Strings(got)
	require.Equal(t, []string{"Invalid repair target", "Unsupported attribute"}, got)
}
