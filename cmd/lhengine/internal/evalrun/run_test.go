package evalrun

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lhengine/lhengine/engine"
	"github.com/lhengine/lhengine/internal/testmodel"
	"github.com/lhengine/lhengine/internal/testpolicy"
	"github.com/lhengine/lhengine/internal/testwasm"
	"github.com/lhengine/lhengine/ledger"
)

const seededTask = `
task "seeded" {
  variable "seed" { type = number }
  variable "word" { default = "hi" }
  step "a" {
    plugin = "step.wasm"
    input  = { mode = "echo", seed = var.seed, word = var.word }
  }
  step "b" {
    plugin = "step.wasm"
    input  = { mode = "echo", word = step.a.output.word, seed = step.a.output.seed }
  }
}
`

var markPolicy = testpolicy.Insert("mark", `    after  = "b"
    plugin = "../step.wasm"
    input  = { mode = "echo", word = "marked", seed = step.anchor.output.seed }`)

const smallSet = `
eval "small" {
  policies    = ["mark"]
  policy_dirs = ["policies"]
  ablate      = ["mark"]
  case "echo" {
    task   = "task.hcl"
    vars   = { word = "hey" }
    repeat = 3
    verify {
      output_includes = ["marked"]
    }
  }
}
`

// smallTree writes the pipeline C guest, a task with a seed variable, a
// policy that inserts a step after its last one, and smallSet; it returns
// the parsed set.
func smallTree(t *testing.T) *Set {
	t.Helper()
	wasm, err := os.ReadFile(testwasm.CGuest(t, "pipeline"))
	require.NoError(t, err)
	dir := t.TempDir()
	for name, src := range map[string]string{
		"step.wasm": string(wasm), "task.hcl": seededTask, "policies/mark.hcl": markPolicy, "set.hcl": smallSet,
	} {
		require.NoError(t, os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(src), 0o644))
	}
	s, _, diags := LoadSet(filepath.Join(dir, "set.hcl"))
	require.False(t, diags.HasErrors(), diags.Error())
	return s
}

// TestRunInProcess runs a small set in two states on the engine in this
// process: the policy decides the verdict, each state's figures are its
// runs' sums, the seed reaches the task's seed variable (plus the repeat)
// and decides the order of the runs, and each run's figures are those its
// kept store records.
func TestRunInProcess(t *testing.T) {
	t.Parallel()
	s := smallTree(t)
	ctx := context.Background()
	order := func(res *Result) []string {
		var out []string
		for _, rr := range res.Runs {
			out = append(out, rr.State+"/"+rr.Vars["seed"])
		}
		return out
	}
	scratch := t.TempDir()
	var mu sync.Mutex // OnRun is called from each worker
	var seen []string
	res, err := Run(ctx, Config{Set: s, Seed: 5, Workers: 2, Scratch: scratch, KeepHomes: true,
		OnRun: func(rr *RunReport) {
			mu.Lock()
			seen = append(seen, rr.State)
			mu.Unlock()
		}})
	require.NoError(t, err)
	require.Len(t, seen, 6)
	require.Len(t, res.States, 2)
	base, without := res.States[0].Figures, res.States[1].Figures
	require.Equal(t, Figures{Runs: 3, Passes: 3, SuccessRate: 1, Attempts: 9, WallSeconds: base.WallSeconds}, base)
	require.Equal(t, Figures{Runs: 3, Attempts: 6, WallSeconds: without.WallSeconds}, without)
	require.Len(t, res.States[0].Pins, 1)
	require.Regexp(t, `^mark@1 [0-9a-f]{64}$`, res.States[0].Pins[0])
	require.Empty(t, res.States[1].Pins)

	seeds := map[string][]string{}
	for _, rr := range res.Runs {
		require.Empty(t, rr.Error)
		seeds[rr.State] = append(seeds[rr.State], rr.Vars["seed"])
		withHome(t, rr.Home, func(r ledger.Reader) {
			task, err := r.Task(rr.Task)
			require.NoError(t, err)
			require.Equal(t, ledger.Succeeded, task.Status)
			require.Equal(t, task.Attempts, rr.Attempts)
			m, err := r.Manifest(rr.Task)
			require.NoError(t, err)
			require.JSONEq(t, rr.Vars["seed"], string(m.Vars["seed"]), "the seed reached the task")
		})
	}
	for _, st := range []string{"baseline", "without mark"} {
		slices.Sort(seeds[st])
		require.Equal(t, []string{"5", "6", "7"}, seeds[st])
	}

	again, err := Run(ctx, Config{Set: s, Seed: 5, Workers: 1})
	require.NoError(t, err)
	require.Equal(t, order(res), order(again), "one seed, one order")
	other, err := Run(ctx, Config{Set: s, Seed: 6, Workers: 1})
	require.NoError(t, err)
	require.NotEqual(t, order(res), order(other), "another seed, another order")

	_, err = Run(ctx, Config{Set: s, Ablate: []string{"nosuch"}})
	require.ErrorContains(t, err, `ablation nosuch: no policy "nosuch" on the search path`)
}

