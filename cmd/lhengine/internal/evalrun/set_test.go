package evalrun

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/stretchr/testify/require"

	"github.com/lhengine/lhengine/ledger"
)

// setDir is a directory with a task file, a verifier "plugin" and a policy
// directory, which set files in it may name.
func setDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "task.hcl"), []byte(`task "t" {
  variable "seed" { default = 0 }
  step "a" {
    plugin = "a.wasm"
  }
}
`), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "check.wasm"), []byte("\x00asm"), 0o644))
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "policies"), 0o755))
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "recorded"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "recorded", strings.Repeat("ab", 32)+".json"), []byte("{}"), 0o644))
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "empty"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "empty", "notes.txt"), []byte("no recordings"), 0o644))
	return dir
}

const goodSet = `eval "demo" {
  description = "a set"
  policies    = ["critic@2", "summary"]
  policy_dirs = ["policies"]
  ablate      = ["critic", "summary@1"]

  case "one" {
    task   = "task.hcl"
    vars   = { topic = "x", n = 3, list = ["a", 1], obj = { k = true } }
    repeat = 2
    crash  = "unit.after_commit@2"
    verify {
      expect          = { text = "hi", n = 1 }
      output_includes = ["hi"]
      output_excludes = ["TODO"]
      plugin          = "check.wasm"
    }
  }
  case "two" {
    task         = "task.hcl"
    model_replay = "recorded"
    verify {
      output_excludes = ["TODO"]
    }
  }
}
`

func TestParseSet(t *testing.T) {
	t.Parallel()
	dir := setDir(t)
	file := filepath.Join(dir, "set.hcl")
	s, diags := ParseSet(file, []byte(goodSet))
	require.False(t, diags.HasErrors(), diags.Error())
	require.Equal(t, "demo", s.Name)
	require.Equal(t, []string{"critic@2", "summary"}, s.Policies)
	require.Equal(t, []string{filepath.Join(dir, "policies")}, s.PolicyDirs)
	require.Equal(t, []string{"critic", "summary@1"}, s.Ablate)
	require.Len(t, s.Cases, 2)
	c := s.Cases[0]
	require.Equal(t, filepath.Join(dir, "task.hcl"), c.TaskPath)
	require.Equal(t, map[string]string{"topic": "x", "n": "3", "list": `["a",1]`, "obj": `{"k":true}`}, c.Vars)
	require.Equal(t, 2, c.Repeat)
	require.Equal(t, "unit.after_commit@2", c.Crash)
	require.JSONEq(t, `{"text":"hi","n":1}`, string(c.Verify.Expect))
	require.Equal(t, []string{"hi"}, c.Verify.Includes)
	require.Equal(t, []string{"TODO"}, c.Verify.Excludes)
	require.Equal(t, filepath.Join(dir, "check.wasm"), c.Verify.PluginPath)
	require.Equal(t, 1, s.Cases[1].Repeat)
	require.Empty(t, c.ModelReplayPath)
	require.Equal(t, "recorded", s.Cases[1].ModelReplay)
	require.Equal(t, filepath.Join(dir, "recorded"), s.Cases[1].ModelReplayPath)

	states, err := States(s, []string{"critic", "other@3"})
	require.NoError(t, err)
	var names []string
	for _, st := range states {
		names = append(names, st.Name)
	}
	require.Equal(t, []string{"baseline", "without critic", "summary@1", "other@3"}, names)
	require.Equal(t, []string{"critic@2", "summary"}, states[0].Policies)
	require.Equal(t, []string{"summary"}, states[1].Policies)
	require.Equal(t, []string{"critic"}, states[1].Without)
	require.Equal(t, []string{"critic@2", "summary@1"}, states[2].Policies)
	require.Equal(t, []string{"critic@2", "summary", "other@3"}, states[3].Policies)

	src, err := os.ReadFile(filepath.Join(dir, "task.hcl"))
	require.NoError(t, err)
	require.True(t, declaresVariable("task.hcl", src, "seed"))
	require.False(t, declaresVariable("task.hcl", src, "topic"))
}

