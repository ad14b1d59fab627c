package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lhengine/lhengine/cmd/lhengine/internal/evalrun"
	"github.com/lhengine/lhengine/engine"
	"github.com/lhengine/lhengine/internal/testmodel"
	"github.com/lhengine/lhengine/ledger"
)

var updateEvals = flag.Bool("update-evals", false, "record testdata/evals/agent/recorded anew, every case of testdata/evals/agent.hcl in every policy state, against the scripted loopback model")

// capitalsModel is the scripted model the agent eval set's responses were
// recorded with. It reads the conversation: the countries of the question
// (the first user message up to a blank line: its capitalised words after
// the first) it has no fact about yet are pending, a fact being a tool
// result, or a line "- FACT" after the question in a fresh context, that
// names the country. While some are pending it asks for a lookup of every
// one in a single turn, or of the first only once a tool result has said
// that calls were not run; then it answers with the facts, in the
// question's order.
func capitalsModel(c testmodel.Conversation) testmodel.Reply {
	users := c.Texts("user")
	if len(users) == 0 {
		return testmodel.Reply{Text: "There is no question."}
	}
	question, listed, _ := strings.Cut(users[0], "\n\n")
	var facts []string
	for line := range strings.Lines(listed) {
		if f, ok := strings.CutPrefix(strings.TrimSuffix(line, "\n"), "- "); ok {
			facts = append(facts, f)
		}
	}
	oneAtATime := false
	for _, r := range c.Texts("tool") {
		if strings.HasPrefix(r, "not run") {
			oneAtATime = true
			continue
		}
		facts = append(facts, r)
	}
	var pending, answer []string
	for i, w := range strings.Fields(question) {
		name := strings.Trim(w, ",.?!;:")
		if i == 0 || name == "" || name[0] < 'A' || name[0] > 'Z' {
			continue
		}
		at := slices.IndexFunc(facts, func(f string) bool { return strings.Contains(f, name) })
		switch {
		case at < 0:
			pending = append(pending, name)
		case !strings.HasPrefix(facts[at], "nothing is known"):
			answer = append(answer, facts[at])
		}
	}
	if len(pending) == 0 || !slices.Contains(c.Tools, "lookup") {
		return testmodel.Reply{Text: strings.Join(answer, " ")}
	}
	if oneAtATime {
		pending = pending[:1]
	}
	var calls []testmodel.ToolCall
	for _, name := range pending {
		args, _ := json.Marshal(map[string]string{"input": name})
		calls = append(calls, testmodel.ToolCall{Name: "lookup", Arguments: args})
	}
	return testmodel.Reply{ToolCalls: calls}
}

// agentEvalTree copies what testdata/evals/agent.hcl needs into a new
// directory laid out as the repository is, with the plugins built from
// source: the agent example's task, prompt and plugin, the two policies,
// the set, its recordings and its verifier plugin. With -update-evals it
// first records the recordings anew (recordAgentEval). It returns the set
// file's path.
func agentEvalTree(t *testing.T) string {
	t.Helper()
	r := newRepoTree(t)
	r.copy("plugins/examples/agent/task.hcl", "plugins/examples/agent/prompts/system.md",
		"policies/single-tool-at-a-time.hcl", "policies/context-reset-every-n.hcl", "testdata/evals/agent.hcl")
	r.build("plugins/examples/agent/agent.wasm", "plugins/examples/agent")
	r.build("testdata/evals/verifiers/agent.wasm", "testdata/evals/verifiers/agent")
	const recorded = "testdata/evals/agent/recorded"
	if *updateEvals {
		// The set names its recordings, which are being made: a
		// placeholder lets it be read for its cases and states.
		r.write(recorded+"/placeholder.json", []byte("{}"))
		recordAgentEval(t, r.path("testdata/evals/agent.hcl"), filepath.Join(r.root, recorded))
		require.NoError(t, os.RemoveAll(r.path(recorded)))
	}
	recs, err := filepath.Glob(filepath.Join(r.root, recorded, "*.json"))
	require.NoError(t, err)
	require.NotEmpty(t, recs, "no recordings in %s: make them with -update-evals", recorded)
	for _, f := range recs {
		r.copy(filepath.Join(recorded, filepath.Base(f)))
	}
	return r.path("testdata/evals/agent.hcl")
}