func withHome(t *testing.T, home string, fn func(r ledger.Reader)) {
	t.Helper()
	e, err := engine.Open(context.Background(), engine.Config{Home: home, MustExist: true})
	require.NoError(t, err)
	defer e.Close(context.Background())
	require.NoError(t, e.Read(func(r ledger.Reader) error {
		fn(r)
		return nil
	}))
}

// TestRunErrors: a run that cannot be made is in the result with why, and
// counted among its state's errors: a task that does not validate in the
// state (it selects a policy no directory has), and a crash case whose
// child process does not die at its crash point.
func TestRunErrors(t *testing.T) {
	t.Parallel()
	s := smallTree(t)
	s.Cases[0].Repeat = 1
	ctx := context.Background()

	unknown := *s
	unknown.Policies = []string{"mark", "nosuch"}
	unknown.Ablate = nil
	res, err := Run(ctx, Config{Set: &unknown})
	require.NoError(t, err)
	require.Len(t, res.Runs, 1)
	require.Contains(t, res.Runs[0].Error, "the task does not validate: Unknown policy")
	require.False(t, res.Runs[0].Pass)
	require.Equal(t, 1, res.States[0].Figures.Errors)

	exe, err := exec.LookPath("true") // a child that exits 0 at once
	require.NoError(t, err)
	crash := *s
	c := *s.Cases[0]
	c.Crash = "unit.after_commit@2"
	crash.Cases = []*Case{&c}
	crash.Ablate = nil
	_, err = Run(ctx, Config{Set: &crash})
	require.ErrorContains(t, err, "needs the lhengine executable")
	res, err = Run(ctx, Config{Set: &crash, Executable: exe})
	require.NoError(t, err)
	rr := res.Runs[0]
	require.Contains(t, rr.Error, "the child process did not crash at unit.after_commit@2 (it finished)")
	require.NotNil(t, rr.Crash)
	require.False(t, rr.Crash.Recovered)
	require.NotNil(t, rr.Crash.Reference, "the reference run was made")
	require.True(t, rr.Crash.Reference.Pass)
	require.Equal(t, Figures{Runs: 1, CrashRuns: 1, Errors: 1}, res.States[0].Figures)
}

const agentTask = `
task "agent" {
  variable "question" { type = string }
  model "m" {
    provider     = "openai"
    base_url     = "%s/v1"
    model        = "test-model"
    input_price  = 2
    output_price = 8
  }
  step "answer" {
    plugin = "agent.wasm"
    models = ["m"]
    input  = { model = "m", system = "Answer.", question = var.question, facts = { Oslo = "Oslo is in Norway." } }
  }
}
`

