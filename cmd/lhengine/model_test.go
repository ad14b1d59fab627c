package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lhengine/lhengine/internal/crashpoint"
	"github.com/lhengine/lhengine/internal/testmodel"
	"github.com/lhengine/lhengine/internal/testwasm"
	"github.com/lhengine/lhengine/ledger"
)

// modelDir returns a new folder holding the model guest as model.wasm.
func modelDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	testwasm.Copy(t, testwasm.GoGuest(t, "model"), filepath.Join(dir, "model.wasm"))
	return dir
}

// TestModelCallsSurviveSIGKILL runs a fan-out whose items each make two
// model calls (a tool call, then the answer) in a real lhengine process,
// kills it with SIGKILL once the second response is recorded but before
// its unit commits, and resumes it: the resumed attempt gets both recorded
// responses (replayed), the loopback server saw exactly one request per
// call key, and every call was billed once. status shows the tokens and
// the cost.
func TestModelCallsSurviveSIGKILL(t *testing.T) {
	t.Parallel()
	bin := buildBinary(t)
	srv := testmodel.New(t)
	const secret = "sk-crash-test-93c1f0a2"
	srv.Key = secret

	dir := modelDir(t)
	home := filepath.Join(dir, "home")
	require.NoError(t, os.WriteFile(filepath.Join(dir, "task.hcl"), fmt.Appendf(nil, `
task "cities" {
  model "m" {
    provider     = "openai"
    base_url     = "%s/v1"
    model        = "test-model"
    api_key_env  = "LHENGINE_CRASH_MODEL_KEY"
    input_price  = 1
    output_price = 4
  }
  step "ask" {
    plugin      = "model.wasm"
    models      = ["m"]
    for_each    = ["Paris", "Rome", "Oslo"]
    concurrency = 1
    input       = { model = "m", key = "q", prompt = "weather in ${each.value}", tools = true, fail_attempts = 0 }
  }
}
`, srv.URL), 0o644))

	lh := func(crashAt string, args ...string) (string, bool) {
		return runCrashing(t, bin, home, crashAt, []string{"LHENGINE_CRASH_MODEL_KEY=" + secret}, args...)
	}

	out, killed := lh(crashpoint.ModelAfterRecord+"@2", "run", filepath.Join(dir, "task.hcl"))
	require.True(t, killed, "the run must die once the second response is recorded:\n%s", out)
	id := taskID(out)
	require.Len(t, id, 26, out)
	require.Len(t, srv.Requests(), 2, "two calls made before the kill")

	out, killed = lh("", "resume", id)
	require.False(t, killed)
	require.Contains(t, out, "succeeded", out)

	reqs := srv.Requests()
	require.Len(t, reqs, 6, "one request per call key: 3 items × 2 calls")
	bodies := map[string]bool{}
	for _, r := range reqs {
		require.Equal(t, "Bearer "+secret, r.Header.Get("Authorization"))
		bodies[string(r.Body)] = true
	}
	require.Len(t, bodies, 6, "no call was sent twice")

	status, _ := lh("", "status", id)
	require.Contains(t, status, "models:      6 calls")

	withStore(t, home, func(r ledger.Reader) {
		task := succeededTask(t, r, id)
		u := task.ModelUsage
		require.EqualValues(t, 6, u.Calls, "billed once per call")
		require.InDelta(t, (float64(u.InputTokens)*1+float64(u.OutputTokens)*4)/1e6, u.Cost, 1e-12)
		require.Contains(t, status, fmt.Sprintf("%d input tokens · %d output tokens", u.InputTokens, u.OutputTokens))

		out, err := r.StepOutput(id, 0)
		require.NoError(t, err)
		var items []struct {
			Text     string
			Replayed []bool
		}
		require.NoError(t, json.Unmarshal(out, &items))
		require.Len(t, items, 3)
		resumed := 0
		for _, it := range items {
			require.Contains(t, it.Text, "tool said: result for weather in ")
			if it.Replayed[0] {
				require.Equal(t, []bool{true, true}, it.Replayed, "the resumed attempt got both recorded responses")
				resumed++
			} else {
				require.Equal(t, []bool{false, false}, it.Replayed)
			}
		}
		require.Equal(t, 1, resumed, "the unit cut short by the kill")

		events, err := r.Events(id, 0, 0)
		require.NoError(t, err)
		billed, replayed := 0, 0
		for _, ev := range events {
			if ev.Type == ledger.EvModelCall {
				if ev.Model.Replayed {
					replayed++
				} else {
					billed++
				}
			}
		}
		require.Equal(t, 6, billed)
		require.Equal(t, 2, replayed)

		calls, err := r.ModelCalls(id)
		require.NoError(t, err)
		require.Len(t, calls, 6)
	})
}

