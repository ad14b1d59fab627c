package engine_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lhengine/lhengine/engine"
	"github.com/lhengine/lhengine/internal/testpolicy"
	"github.com/lhengine/lhengine/internal/testwasm"
	"github.com/lhengine/lhengine/ledger"
)

func writeFile(t *testing.T, path, text string) {
	t.Helper()
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
	require.NoError(t, os.WriteFile(path, []byte(text), 0o644))
}

// toolPolicies writes the library's single-tool-at-a-time and
// context-reset-every-n into the bundle's policies folder.
func (b *testBundle) toolPolicies(t *testing.T) {
	t.Helper()
	writeFile(t, filepath.Join(b.dir, "policies", "single.hcl"), library(t, "single-tool-at-a-time", nil))
	writeFile(t, filepath.Join(b.dir, "policies", "reset.hcl"), library(t, "context-reset-every-n", nil))
}

// library returns a policy file of the repository's policies/ library with
// its plugin paths pointed at modules in the test's folder.
func library(t *testing.T, name string, plugins map[string]string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(testwasm.ModuleRoot(t), "policies", name+".hcl"))
	require.NoError(t, err)
	text := string(b)
	for from, to := range plugins {
		require.Contains(t, text, from)
		text = strings.ReplaceAll(text, from, to)
	}
	return text
}

// TestPolicyParamsReachCPlugin hands the parameters of the library's
// params-only policies to a C plugin, which reads them with lhengine.h.
func TestPolicyParamsReachCPlugin(t *testing.T) {
	t.Parallel()
	b := setup(t, `
task "params" {
  policies = ["single-tool-at-a-time", "context-reset-every-n@1"]
  step "c" {
    plugin = "policy.wasm"
  }
  step "plain" {
    plugin = "step.wasm"
    input  = { mode = "echo" }
  }
}`)
	testwasm.Copy(t, testwasm.CGuest(t, "policy"), filepath.Join(b.dir, "policy.wasm"))
	b.toolPolicies(t)
	writeFile(t, filepath.Join(b.dir, "policies", "shots.hcl"), `
policy "few-shot" {
  version    = 1
  assumption = "Examples in the prompt help this model follow the output format."
  evidence {
    text = "None: a test fixture."
  }
  steps  = "c"
  params = { few_shot = "examples/v2" }
}`)

	task := b.submit(t, nil)
	task = b.work(t, task.ID)
	require.Equal(t, ledger.Succeeded, task.Status, task.Reason)
	require.JSONEq(t, `{"single_tool":true,"few_shot":null,"reset_every":20,"markers":null}`, b.output(t, task.ID, "c"))

	// --policy adds one the task does not list; --without drops one.
	got, created, err := b.e.Submit(b.ctx, filepath.Join(b.dir, "task.hcl"), engine.SubmitOptions{
		Policies: []string{"few-shot"}, Without: []string{"single-tool-at-a-time"},
	})
	require.NoError(t, err)
	require.True(t, created)
	got = b.work(t, got.ID)
	require.Equal(t, ledger.Succeeded, got.Status, got.Reason)
	require.JSONEq(t, `{"single_tool":false,"few_shot":"examples/v2","reset_every":20,"markers":null}`, b.output(t, got.ID, "c"))

	// Two enabled policies setting one parameter of one step are an error
	// naming both; nothing is submitted.
	writeFile(t, filepath.Join(b.dir, "policies", "reset-fast.hcl"), `
policy "reset-fast" {
  version    = 1
  assumption = "This model degrades sooner."
  evidence {
    text = "None: a test fixture."
  }
  params = { context_reset_every = 5 }
}`)
	_, _, err = b.e.Submit(b.ctx, filepath.Join(b.dir, "task.hcl"), engine.SubmitOptions{Policies: []string{"reset-fast"}})
	var inv *engine.InvalidTaskError
	require.ErrorAs(t, err, &inv)
	list := inv.Diagnostics.List()
	require.Len(t, list, 1)
	require.Equal(t, "Conflicting policy parameter", list[0].Summary)
	require.Contains(t, list[0].Detail, "context-reset-every-n@1 and reset-fast@1")
	require.Contains(t, list[0].Range, "reset-fast.hcl:8,")
}