// TestSetDiagnostics: every mistake of the table in specs/policies.md
// ("Ablation evals") is reported with its summary at the place it names.
func TestSetDiagnostics(t *testing.T) {
	t.Parallel()
	dir := setDir(t)
	okCase := `case "c" {
    task = "task.hcl"
    verify { output_excludes = ["x"] }
  }`
	tests := []struct {
		name, src string
		summary   string
		at        string // line:col of the subject
	}{
		{"syntax", "eval \"e\" {\n  case \"c\" {\n", "Unclosed configuration block", "2:12"},
		{"no eval block", "# nothing\n", "Missing eval block", "1:1"},
		{"two eval blocks", "eval \"a\" {\n  " + okCase + "\n}\neval \"b\" {\n}\n", "Duplicate eval block", "7:1"},
		{"unknown attribute", "eval \"e\" {\n  colour = 1\n  " + okCase + "\n}\n", "Unsupported argument", "2:3"},
		{"unknown block", "eval \"e\" {\n  thing {}\n  " + okCase + "\n}\n", "Unsupported block type", "2:3"},
		{"bad eval name", "eval \"a b\" {\n  " + okCase + "\n}\n", "Invalid eval name", "1:6"},
		{"no case", "eval \"e\" {\n}\n", "Missing case block", "1:1"},
		{"bad case name", "eval \"e\" {\n  case \"1x\" {\n    task = \"task.hcl\"\n    verify { output_excludes = [\"x\"] }\n  }\n}\n", "Invalid case name", "2:8"},
		{"duplicate case", "eval \"e\" {\n  " + okCase + "\n  " + okCase + "\n}\n", "Duplicate case", "6:8"},
		{"missing task", "eval \"e\" {\n  case \"c\" {\n    verify { output_excludes = [\"x\"] }\n  }\n}\n", "Missing required argument", "2:12"},
		{"task not found", "eval \"e\" {\n  case \"c\" {\n    task = \"nope.hcl\"\n    verify { output_excludes = [\"x\"] }\n  }\n}\n", "Cannot read task file", "3:12"},
		{"task not a string", "eval \"e\" {\n  case \"c\" {\n    task = [1]\n    verify { output_excludes = [\"x\"] }\n  }\n}\n", "Incorrect attribute value type", "3:12"},
		{"reference", "eval \"e\" {\n  case \"c\" {\n    task = var.x\n    verify { output_excludes = [\"x\"] }\n  }\n}\n", "Variables not allowed", "3:12"},
		{"bad policy ref", "eval \"e\" {\n  policies = [\"ok\", \"a@0\"]\n  " + okCase + "\n}\n", "Invalid policy reference", "2:21"},
		{"duplicate policy", "eval \"e\" {\n  policies = [\"a\", \"a@2\"]\n  " + okCase + "\n}\n", "Duplicate policy", "2:20"},
		{"duplicate ablation", "eval \"e\" {\n  ablate = [\"a\", \"a\"]\n  " + okCase + "\n}\n", "Duplicate ablation", "2:18"},
		{"missing policy dir", "eval \"e\" {\n  policy_dirs = [\"nope\"]\n  " + okCase + "\n}\n", "Cannot read policy directory", "2:18"},
		{"vars not an object", "eval \"e\" {\n  case \"c\" {\n    task = \"task.hcl\"\n    vars = [1]\n    verify { output_excludes = [\"x\"] }\n  }\n}\n", "Incorrect attribute value type", "4:12"},
		{"bad variable name", "eval \"e\" {\n  case \"c\" {\n    task = \"task.hcl\"\n    vars = { \"a b\" = 1 }\n    verify { output_excludes = [\"x\"] }\n  }\n}\n", "Invalid variable name", "4:14"},
		{"repeat zero", "eval \"e\" {\n  case \"c\" {\n    task = \"task.hcl\"\n    repeat = 0\n    verify { output_excludes = [\"x\"] }\n  }\n}\n", "Invalid repeat count", "4:14"},
		{"repeat fraction", "eval \"e\" {\n  case \"c\" {\n    task = \"task.hcl\"\n    repeat = 1.5\n    verify { output_excludes = [\"x\"] }\n  }\n}\n", "Invalid repeat count", "4:14"},
		{"bad crash point", "eval \"e\" {\n  case \"c\" {\n    task = \"task.hcl\"\n    crash = \"unit.after@2\"\n    verify { output_excludes = [\"x\"] }\n  }\n}\n", "Invalid crash point", "4:13"},
		{"bad crash count", "eval \"e\" {\n  case \"c\" {\n    task = \"task.hcl\"\n    crash = \"unit.after_commit@0\"\n    verify { output_excludes = [\"x\"] }\n  }\n}\n", "Invalid crash point", "4:13"},
		{"no verify", "eval \"e\" {\n  case \"c\" {\n    task = \"task.hcl\"\n  }\n}\n", "Missing verify block", "2:3"},
		{"two verify", "eval \"e\" {\n  case \"c\" {\n    task = \"task.hcl\"\n    verify { output_excludes = [\"x\"] }\n    verify { output_excludes = [\"y\"] }\n  }\n}\n", "Duplicate verify block", "5:5"},
		{"empty verify", "eval \"e\" {\n  case \"c\" {\n    task = \"task.hcl\"\n    verify {}\n  }\n}\n", "Empty verify", "4:5"},
		{"empty text", "eval \"e\" {\n  case \"c\" {\n    task = \"task.hcl\"\n    verify { output_includes = [\"a\", \"\"] }\n  }\n}\n", "Empty text", "4:38"},
		{"excludes not strings", "eval \"e\" {\n  case \"c\" {\n    task = \"task.hcl\"\n    verify { output_excludes = [1] }\n  }\n}\n", "Incorrect attribute value type", "4:33"},
		{"plugin not found", "eval \"e\" {\n  case \"c\" {\n    task = \"task.hcl\"\n    verify { plugin = \"nope.wasm\" }\n  }\n}\n", "Cannot read verifier plugin", "4:23"},
		{"replay folder missing", "eval \"e\" {\n  case \"c\" {\n    task = \"task.hcl\"\n    model_replay = \"nope\"\n    verify { output_excludes = [\"x\"] }\n  }\n}\n", "Cannot read replay set", "4:20"},
		{"replay folder empty", "eval \"e\" {\n  case \"c\" {\n    task = \"task.hcl\"\n    model_replay = \"empty\"\n    verify { output_excludes = [\"x\"] }\n  }\n}\n", "Empty replay set", "4:20"},
		{"replay folder a file", "eval \"e\" {\n  case \"c\" {\n    task = \"task.hcl\"\n    model_replay = \"task.hcl\"\n    verify { output_excludes = [\"x\"] }\n  }\n}\n", "Cannot read replay set", "4:20"},
		{"replay not a string", "eval \"e\" {\n  case \"c\" {\n    task = \"task.hcl\"\n    model_replay = true\n    verify { output_excludes = [\"x\"] }\n  }\n}\n", "Incorrect attribute value type", "4:20"},
		{"nesting", "eval \"e\" {\n  case \"c\" {\n    task = \"task.hcl\"\n    vars = { a = " + strings.Repeat("[", 70) + strings.Repeat("]", 70) + " }\n  }\n}\n", "Nesting too deep", "4:79"},
		{"number", "eval \"e\" {\n  case \"c\" {\n    task = \"task.hcl\"\n    vars = { a = 1e99999 }\n    verify { output_excludes = [\"x\"] }\n  }\n}\n", "Number too large", "4:18"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			file := filepath.Join(dir, "set.hcl")
			s, diags := ParseSet(file, []byte(tc.src))
			require.True(t, diags.HasErrors(), "no error for:\n%s", tc.src)
			require.Nil(t, s)
			var found *hcl.Diagnostic
			for _, d := range diags {
				if d.Summary == tc.summary {
					found = d
					break
				}
			}
			require.NotNil(t, found, "want %q, got %v", tc.summary, diags)
			require.NotNil(t, found.Subject, tc.summary)
			require.Equal(t, file, found.Subject.Filename)
			require.Equal(t, tc.at, posString(found.Subject.Start), "%s: %s", tc.summary, found.Subject)

			var buf bytes.Buffer
			require.NoError(t, WriteDiagnostics(&buf, map[string][]byte{file: []byte(tc.src)}, diags))
			require.Contains(t, buf.String(), file+":"+tc.at+": error: "+tc.summary)
		})
	}
}

