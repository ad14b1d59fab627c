package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lhengine/lhengine/cmd/lhengine/internal/evalrun"
	"github.com/lhengine/lhengine/engine"
	"github.com/lhengine/lhengine/internal/testwasm"
	"github.com/lhengine/lhengine/ledger"
)

// evalTree copies the files the eval set testdata/evals/critic.hcl needs
// into a new directory laid out as the repository is, with the plugins
// built from source: the critic example's task, its draft and critic
// plugins, the report example's verify and finalize, the policy library
// and the set's verifier plugin. It returns the set file's path.
func evalTree(t *testing.T) string {
	r := newRepoTree(t)
	r.copy("plugins/examples/critic/task.hcl", "policies/critic-after-draft.hcl", "testdata/evals/critic.hcl")
	r.build("plugins/examples/critic/draft.wasm", "plugins/examples/critic/draft")
	r.build("plugins/examples/critic/critic.wasm", "plugins/examples/critic/critic")
	r.build("plugins/examples/report/verify.wasm", "plugins/examples/report/verify")
	r.build("plugins/examples/report/finalize.wasm", "plugins/examples/report/finalize")
	r.build("testdata/evals/verifiers/report.wasm", "testdata/evals/verifiers/report")
	return r.path("testdata/evals/critic.hcl")
}

// repoTree is a new directory laid out as the repository is, which a test
// fills with copies of the repository's files and plugins built from
// source.
type repoTree struct {
	t         *testing.T
	root, dir string
}

func newRepoTree(t *testing.T) *repoTree {
	return &repoTree{t: t, root: testwasm.ModuleRoot(t), dir: t.TempDir()}
}

// path is rel's path in the tree.
func (r *repoTree) path(rel string) string { return filepath.Join(r.dir, rel) }

// write writes b as the tree's file rel.
func (r *repoTree) write(rel string, b []byte) {
	r.t.Helper()
	require.NoError(r.t, os.MkdirAll(filepath.Dir(r.path(rel)), 0o755))
	require.NoError(r.t, os.WriteFile(r.path(rel), b, 0o644))
}

// copy copies the repository's files rels into the tree.
func (r *repoTree) copy(rels ...string) {
	r.t.Helper()
	for _, rel := range rels {
		b, err := os.ReadFile(filepath.Join(r.root, rel))
		require.NoError(r.t, err)
		r.write(rel, b)
	}
}

// build compiles the Go plugin package pkg (a path in the repository) and
// puts it in the tree as rel.
func (r *repoTree) build(rel, pkg string) {
	r.t.Helper()
	b, err := os.ReadFile(testwasm.BuildGo(r.t, filepath.Join(r.root, pkg)))
	require.NoError(r.t, err)
	r.write(rel, b)
}

// evalRun is what lhengine -o json eval printed and where it kept the
// results.
type evalRun struct {
	res            evalrun.Result
	stdout, stderr string
	results        string
}

// runEval runs lhengine -o json eval on set, keeping its homes and its
// results in new folders, with env (nil: this process's) and the extra
// arguments; the command must succeed.
func runEval(t *testing.T, set string, env []string, args ...string) evalRun {
	t.Helper()
	results := filepath.Join(t.TempDir(), "results")
	cmd := exec.Command(buildBinary(t), append([]string{"-o", "json", "eval", set,
		"--keep-homes", filepath.Join(t.TempDir(), "homes"), "--results", results}, args...)...)
	cmd.Env = env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	require.NoError(t, cmd.Run(), stderr.String())
	ev := evalRun{stdout: stdout.String(), stderr: stderr.String(), results: results}
	require.NoError(t, json.Unmarshal(stdout.Bytes(), &ev.res), ev.stdout)
	return ev
}