// TestCriticAfterDraft runs the library's critic-after-draft policy with the
// critic example's Go plugins: without it the planted TODO reaches the end;
// with version 1 the inserted critic sends the task back to the draft; with
// version 2 the critic also gets its markers through the policy parameters.
func TestCriticAfterDraft(t *testing.T) {
	t.Parallel()
	b := setup(t, `
task "report" {
  step "draft" {
    plugin = "draft.wasm"
    input  = { topic = "ledgers" }
  }
  step "publish" {
    plugin = "step.wasm"
    input  = { mode = "echo", text = step.draft.output.sections[2].body }
  }
}`)
	root := testwasm.ModuleRoot(t)
	testwasm.Copy(t, testwasm.BuildGo(t, filepath.Join(root, "plugins/examples/critic/draft")), filepath.Join(b.dir, "draft.wasm"))
	testwasm.Copy(t, testwasm.BuildGo(t, filepath.Join(root, "plugins/examples/critic/critic")), filepath.Join(b.dir, "critic.wasm"))
	writeFile(t, filepath.Join(b.dir, "policies", "critic-after-draft.hcl"),
		library(t, "critic-after-draft", map[string]string{"../plugins/examples/critic/critic.wasm": "../critic.wasm"}))

	plain := b.work(t, b.submit(t, nil).ID)
	require.Equal(t, ledger.Succeeded, plain.Status)
	require.Contains(t, b.output(t, plain.ID, "publish"), "TODO", "without the policy the defect ships")
	require.Len(t, plain.Steps, 2)

	for _, tc := range []struct {
		ref     string
		markers int
	}{{"critic-after-draft@1", 4}, {"critic-after-draft", 6}} {
		task, _, err := b.e.Submit(b.ctx, filepath.Join(b.dir, "task.hcl"), engine.SubmitOptions{Policies: []string{tc.ref}})
		require.NoError(t, err)
		task = b.work(t, task.ID)
		require.Equal(t, ledger.Succeeded, task.Status, task.Reason)
		require.Equal(t, []string{"draft", "critic-after-draft.critic@draft", "publish"}, []string{task.Steps[0].Name, task.Steps[1].Name, task.Steps[2].Name})
		require.Equal(t, 1, task.Repairs)
		require.Contains(t, task.RepairReason, `"TODO"`)
		require.NotContains(t, b.output(t, task.ID, "publish"), "TODO")
		var verdict struct {
			OK      bool     `json:"ok"`
			Markers []string `json:"markers"`
		}
		require.NoError(t, json.Unmarshal([]byte(b.output(t, task.ID, "critic-after-draft.critic@draft")), &verdict))
		require.True(t, verdict.OK)
		require.Len(t, verdict.Markers, tc.markers, tc.ref)
	}
}

// TestPolicyEditNeverChangesSubmittedTask edits a policy file between two
// submissions: the second task runs the new text, the first the text pinned
// in its manifest, also after the engine is reopened (a fresh spec cache).
func TestPolicyEditNeverChangesSubmittedTask(t *testing.T) {
	t.Parallel()
	b := setup(t, `
task "pinned" {
  policies = ["mark"]
  step "a" {
    plugin = "step.wasm"
    input  = { mode = "echo", n = 1 }
  }
}`)
	policy := func(text string) string {
		return testpolicy.Insert("mark", `    after  = "a"
    plugin = "../step.wasm"
    input  = { mode = "echo", mark = "`+text+`", from = step.anchor.output }`)
	}
	path := filepath.Join(b.dir, "policies", "mark.hcl")
	writeFile(t, path, policy("old"))
	first := b.submit(t, nil)

	writeFile(t, path, policy("new"))
	second := b.submit(t, nil)
	require.NoError(t, os.Remove(path))

	b.reopen(t)
	first, second = b.work(t, first.ID), b.work(t, second.ID)
	require.Equal(t, ledger.Succeeded, first.Status, first.Reason)
	require.Equal(t, ledger.Succeeded, second.Status, second.Reason)
	require.JSONEq(t, `{"mode":"echo","mark":"old","from":{"mode":"echo","n":1}}`, string(first.Output))
	require.JSONEq(t, `{"mode":"echo","mark":"new","from":{"mode":"echo","n":1}}`, string(second.Output))

	var m1, m2 *ledger.Manifest
	require.NoError(t, b.e.Read(func(r ledger.Reader) error {
		var err error
		if m1, err = r.Manifest(first.ID); err != nil {
			return err
		}
		m2, err = r.Manifest(second.ID)
		return err
	}))
	require.Len(t, m1.Policies, 1)
	require.Equal(t, "mark@1", m1.Policies[0].Ref())
	require.Contains(t, m1.Policies[0].Text, `mark = "old"`)
	require.Contains(t, m2.Policies[0].Text, `mark = "new"`)
	require.NotEqual(t, m1.Policies[0].SHA256, m2.Policies[0].SHA256)
	require.Equal(t, 2, m1.Policies[0].Line)
	require.Contains(t, m1.Plugins, "mark.mark@a")
}