// TestModelRecordThenReplay records a tool-using run's model responses
// with --model-record, replays them in another home with --model-replay
// (nothing sent, the same outputs), and fails clearly, naming the
// request's hash, when the conversation asks something not recorded.
func TestModelRecordThenReplay(t *testing.T) {
	t.Parallel()
	srv := testmodel.New(t)
	const secret = "sk-record-test-0c7e"
	srv.Key = secret
	require.NoError(t, os.Setenv("LHENGINE_RECORD_TEST_KEY", secret))
	t.Cleanup(func() { os.Unsetenv("LHENGINE_RECORD_TEST_KEY") })

	dir := modelDir(t)
	task := func(name string, cities ...string) string {
		path := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(path, fmt.Appendf(nil, `
task "cities" {
  model "m" {
    provider    = "anthropic"
    base_url    = %q
    model       = "test-model"
    api_key_env = "LHENGINE_RECORD_TEST_KEY"
    input_price = 1
  }
  step "ask" {
    plugin   = "model.wasm"
    models   = ["m"]
    for_each = %s
    input    = { model = "m", key = "q", prompt = "weather in ${each.value}", tools = true, fail_attempts = 0 }
  }
}
`, srv.URL, "[\""+strings.Join(cities, "\", \"")+"\"]"), 0o644))
		return path
	}
	rec := filepath.Join(dir, "recorded")
	output := func(out string) string {
		_, after, ok := strings.Cut(out, "output of step")
		require.True(t, ok, out)
		return after
	}

	live := &cliBundle{dir: dir, home: filepath.Join(dir, "home1")}
	code, out, errOut := live.lh(t, "--log-level", "off", "run", "--model-record", rec, task("task.hcl", "Paris", "Rome"))
	require.Equal(t, 0, code, out+errOut)
	require.Len(t, srv.Requests(), 4)
	files, err := filepath.Glob(filepath.Join(rec, "*.json"))
	require.NoError(t, err)
	require.Len(t, files, 4, "one recording per call")
	for _, f := range files {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		require.NotContains(t, string(b), secret)
	}

	replay := &cliBundle{dir: dir, home: filepath.Join(dir, "home2")}
	code, again, errOut := replay.lh(t, "--log-level", "off", "run", "--model-replay", rec, task("task.hcl", "Paris", "Rome"))
	require.Equal(t, 0, code, again+errOut)
	require.Equal(t, output(out), output(again), "the replay reproduces the run")
	require.Len(t, srv.Requests(), 4, "nothing sent")

	// The guest passes a refused call on in its output (status -8, UNAVAILABLE).
	code, missed, _ := replay.lh(t, "--log-level", "off", "run", "--model-replay", rec, task("other.hcl", "Paris", "Lisbon"))
	require.Equal(t, 0, code, missed)
	require.Contains(t, missed, `"status": -8`)
	require.Contains(t, missed, "no recorded response for request sha256 ")
	require.Contains(t, missed, `"text": "tool said: result for weather in Paris"`, "the recorded city replays")
	require.Len(t, srv.Requests(), 4)

	code, _, errOut = replay.lh(t, "run", "--model-replay", rec, "--model-record", rec, task("task.hcl", "Paris"))
	require.NotEqual(t, 0, code)
	require.Contains(t, errOut, "exclude each other")
}

var updateAgent = flag.Bool("update-agent", false, "record plugins/examples/agent/recorded anew against the loopback model server")