func posString(p hcl.Pos) string { return fmt.Sprintf("%d:%d", p.Line, p.Column) }

func TestCheck(t *testing.T) {
	t.Parallel()
	out := json.RawMessage(`{"text": "## Findings\nall done", "n": 1, "tags": ["a", "TODO later"]}`)
	for _, tc := range []struct {
		name string
		v    Verify
		pass bool
		why  string
	}{
		{"expect equal, other order", Verify{Expect: json.RawMessage(`{"n":1,"tags":["a","TODO later"],"text":"## Findings\nall done"}`)}, true, ""},
		{"expect differs", Verify{Expect: json.RawMessage(`{"n":2}`)}, false, "the output is not the expected one"},
		{"includes", Verify{Includes: []string{"## Findings", "later"}}, true, ""},
		{"includes missing", Verify{Includes: []string{"Risks"}}, false, `no text of the output includes "Risks"`},
		{"excludes in a list", Verify{Excludes: []string{"TODO"}}, false, `the output includes "TODO"`},
		{"excludes keys are not texts", Verify{Excludes: []string{"tags"}}, true, ""},
	} {
		pass, why := Check(tc.v, out)
		require.Equal(t, tc.pass, pass, tc.name)
		require.Equal(t, tc.why, why, tc.name)
	}
}