// TestEvalCriticSet runs the repository's eval set (testdata/evals/critic.hcl)
// with the real lhengine binary, whose crash case runs a child lhengine
// that SIGKILLs itself. It checks that the table shows what the policy
// does (planted placeholders caught with it, shipped without it; a clean
// draft passes both ways at the cost of a critic unit), that the crash
// case recovered, and that every figure of the result equals what the
// kept stores record, recomputed here from them.
func TestEvalCriticSet(t *testing.T) {
	t.Parallel()
	ev := runEval(t, evalTree(t), nil, "--seed", "7")
	res := ev.res
	saved, err := os.ReadFile(filepath.Join(ev.results, "critic-after-draft.json"))
	require.NoError(t, err)
	require.JSONEq(t, ev.stdout, string(saved))
	md, err := os.ReadFile(filepath.Join(ev.results, "critic-after-draft.md"))
	require.NoError(t, err)
	require.Contains(t, string(md), "| without critic-after-draft | 1/4 (25%) |")

	// Not a terminal: one line per finished run on stderr.
	require.Len(t, regexp.MustCompile(`(?m)^(baseline|without critic-after-draft) · [a-z-]+ · run 1: .*\[\d/4\]$`).FindAllString(ev.stderr, -1), 8, ev.stderr)
	require.Equal(t, uint64(7), res.Seed)
	require.Equal(t, engine.Version, res.EngineVersion)
	require.Len(t, res.States, 2)
	base, without := res.States[0], res.States[1]
	require.Equal(t, "baseline", base.Name)
	require.Equal(t, "without critic-after-draft", without.Name)
	require.Len(t, base.Pins, 1)
	require.True(t, strings.HasPrefix(base.Pins[0], "critic-after-draft@2 "), base.Pins)
	require.Empty(t, without.Pins)

	// The difference the policy makes, both ways.
	require.Equal(t, 4, base.Figures.Passes)
	require.Equal(t, 1, without.Figures.Passes, "only the clean draft passes without the critic")
	require.Greater(t, base.Figures.Attempts, without.Figures.Attempts)
	require.Equal(t, 1, base.Figures.CrashRuns)
	require.Equal(t, 1, base.Figures.Recovered)
	require.Equal(t, 1, without.Figures.Recovered)
	byRun := map[string]*evalrun.RunReport{}
	for _, rr := range res.Runs {
		byRun[rr.State+"/"+rr.Case] = rr
		require.Empty(t, rr.Error)
	}
	require.True(t, byRun["baseline/planted-todo"].Pass)
	require.False(t, byRun["without critic-after-draft/planted-todo"].Pass)
	require.Equal(t, `the output includes "TODO"`, byRun["without critic-after-draft/planted-todo"].Reason)
	require.False(t, byRun["without critic-after-draft/planted-tbd"].Pass)
	require.Equal(t, `the report still holds "TBD"`, byRun["without critic-after-draft/planted-tbd"].Reason, "the verifier plugin's reason")
	clean, cleanWithout := byRun["baseline/clean-draft"], byRun["without critic-after-draft/clean-draft"]
	require.True(t, clean.Pass)
	require.True(t, cleanWithout.Pass)
	require.Equal(t, cleanWithout.Attempts+1, clean.Attempts, "on a clean draft the policy only costs the critic's unit")

	// Every figure, from the stores.
	for i, st := range res.States {
		var f evalrun.Figures
		for _, rr := range res.Runs {
			if rr.State != st.Name {
				continue
			}
			got := recompute(t, rr)
			f.Runs++
			if got.pass {
				f.Passes++
			}
			f.Attempts += got.attempts
			f.Repeated += got.repeated
			f.Repairs += got.repairs
			f.WallSeconds += got.wall
			f.Cost += got.cost
			if rr.Crash != nil {
				f.CrashRuns++
				if got.recovered {
					f.Recovered++
				}
			}
		}
		f.SuccessRate = float64(f.Passes) / float64(f.Runs)
		require.Equal(t, f, st.Figures, "state %d %s", i, st.Name)
	}
}

// measured is one run's figures as this test reads them from its store.
type measured struct {
	pass                        bool
	attempts, repeated, repairs int
	wall, cost                  float64
	recovered                   bool
}