// TestArtifactProvenanceListsPolicies records the run's policy versions in
// the provenance of an artifact a plugin stores.
func TestArtifactProvenanceListsPolicies(t *testing.T) {
	t.Parallel()
	b := setup(t, `
task "art" {
  policies = ["single-tool-at-a-time@1", "context-reset-every-n"]
  step "put" {
    plugin = "caps.wasm"
    input  = { mode = "artifact" }
  }
}`)
	testwasm.Copy(t, testwasm.CGuest(t, "caps"), filepath.Join(b.dir, "caps.wasm"))
	b.toolPolicies(t)
	task := b.work(t, b.submit(t, nil).ID)
	require.Equal(t, ledger.Succeeded, task.Status, task.Reason)
	var arts []ledger.Provenance
	require.NoError(t, b.e.Read(func(r ledger.Reader) error {
		var err error
		arts, err = r.Artifacts(task.ID)
		return err
	}))
	require.NotEmpty(t, arts)
	for _, a := range arts {
		require.Equal(t, []string{"single-tool-at-a-time@1", "context-reset-every-n@1"}, a.Policies)
	}
}

// TestPlanBeforeExecuteSeesObjectiveAndConstraints: version 2 of the
// library's plan-before-execute hands the planner the task's objective and
// constraints, verbatim, and its plan (a protected decision) names them;
// version 1's plan could not.
func TestPlanBeforeExecuteSeesObjectiveAndConstraints(t *testing.T) {
	t.Parallel()
	b := setup(t, `
task "report" {
  objective   = "Write a short report on ledgers"
  constraints = ["cite no source you did not read", "never publish"]
  step "draft" {
    plugin = "step.wasm"
    input  = { mode = "echo", n = 1 }
  }
}`)
	root := testwasm.ModuleRoot(t)
	testwasm.Copy(t, testwasm.BuildGo(t, filepath.Join(root, "plugins/examples/planner")), filepath.Join(b.dir, "planner.wasm"))
	writeFile(t, filepath.Join(b.dir, "policies", "plan-before-execute.hcl"),
		library(t, "plan-before-execute", map[string]string{"../plugins/examples/planner/planner.wasm": "../planner.wasm"}))
	plans := map[string]string{}
	for _, ref := range []string{"plan-before-execute@1", "plan-before-execute@2"} {
		task, _, err := b.e.Submit(b.ctx, filepath.Join(b.dir, "task.hcl"), engine.SubmitOptions{Policies: []string{ref}})
		require.NoError(t, err)
		task = b.work(t, task.ID)
		require.Equal(t, ledger.Succeeded, task.Status, task.Reason)
		plans[ref] = b.output(t, task.ID, "plan-before-execute.plan@draft")
	}
	require.NotContains(t, plans["plan-before-execute@1"], "Write a short report on ledgers")
	require.JSONEq(t, `{"next":"draft","steps":[
		"restate the objective: Write a short report on ledgers",
		"keep the constraint: cite no source you did not read",
		"keep the constraint: never publish",
		"run step draft of task report, then check its output against the objective"]}`, plans["plan-before-execute@2"])
}