// recordAgentEval runs every case of the set at path in every policy
// state, as lhengine eval would submit it, against the loopback model
// scripted by capitalsModel, and records every response in dst (which it
// replaces). The task's model points at the server in a copy of it.
func recordAgentEval(t *testing.T, path, dst string) {
	t.Helper()
	ctx := context.Background()
	set, _, diags := evalrun.LoadSet(path)
	require.False(t, diags.HasErrors(), diags.Error())
	states, err := evalrun.States(set, nil)
	require.NoError(t, err)
	srv := testmodel.New(t)
	srv.Script = capitalsModel
	require.NoError(t, os.Setenv("AGENT_API_KEY", "recording"))
	t.Cleanup(func() { os.Unsetenv("AGENT_API_KEY") })
	require.NoError(t, os.RemoveAll(dst))
	live := map[string]string{} // task file -> its copy for the loopback server
	for _, c := range set.Cases {
		if _, ok := live[c.TaskPath]; !ok {
			src, err := os.ReadFile(c.TaskPath)
			require.NoError(t, err)
			patched := strings.Replace(string(src), `"http://127.0.0.1:11434/v1"`, fmt.Sprintf("%q", srv.URL+"/v1"), 1)
			require.NotEqual(t, string(src), patched, "the task's base_url")
			p := filepath.Join(filepath.Dir(c.TaskPath), "live-"+filepath.Base(c.TaskPath))
			require.NoError(t, os.WriteFile(p, []byte(patched), 0o644))
			live[c.TaskPath] = p
		}
		for i, st := range states {
			e, err := engine.Open(ctx, engine.Config{Home: filepath.Join(t.TempDir(), fmt.Sprintf("%s-%d", c.Name, i))})
			require.NoError(t, err)
			task, _, err := e.Submit(ctx, live[c.TaskPath], engine.SubmitOptions{Vars: c.Vars, Policies: st.Policies, Without: st.Without, PolicyDirs: set.PolicyDirs})
			require.NoError(t, err)
			require.NoError(t, e.Work(ctx, engine.WorkOptions{Task: task.ID, ExitWhenIdle: true, ModelRecord: dst}))
			got, err := e.Task(ctx, task.ID)
			require.NoError(t, err)
			require.Equal(t, ledger.Succeeded, got.Status, "%s in %s: %s", c.Name, st.Name, got.Reason)
			require.NoError(t, e.Close(ctx))
		}
	}
}

// agentOutput is the agent example's output.
type agentOutput struct {
	Answer       string  `json:"answer"`
	Turns        int     `json:"turns"`
	InputTokens  int64   `json:"input_tokens"`
	OutputTokens int64   `json:"output_tokens"`
	Cost         float64 `json:"cost"`
	NotRun       int     `json:"not_run"`
	Resets       int     `json:"resets"`
}

