package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lhengine/lhengine/internal/testwasm"
)

// TestPluginNewBuildsAndRuns writes a project per language with the real
// binary into an empty folder outside the repository, builds it with one
// make and runs its task.hcl: the plugin answers {"echo": INPUT, "lang":
// LANG}, and its count and note reach the task. Then the example of the
// language's guide (plugins/sdk/LANG/README.md) builds in its place.
func TestPluginNewBuildsAndRuns(t *testing.T) {
	t.Parallel()
	bin := buildBinary(t)
	langs := map[string]func(t *testing.T) []string{ // the toolchain check, and the environment make runs with
		"go": func(t *testing.T) []string { testwasm.NeedTool(t, "install Go 1.22 or later", "go"); return nil },
		"c": func(t *testing.T) []string {
			testwasm.NeedTool(t, testwasm.InstallHint, "clang-14")
			return nil
		},
		"rust": func(t *testing.T) []string { testwasm.NeedRustc(t); return []string{"RUSTC=" + testwasm.Rustc} },
		// npm install reads the packages scripts/deps.sh cached, offline:
		// the test reaches no registry.
		"assemblyscript": func(t *testing.T) []string {
			npm := testwasm.NPMDir(t)
			return []string{"npm_config_cache=" + filepath.Join(npm, "cache"), "npm_config_offline=true"}
		},
	}
	for lang, need := range langs {
		t.Run(lang, func(t *testing.T) {
			t.Parallel()
			env := need(t)
			root := t.TempDir()
			require.NotContains(t, root, testwasm.ModuleRoot(t), "the project is made outside the repository")
			name := "hello-" + lang
			lh := func(dir string, args ...string) (string, string, error) {
				cmd := exec.Command(bin, args...)
				cmd.Dir = dir
				var out, errb strings.Builder
				cmd.Stdout, cmd.Stderr = &out, &errb
				err := cmd.Run()
				return out.String(), errb.String(), err
			}
			out, errOut, err := lh(root, "plugin", "new", name, "--lang", lang)
			require.NoError(t, err, errOut)
			require.Contains(t, out, "wrote "+lang+" plugin "+name)
			dir := filepath.Join(root, name)
			for _, f := range []string{"Makefile", "README.md", "task.hcl"} {
				require.FileExists(t, filepath.Join(dir, f))
			}
			if lang == "assemblyscript" {
				pkg, err := os.ReadFile(filepath.Join(dir, "package.json"))
				require.NoError(t, err)
				require.Contains(t, string(pkg), `"assemblyscript": "`+testwasm.ASCVersion+`"`)
				require.Contains(t, string(pkg), `"@assemblyscript/wasi-shim": "`+testwasm.WASIShimVersion+`"`)
			}

			mk := exec.Command("make")
			mk.Dir = dir
			mk.Env = append(os.Environ(), env...)
			b, err := mk.CombinedOutput()
			require.NoError(t, err, "make:\n%s", b)
			require.FileExists(t, filepath.Join(dir, name+".wasm"))

			// Tried alone, without a home, before a task runs it.
			out, errOut, err = lh(dir, "-o", "json", "plugin", "test", name+".wasm", "--input", `{"greeting":"hi"}`)
			require.NoError(t, err, "plugin test:\n%s\n%s", out, errOut)
			var tried struct {
				Result    struct{ Output json.RawMessage }
				HostCalls []struct{ Name string } `json:"host_calls"`
			}
			require.NoError(t, json.Unmarshal([]byte(out), &tried), out)
			require.JSONEq(t, `{"echo":{"greeting":"hi"},"lang":"`+lang+`"}`, string(tried.Result.Output))
			var calls []string
			for _, c := range tried.HostCalls {
				calls = append(calls, c.Name)
			}
			require.Contains(t, calls, "progress.count", "the template counts")
			require.NoDirExists(t, filepath.Join(dir, ".lhengine"), "plugin test makes no home")

			out, errOut, err = lh(dir, "--home", filepath.Join(root, "home"), "run", "task.hcl")
			require.NoError(t, err, "run:\n%s\n%s", out, errOut)
			_, js, ok := strings.Cut(out, "output of step \""+name+"\":\n")
			require.True(t, ok, out)
			require.JSONEq(t, `{"echo":{"greeting":"hello","n":3},"lang":"`+lang+`"}`, js)

			// The progress count and the note reached the task.
			id := taskID(out)
			out, errOut, err = lh(dir, "--home", filepath.Join(root, "home"), "status", id)
			require.NoError(t, err, errOut)
			require.Contains(t, out, "echoes")
			require.Contains(t, out, name+" echoed its input")

			// The example of the language's guide builds in the project.
			guide, err := os.ReadFile(filepath.Join(testwasm.ModuleRoot(t), "plugins", "sdk", lang, "README.md"))
			require.NoError(t, err)
			fence := map[string]string{"go": "go", "c": "c", "rust": "rust", "assemblyscript": "ts"}[lang]
			_, example, ok := strings.Cut(string(guide), "## A plugin\n\n```"+fence+"\n")
			require.True(t, ok, "the guide has an example under ## A plugin")
			example, _, _ = strings.Cut(example, "```\n")
			src := map[string]string{"go": "main.go", "c": "main.c", "rust": "main.rs", "assemblyscript": "assembly/index.ts"}[lang]
			require.NoError(t, os.WriteFile(filepath.Join(dir, src), []byte(example), 0o644))
			require.NoError(t, os.Remove(filepath.Join(dir, name+".wasm")))
			mk = exec.Command("make")
			mk.Dir = dir
			mk.Env = append(os.Environ(), env...)
			b, err = mk.CombinedOutput()
			require.NoError(t, err, "make of the guide's example:\n%s", b)
			require.FileExists(t, filepath.Join(dir, name+".wasm"))
		})
	}
}

// TestPluginNewRefuses: a bad name, an unknown language (with the closest
// one suggested) and a folder that is not empty are refused, and nothing
// is written.
func TestPluginNewRefuses(t *testing.T) {
	t.Parallel()
	b := &cliBundle{dir: t.TempDir()}
	b.home = filepath.Join(b.dir, "home")
	full := filepath.Join(b.dir, "full")
	require.NoError(t, os.MkdirAll(full, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(full, "keep.txt"), []byte("mine"), 0o644))
	for _, tc := range []struct {
		args []string
		code int // 2: a bad command line
		want string
	}{
		{[]string{"Bad Name", "--lang", "go"}, 2, `plugin name "Bad Name"`},
		{[]string{"../up", "--lang", "go"}, 2, `plugin name "../up"`},
		{[]string{"ok", "--lang", "rsut"}, 2, `did you mean "rust"?`},
		{[]string{"ok", "--lang", "assembly"}, 2, `did you mean "assemblyscript"?`},
		{[]string{"ok", "--lang", "cobol"}, 2, `unknown --lang "cobol" (one of go, c, rust, assemblyscript)`},
		{[]string{"ok"}, 2, "--lang is required"},
		{[]string{"ok", "--lang", "c", "--dir", full}, 1, "is not empty"},
	} {
		code, _, errOut := b.lh(t, append([]string{"plugin", "new"}, tc.args...)...)
		require.Equal(t, tc.code, code, tc.args)
		require.Contains(t, errOut, tc.want, tc.args)
	}
	entries, err := os.ReadDir(full)
	require.NoError(t, err)
	require.Len(t, entries, 1)
	_, err = os.Stat(filepath.Join(b.dir, "ok"))
	require.True(t, os.IsNotExist(err))
}