// recompute opens the kept home of a run and reads its figures from the
// records: attempts started per unit, the task's repairs, creation, end
// and model cost, the output against the case's checks (or the verifier
// task's verdict), and for a crash run, that no unit was committed twice
// in one pass and that the output equals the reference run's.
func recompute(t *testing.T, rr *evalrun.RunReport) measured {
	t.Helper()
	require.NotEmpty(t, rr.Home)
	var m measured
	var output json.RawMessage
	withStore(t, rr.Home, func(r ledger.Reader) {
		task, err := r.Task(rr.Task)
		require.NoError(t, err)
		units := 0
		for step := range task.Steps {
			us, err := r.Units(rr.Task, step)
			require.NoError(t, err)
			for _, u := range us {
				units += u.Attempt
				if u.Attempt > 1 {
					m.repeated += u.Attempt - 1
				}
			}
		}
		m.attempts = units
		require.Equal(t, task.Attempts, units, "the task's attempt counter and its units agree")
		m.repairs, m.cost = task.Repairs, task.ModelUsage.Cost
		m.wall = task.FinishedAt.Sub(task.CreatedAt).Seconds()
		output = task.Output
		switch rr.Case {
		case "planted-tbd":
			vt, err := r.Task(rr.VerifierTask)
			require.NoError(t, err)
			var v struct{ Pass bool }
			require.NoError(t, json.Unmarshal(vt.Output, &v))
			m.pass = task.Status == ledger.Succeeded && v.Pass
		case "clean-draft":
			m.pass = task.Status == ledger.Succeeded && strings.Contains(string(output), "## Findings") &&
				!strings.Contains(string(output), "TODO") && !strings.Contains(string(output), "TBD")
		case "planted-todo":
			m.pass = task.Status == ledger.Succeeded && !strings.Contains(string(output), "TODO") && !strings.Contains(string(output), "TBD")
		default:
			m.pass = task.Status == ledger.Succeeded && !strings.Contains(string(output), "TODO")
		}
		if rr.Crash == nil {
			return
		}
		events, err := r.Events(rr.Task, 0, 0)
		require.NoError(t, err)
		doneInPass := map[string]int{}
		m.recovered = task.Status == ledger.Succeeded
		for _, e := range events {
			switch e.Type {
			case ledger.EvStepStarted:
				for k := range doneInPass {
					if strings.HasPrefix(k, e.Step+"/") {
						delete(doneInPass, k)
					}
				}
			case ledger.EvUnitDone:
				k := fmt.Sprintf("%s/%d", e.Step, *e.Item)
				doneInPass[k]++
				if doneInPass[k] > 1 {
					m.recovered = false
				}
			}
		}
	})
	if rr.Crash != nil {
		require.NotEmpty(t, rr.Crash.ReferenceHome)
		withStore(t, rr.Crash.ReferenceHome, func(r ledger.Reader) {
			ref, err := r.Task(rr.Crash.Reference.Task)
			require.NoError(t, err)
			if string(ref.Output) != string(output) {
				m.recovered = false
			}
		})
	}
	return m
}

// TestEvalSetMistakes: a set file with mistakes is reported as
// file:line:col with an excerpt, every mistake at once, exit status 1, and
// nothing is run.
func TestEvalSetMistakes(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	set := filepath.Join(dir, "set.hcl")
	require.NoError(t, os.WriteFile(set, []byte(`eval "bad" {
  ablate = ["x@0"]
  case "c" {
    task   = "missing.hcl"
    repeat = 0
    verify {}
  }
}
`), 0o644))
	var out, errb bytes.Buffer
	code := run(context.Background(), []string{"--home", filepath.Join(dir, "home"), "eval", set}, &out, &errb)
	require.Equal(t, exitFailed, code)
	for _, want := range []string{
		set + ":2:13: error: Invalid policy reference",
		set + ":4:14: error: Cannot read task file",
		set + ":5:14: error: Invalid repeat count",
		set + ":6:5: error: Empty verify",
	} {
		require.Contains(t, errb.String(), want)
	}
	require.Contains(t, errb.String(), `task   = "missing.hcl"`, "a source excerpt")
	require.Empty(t, out.String())
	_, err := os.Stat(filepath.Join(dir, "results"))
	require.ErrorIs(t, err, os.ErrNotExist)

	code = run(context.Background(), []string{"eval", set, "--workers", "0"}, &out, &errb)
	require.Equal(t, exitUsage, code)
}

// TestEvalRefusesACrashPointOfItsOwn: eval runs cases in its own process,
// so a LHENGINE_CRASH_AT it inherited would kill it; it says so instead.
func TestEvalRefusesACrashPointOfItsOwn(t *testing.T) {
	t.Setenv("LHENGINE_CRASH_AT", "unit.after_commit@2")
	dir := t.TempDir()
	var out, errb bytes.Buffer
	code := run(context.Background(), []string{"--home", filepath.Join(dir, "home"), "eval", filepath.Join(dir, "set.hcl")}, &out, &errb)
	require.Equal(t, exitUsage, code)
	require.Contains(t, errb.String(), "LHENGINE_CRASH_AT=unit.after_commit@2 is set")
}