// TestEvalAgentSet runs the repository's eval set testdata/evals/agent.hcl
// with the real lhengine binary, every model call answered from the
// recordings (nothing can be sent: the task's base_url is a port where no
// test server listens). It checks that the agent honours each policy (one
// tool call per turn, a fresh context every 20 turns), what each costs
// (single-tool-at-a-time more turns and cost units, context-reset-every-n
// fewer input tokens, for the same answer), and that the cost of every run
// and state in the JSON result and in the Markdown tables is the
// ModelUsage its kept store records. With -update-evals it first records
// the responses anew against the scripted loopback model.
func TestEvalAgentSet(t *testing.T) {
	t.Parallel()
	ev := runEval(t, agentEvalTree(t), slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, "AGENT_API_KEY=") }))
	res := ev.res
	require.Equal(t, []string{"baseline", "without single-tool-at-a-time", "without context-reset-every-n"},
		[]string{res.States[0].Name, res.States[1].Name, res.States[2].Name})
	out := map[string]agentOutput{}
	runs := map[string]*evalrun.RunReport{}
	for _, rr := range res.Runs {
		require.Empty(t, rr.Error)
		require.True(t, rr.Pass, "%s in %s: %s", rr.Case, rr.State, rr.Reason)
		require.NotEmpty(t, rr.ReplaySet)
		var o agentOutput
		require.NoError(t, json.Unmarshal(rr.Output, &o))
		out[rr.Case+"/"+rr.State] = o
		runs[rr.Case+"/"+rr.State] = rr
	}
	for _, st := range res.States {
		require.Equal(t, 2, st.Figures.Passes, st.Name)
	}

	// single-tool-at-a-time: one call per turn, so one turn more and more
	// cost units for the same answer.
	two, twoFree := out["two-capitals/baseline"], out["two-capitals/without single-tool-at-a-time"]
	require.Equal(t, "Norway's capital is Oslo. Sweden's capital is Stockholm.", two.Answer)
	require.Equal(t, two.Answer, twoFree.Answer)
	require.Equal(t, 3, two.Turns)
	require.Equal(t, 1, two.NotRun)
	require.Equal(t, 2, twoFree.Turns)
	require.Zero(t, twoFree.NotRun)
	require.Greater(t, runs["two-capitals/baseline"].Cost, runs["two-capitals/without single-tool-at-a-time"].Cost)
	require.Equal(t, two, out["two-capitals/without context-reset-every-n"], "too short a conversation for a reset")

	// context-reset-every-n: the same 25 turns and answer, fewer input
	// tokens after the reset at turn 20.
	many, noReset, free := out["many-capitals/baseline"], out["many-capitals/without context-reset-every-n"], out["many-capitals/without single-tool-at-a-time"]
	require.Equal(t, 25, many.Turns)
	require.Equal(t, 1, many.Resets)
	require.Equal(t, 25, noReset.Turns)
	require.Zero(t, noReset.Resets)
	require.Equal(t, 2, free.Turns)
	require.Equal(t, many.Answer, noReset.Answer)
	require.Equal(t, many.Answer, free.Answer)
	require.Less(t, many.InputTokens, noReset.InputTokens)
	require.Less(t, runs["many-capitals/baseline"].Cost, runs["many-capitals/without context-reset-every-n"].Cost)
	require.Greater(t, res.States[0].Figures.Cost, res.States[1].Figures.Cost, "single-tool-at-a-time costs more in all")
	require.Less(t, res.States[0].Figures.Cost, res.States[2].Figures.Cost, "context-reset-every-n costs less in all")

	// Every cost, in the JSON and in the tables, is what the stores record.
	md, err := os.ReadFile(filepath.Join(ev.results, res.Set+".md"))
	require.NoError(t, err)
	table := string(md)
	stateCost := map[string]float64{}
	for _, rr := range res.Runs {
		var u ledger.ModelUsage
		withStore(t, rr.Home, func(r ledger.Reader) {
			task, err := r.Task(rr.Task)
			require.NoError(t, err)
			u = task.ModelUsage
			m, err := r.Manifest(rr.Task)
			require.NoError(t, err)
			require.Equal(t, m.ModelReplay.SHA256, rr.ReplaySet)
		})
		require.Positive(t, u.Cost)
		require.Equal(t, u.Cost, rr.Cost, "%s in %s", rr.Case, rr.State)
		o := out[rr.Case+"/"+rr.State]
		require.Equal(t, u.InputTokens, o.InputTokens, "every call billed once, as the plugin counted")
		require.InDelta(t, (float64(u.InputTokens)*0.15+float64(u.OutputTokens)*0.6)/1e6, u.Cost, 1e-15)
		stateCost[rr.State] += u.Cost
		require.Contains(t, table, fmt.Sprintf("| %s | %s | 1 | pass | 1 | 0 | 0 | %s | %s | - |  |\n",
			rr.Case, rr.State, wallCell(rr.WallSeconds), costCell(u.Cost)))
	}
	for _, st := range res.States {
		require.Equal(t, stateCost[st.Name], st.Figures.Cost, st.Name)
		require.Contains(t, table, fmt.Sprintf("| %s | 2/2 (100%%) | 2 | 0 | 0 | %s | %s | - |\n",
			st.Name, wallCell(st.Figures.WallSeconds), costCell(stateCost[st.Name])))
	}
}

// costCell and wallCell write a figure as the eval's tables do.
func costCell(c float64) string {
	return strings.TrimSuffix(strings.TrimRight(fmt.Sprintf("%.6f", c), "0"), ".")
}

func wallCell(s float64) string { return fmt.Sprintf("%.2fs", s) }