// TestAgentExampleReplays runs the example agent (plugins/examples/agent)
// as make agent-demo does: on the responses recorded in the repository,
// with nothing sent. With -update-agent it first records them anew against
// the loopback model server.
func TestAgentExampleReplays(t *testing.T) {
	t.Parallel()
	root := testwasm.ModuleRoot(t)
	example := filepath.Join(root, "plugins/examples/agent")
	wasm, err := os.ReadFile(testwasm.BuildGo(t, example))
	require.NoError(t, err)
	src, err := os.ReadFile(filepath.Join(example, "task.hcl"))
	require.NoError(t, err)
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "agent.wasm"), wasm, 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "task.hcl"), src, 0o644))
	system, err := os.ReadFile(filepath.Join(example, "prompts", "system.md"))
	require.NoError(t, err)
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "prompts"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "prompts", "system.md"), system, 0o644))
	rec := filepath.Join(example, "recorded")

	if *updateAgent {
		srv := testmodel.New(t)
		live := strings.Replace(string(src), `"http://127.0.0.1:11434/v1"`, fmt.Sprintf("%q", srv.URL+"/v1"), 1)
		require.NoError(t, os.WriteFile(filepath.Join(dir, "live.hcl"), []byte(live), 0o644))
		require.NoError(t, os.RemoveAll(rec))
		require.NoError(t, os.Setenv("AGENT_API_KEY", "recording"))
		t.Cleanup(func() { os.Unsetenv("AGENT_API_KEY") })
		b := &cliBundle{dir: dir, home: filepath.Join(dir, "record-home")}
		code, out, errOut := b.lh(t, "--log-level", "off", "run", "--model-record", rec, filepath.Join(dir, "live.hcl"))
		require.Equal(t, 0, code, out+errOut)
	}

	b := &cliBundle{dir: dir, home: filepath.Join(dir, "home")}
	code, out, errOut := b.lh(t, "--log-level", "off", "run", "--model-replay", rec, filepath.Join(dir, "task.hcl"))
	require.Equal(t, 0, code, out+errOut)
	require.Contains(t, out, "succeeded: 1/1 units")
	require.Contains(t, out, `"answer": "tool said: Norway's capital is Oslo; the Akerselva river runs through it."`)
	require.Contains(t, out, `"turns": 2`)
	code, status, _ := b.lh(t, "status", taskID(out))
	require.Equal(t, 0, code)
	require.Contains(t, status, "models:      2 calls")
	require.Contains(t, status, "counts:      lookups 1")
}

