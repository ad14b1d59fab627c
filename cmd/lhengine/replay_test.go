package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lhengine/lhengine/api"
	"github.com/lhengine/lhengine/internal/crashpoint"
	"github.com/lhengine/lhengine/internal/testwasm"
)

// agentCopy copies the example agent (plugins/examples/agent: its task,
// plugin, system prompt and recorded responses) into a fresh folder and
// returns the folder and the copy of the recordings.
func agentCopy(t *testing.T) (dir, rec string) {
	t.Helper()
	example := filepath.Join(testwasm.ModuleRoot(t), "plugins/examples/agent")
	wasm, err := os.ReadFile(testwasm.BuildGo(t, example))
	require.NoError(t, err)
	dir = t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "agent.wasm"), wasm, 0o644))
	for _, name := range []string{"task.hcl", "prompts/system.md"} {
		b, err := os.ReadFile(filepath.Join(example, name))
		require.NoError(t, err)
		require.NoError(t, os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), b, 0o644))
	}
	rec = filepath.Join(dir, "recorded")
	require.NoError(t, os.Mkdir(rec, 0o755))
	files, err := filepath.Glob(filepath.Join(example, "recorded", "*.json"))
	require.NoError(t, err)
	require.NotEmpty(t, files)
	for _, f := range files {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(rec, filepath.Base(f)), b, 0o644))
	}
	return dir, rec
}

// replaySetSum is the sha256 a manifest pins for the recordings in rec:
// over the sorted "<request sha256> <file sha256>" lines.
func replaySetSum(t *testing.T, rec string) (sum string, n int) {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(rec, "*.json"))
	require.NoError(t, err)
	var lines []string
	for _, f := range files {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		s := sha256.Sum256(b)
		lines = append(lines, strings.TrimSuffix(filepath.Base(f), ".json")+" "+hex.EncodeToString(s[:])+"\n")
	}
	slices.Sort(lines)
	s := sha256.Sum256([]byte(strings.Join(lines, "")))
	return hex.EncodeToString(s[:]), len(files)
}

func textSum(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// TestReplaySetAndPromptArePinnedAtSubmit runs the example agent on its
// recordings in a real lhengine process and kills it with SIGKILL once
// the first model response is journaled; then the recordings folder is
// deleted and the prompt file rewritten. The manifest still shows the
// model, the prompt and the replay set as submitted (text and JSON), and
// `lhengine resume` finishes the conversation from the recordings kept in
// the store, under the prompt text pinned at submit.
func TestReplaySetAndPromptArePinnedAtSubmit(t *testing.T) {
	t.Parallel()
	bin := buildBinary(t)
	dir, rec := agentCopy(t)
	home := filepath.Join(dir, "home")
	setSum, n := replaySetSum(t, rec)
	promptPath := filepath.Join(dir, "prompts", "system.md")
	system, err := os.ReadFile(promptPath)
	require.NoError(t, err)

	lh := func(crashAt string, args ...string) (string, bool) {
		return runCrashing(t, bin, home, crashAt, nil, args...)
	}

	out, killed := lh(crashpoint.ModelAfterRecord+"@1", "run", "--model-replay", rec, filepath.Join(dir, "task.hcl"))
	require.True(t, killed, "the run must die once the first response is journaled:\n%s", out)
	id := taskID(out)
	require.Len(t, id, 26, out)

	// Nothing the task was submitted with is read again.
	require.NoError(t, os.RemoveAll(rec))
	require.NoError(t, os.WriteFile(promptPath, []byte("Answer in French.\n"), 0o644))

	shown, _ := lh("", "manifest", id)
	for _, want := range []string{
		"model assistant", "openai", "llama3.1:8b", "http://127.0.0.1:11434/v1", "key $AGENT_API_KEY", "prices 0.15/0.6 per 1M tokens",
		"prompt system", textSum(string(system)), promptPath,
		fmt.Sprintf("replay set: %d recordings", n), "from " + rec + ", sha256 " + setSum,
	} {
		require.Contains(t, shown, want)
	}
	require.Regexp(t, regexp.MustCompile(`prompt system +1 +`+textSum(string(system))), shown, "name, version, sha256")
	require.NotContains(t, shown, "Answer the user's question", "texts only with --text")
	withText, _ := lh("", "manifest", "--text", id)
	require.Contains(t, withText, "# prompt system 1 (sha256 "+textSum(string(system))+")\n"+strings.TrimRight(string(system), "\n"))

	raw, _ := lh("", "-o", "json", "manifest", id)
	var m api.Manifest
	require.NoError(t, json.Unmarshal([]byte(raw), &m), raw)
	require.Len(t, m.Summary.Models, 1)
	md := m.Summary.Models[0]
	require.Equal(t, []string{"assistant", "openai", "llama3.1:8b", "AGENT_API_KEY"}, []string{md.Name, md.Provider, md.ID, md.APIKeyEnv})
	require.Equal(t, []api.PromptSummary{{Name: "system", Version: "1", File: promptPath, SHA256: textSum(string(system))}}, m.Summary.Prompts)
	require.Len(t, m.Prompts, 1)
	require.Equal(t, string(system), m.Prompts[0].Text)
	require.NotNil(t, m.Summary.ModelReplay)
	require.Equal(t, rec, m.Summary.ModelReplay.Dir)
	require.Equal(t, n, m.Summary.ModelReplay.Recordings)
	require.Equal(t, setSum, m.Summary.ModelReplay.SHA256)

	out, killed = lh("", "resume", id)
	require.False(t, killed)
	require.Contains(t, out, "succeeded: 1/1 units", out)
	require.Contains(t, out, `"answer": "tool said: Norway's capital is Oslo; the Akerselva river runs through it."`)
	require.Contains(t, out, `"replayed": 1`, "the first turn from the journal, the second from the pinned recordings")
	require.Contains(t, out, `"turns": 2`)
}

// TestReplayThroughServe submits the example agent with --model-replay to
// a home that `lhengine serve` owns, deletes the recordings folder at once,
// and follows the task to its end: serve's workers answer the calls from
// the recordings kept with the task, sending nothing.
func TestReplayThroughServe(t *testing.T) {
	t.Parallel()
	b := setupProcs(t)
	dir, rec := agentCopy(t)
	b.serve(t)

	id := submit(t, b, "--model-replay", rec, filepath.Join(dir, "task.hcl"))
	require.NoError(t, os.RemoveAll(rec))

	lhOK(t, b, "events", "--follow", id) // the task succeeds
	require.Contains(t, lhOK(t, b, "outputs", id), "tool said: Norway's capital is Oslo")
	require.Contains(t, lhOK(t, b, "manifest", id), "replay set: 2 recordings")

	// Recording is an option of the process that works the task.
	code, _, errOut := b.lh(t, "run", "--model-record", filepath.Join(dir, "new"), filepath.Join(dir, "task.hcl"))
	require.NotEqual(t, 0, code)
	require.Contains(t, errOut, "--model-record applies to the tasks this process works")
	code, _, errOut = b.lh(t, "submit", "--model-replay", filepath.Join(dir, "missing"), filepath.Join(dir, "task.hcl"))
	require.NotEqual(t, 0, code)
	require.Contains(t, errOut, "--model-replay")
}