// TestRunModelReplay: a case with model_replay submits every run with the
// replay set (pinned in its manifest, nothing sent), its cost is the cost
// units its store records, and a run whose conversation the set does not
// hold is an error run naming the request's hash.
func TestRunModelReplay(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	wasm, err := os.ReadFile(testwasm.BuildGo(t, filepath.Join(testwasm.ModuleRoot(t), "plugins/examples/agent")))
	require.NoError(t, err)
	srv := testmodel.New(t)
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "agent.wasm"), wasm, 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "task.hcl"), fmt.Appendf(nil, agentTask, srv.URL), 0o644))

	// Record the conversation of one question against the loopback server.
	e, err := engine.Open(ctx, engine.Config{Home: filepath.Join(dir, "record-home")})
	require.NoError(t, err)
	task, _, err := e.Submit(ctx, filepath.Join(dir, "task.hcl"), engine.SubmitOptions{Vars: map[string]string{"question": "Where is Oslo?"}})
	require.NoError(t, err)
	require.NoError(t, e.Work(ctx, engine.WorkOptions{Task: task.ID, ExitWhenIdle: true, ModelRecord: filepath.Join(dir, "recorded")}))
	require.NoError(t, e.Close(ctx))
	sent := len(srv.Requests())
	require.Equal(t, 2, sent, "a lookup, then the answer")

	require.NoError(t, os.WriteFile(filepath.Join(dir, "set.hcl"), []byte(`eval "replay" {
  case "recorded" {
    task         = "task.hcl"
    vars         = { question = "Where is Oslo?" }
    model_replay = "recorded"
    verify {
      output_includes = ["tool said: Oslo is in Norway."]
    }
  }
  case "unrecorded" {
    task         = "task.hcl"
    vars         = { question = "Where is Bergen?" }
    model_replay = "recorded"
    verify {
      output_includes = ["Bergen"]
    }
  }
}
`), 0o644))
	s, _, diags := LoadSet(filepath.Join(dir, "set.hcl"))
	require.False(t, diags.HasErrors(), diags.Error())
	res, err := Run(ctx, Config{Set: s, Scratch: t.TempDir(), KeepHomes: true})
	require.NoError(t, err)
	require.Equal(t, sent, len(srv.Requests()), "nothing sent")
	require.Len(t, res.Runs, 2)
	byCase := map[string]*RunReport{}
	for _, rr := range res.Runs {
		byCase[rr.Case] = rr
	}
	ok := byCase["recorded"]
	require.Empty(t, ok.Error)
	require.True(t, ok.Pass, ok.Reason)
	require.Greater(t, ok.Cost, 0.0)
	withHome(t, ok.Home, func(r ledger.Reader) {
		task, err := r.Task(ok.Task)
		require.NoError(t, err)
		require.Equal(t, task.ModelUsage.Cost, ok.Cost, "the cost its store records")
		require.EqualValues(t, 2, task.ModelUsage.Calls)
		require.InDelta(t, (float64(task.ModelUsage.InputTokens)*2+float64(task.ModelUsage.OutputTokens)*8)/1e6, ok.Cost, 1e-12)
		m, err := r.Manifest(ok.Task)
		require.NoError(t, err)
		require.NotNil(t, m.ModelReplay)
		require.Equal(t, m.ModelReplay.SHA256, ok.ReplaySet)
	})
	miss := byCase["unrecorded"]
	require.Regexp(t, `^a model call missed the case's replay set: .*no recorded response for request sha256 [0-9a-f]{64}`, miss.Error)
	require.False(t, miss.Pass)
	require.Equal(t, Figures{Runs: 2, Passes: 1, SuccessRate: 0.5, Attempts: res.States[0].Figures.Attempts,
		WallSeconds: res.States[0].Figures.WallSeconds, Cost: ok.Cost + miss.Cost, Errors: 1}, res.States[0].Figures)
	require.Equal(t, "recorded", res.Cases[0].ModelReplay)

	// A crash case's child is given the replay set too: here a child that
	// writes down its arguments and exits.
	args := filepath.Join(dir, "child-args")
	exe := filepath.Join(dir, "child.sh")
	require.NoError(t, os.WriteFile(exe, []byte("#!/bin/sh\necho \"$@\" > "+args+"\n"), 0o755))
	crash := *s
	c := *s.Cases[0]
	c.Crash = "model.after_record@2"
	crash.Cases = []*Case{&c}
	res, err = Run(ctx, Config{Set: &crash, Executable: exe})
	require.NoError(t, err)
	require.Contains(t, res.Runs[0].Error, "the child process did not crash at model.after_record@2 (it finished)")
	got, err := os.ReadFile(args)
	require.NoError(t, err)
	require.Contains(t, string(got), " --model-replay "+filepath.Join(dir, "recorded")+"\n")
}