// TestModelCallInFlightAtSIGKILLIsPossiblyBilled kills a real lhengine run
// with SIGKILL while its second model call is in flight (the loopback
// server holds the request until the process is dead), and resumes it. The
// resumed attempt finds the call's intent without a response: it counts the
// call as possibly billed, with the size of the request the server got,
// and sends it again. status and the task's JSON say so, and the call that
// completed before the kill is billed once (replayed, not sent again).
func TestModelCallInFlightAtSIGKILLIsPossiblyBilled(t *testing.T) {
	t.Parallel()
	bin := buildBinary(t)
	srv := testmodel.New(t)
	arrived, release := make(chan struct{}), make(chan struct{})
	var held sync.Once
	srv.Script = func(c testmodel.Conversation) testmodel.Reply {
		if len(c.Texts("tool")) == 0 {
			return testmodel.Reply{ToolCalls: []testmodel.ToolCall{{Name: "lookup", Arguments: json.RawMessage(`{"input":"Paris"}`)}}}
		}
		held.Do(func() {
			close(arrived)
			<-release
		})
		return testmodel.Reply{Text: "sunny"}
	}
	var releaseOnce sync.Once
	unblock := func() { releaseOnce.Do(func() { close(release) }) }
	t.Cleanup(unblock) // before the server's Close, which waits for its handlers

	dir := modelDir(t)
	home := filepath.Join(dir, "home")
	require.NoError(t, os.WriteFile(filepath.Join(dir, "task.hcl"), fmt.Appendf(nil, `
task "weather" {
  model "m" {
    provider     = "openai"
    base_url     = "%s/v1"
    model        = "test-model"
    input_price  = 2
    output_price = 10
    max_tokens   = 100
  }
  step "ask" {
    plugin = "model.wasm"
    models = ["m"]
    input  = { model = "m", key = "q", prompt = "weather in Paris", tools = true, fail_attempts = 0 }
  }
}
`, srv.URL), 0o644))

	run := exec.Command(bin, "--home", home, "--log-level", "off", "run", filepath.Join(dir, "task.hcl"))
	var stdout strings.Builder
	run.Stdout, run.Stderr = &stdout, &stdout
	require.NoError(t, run.Start())
	exited := make(chan error, 1)
	go func() { exited <- run.Wait() }()
	select {
	case <-arrived:
	case err := <-exited:
		t.Fatalf("the run ended before its second model call arrived: %v\n%s", err, stdout.String())
	case <-time.After(2 * time.Minute):
		t.Fatal("the second model call did not arrive within 2 minutes")
	}
	require.NoError(t, run.Process.Kill()) // SIGKILL
	err := <-exited
	var ee *exec.ExitError
	require.ErrorAs(t, err, &ee)
	require.True(t, ee.Sys().(syscall.WaitStatus).Signaled(), "killed, not exited: %v", err)
	unblock()
	id := taskID(stdout.String())
	require.Len(t, id, 26, stdout.String())

	out, killed := runCrashing(t, bin, home, "", nil, "resume", id)
	require.False(t, killed)
	require.Contains(t, out, "succeeded", out)

	// The server got the tool call once and the held call twice: the send
	// cut off by the kill and the resumed attempt's. The server records a
	// request when its handler returns, and the held handler returns on its
	// own time after the release.
	require.Eventually(t, func() bool { return len(srv.Requests()) == 3 }, time.Minute, time.Millisecond)
	sent := map[string]int{}
	for _, r := range srv.Requests() {
		sent[string(r.Body)]++
	}
	require.Len(t, sent, 2, "the first call once, the held one twice, as it was")
	heldBytes := 0
	for body, n := range sent {
		if n == 2 {
			heldBytes = len(body)
		}
	}
	require.NotZero(t, heldBytes, "the held call was sent twice")

	status, _ := runCrashing(t, bin, home, "", nil, "status", id)
	require.Contains(t, status, "models:      2 calls", status)
	require.Contains(t, status, fmt.Sprintf("1 possibly billed (%d request bytes", heldBytes), status)

	js, _ := runCrashing(t, bin, home, "", nil, "-o", "json", "status", id)
	var rep struct {
		Task struct {
			ModelUsage ledger.ModelUsage `json:"model_usage"`
		} `json:"task"`
	}
	require.NoError(t, json.Unmarshal([]byte(js), &rep), js)
	u := rep.Task.ModelUsage
	require.EqualValues(t, 2, u.Calls, "each answered call billed once")
	require.Equal(t, int64(1), u.PossiblyBilled.Calls)
	require.Equal(t, int64(heldBytes), u.PossiblyBilled.RequestBytes)
	// At most one token per request byte in, max_tokens out.
	require.InDelta(t, (float64(heldBytes)*2+100*10)/1e6, u.PossiblyBilled.MaxCost, 1e-12)

	withStore(t, home, func(r ledger.Reader) {
		events, err := r.Events(id, 0, 0)
		require.NoError(t, err)
		var kinds []string
		for _, ev := range events {
			if ev.Type != ledger.EvModelCall {
				continue
			}
			switch {
			case ev.Model.PossiblyBilled:
				require.Equal(t, "q-2", ev.Model.Key)
				require.Equal(t, int64(heldBytes), ev.Model.RequestBytes)
				require.Contains(t, ev.Message, "possibly billed")
				kinds = append(kinds, "possibly billed")
			case ev.Model.Replayed:
				kinds = append(kinds, "replayed")
			default:
				kinds = append(kinds, "billed")
			}
		}
		require.Equal(t, []string{"billed", "replayed", "possibly billed", "billed"}, kinds)
		calls, err := r.ModelCalls(id)
		require.NoError(t, err)
		require.Len(t, calls, 2, "two responses in the journal, no intent left")
	})
}