// TestRanAgain: a unit committed before the crash that runs again in the
// same pass is found; one run again after its step is entered again (a
// repair pass) is not; nor is a unit that was not committed.
func TestRanAgain(t *testing.T) {
	t.Parallel()
	item := func(n int) *int { return &n }
	history := []ledger.Event{
		{Seq: 0, Type: ledger.EvSubmitted},
		{Seq: 1, Type: ledger.EvStepStarted, Step: "draft"},
		{Seq: 2, Type: ledger.EvUnitDone, Step: "draft", Item: item(0), Attempt: 1},
		{Seq: 3, Type: ledger.EvStepStarted, Step: "critic"},
		{Seq: 4, Type: ledger.EvUnitRetry, Step: "critic", Item: item(0), Attempt: 1},
	}
	// The crash came at seq 5.
	require.Empty(t, ranAgain(append(history,
		ledger.Event{Seq: 5, Type: ledger.EvUnitDone, Step: "critic", Item: item(0), Attempt: 3},
	), 5), "the critic was not committed")
	require.Empty(t, ranAgain(append(history,
		ledger.Event{Seq: 5, Type: ledger.EvRepair, Step: "critic", Item: item(0), Attempt: 2},
		ledger.Event{Seq: 6, Type: ledger.EvStepStarted, Step: "draft"},
		ledger.Event{Seq: 7, Type: ledger.EvUnitDone, Step: "draft", Item: item(0), Attempt: 2},
	), 5), "a repair pass runs the draft again")
	require.Equal(t, "unit draft[0] committed attempt 1 before the crash and ran again as attempt 2 (unit_done)", ranAgain(append(history,
		ledger.Event{Seq: 5, Type: ledger.EvUnitDone, Step: "draft", Item: item(0), Attempt: 2},
	), 5))
	// A pass entered before the crash forgets the earlier pass's commits.
	require.Empty(t, ranAgain(append(history,
		ledger.Event{Seq: 5, Type: ledger.EvStepStarted, Step: "draft"},
		ledger.Event{Seq: 6, Type: ledger.EvUnitDone, Step: "draft", Item: item(0), Attempt: 2},
	), 6))
}

func FuzzParseSet(f *testing.F) {
	f.Add([]byte(goodSet))
	f.Add([]byte("eval \"e\" {\n  case \"c\" {\n    task = \"task.hcl\"\n    vars = { a = [1, {b = null}] }\n    verify { expect = null }\n  }\n}\n"))
	if src, err := os.ReadFile("../../../../testdata/evals/critic.hcl"); err == nil {
		f.Add(src)
	}
	dir := f.TempDir()
	require.NoError(f, os.WriteFile(filepath.Join(dir, "task.hcl"), []byte("task \"t\" {}\n"), 0o644))
	f.Fuzz(func(t *testing.T, src []byte) {
		file := filepath.Join(dir, "set.hcl")
		s, diags := ParseSet(file, src)
		for _, d := range diags {
			if d.Summary == "Internal error while parsing the eval set" {
				t.Fatalf("parser bug: %s", d.Detail)
			}
			if d.Severity == hcl.DiagError && d.Subject == nil && d.Summary != "Cannot read eval set" {
				t.Fatalf("an error without a place: %s", d.Summary)
			}
		}
		if diags.HasErrors() != (s == nil) {
			t.Fatalf("a set with errors, or none without: %v", diags)
		}
		var buf bytes.Buffer
		if err := WriteDiagnostics(&buf, map[string][]byte{file: src}, diags); err != nil {
			t.Fatal(err)
		}
		if s != nil {
			if _, err := States(s, nil); err != nil {
				t.Fatalf("a parsed set's ablations do not make states: %v", err)
			}
		}
	})
}
