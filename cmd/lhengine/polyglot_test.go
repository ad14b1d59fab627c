package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lhengine/lhengine/internal/testwasm"
)

// TestPolyglotExample builds the four plugins of plugins/examples/polyglot
// (Go, Rust, AssemblyScript and C, each with its SDK) as make polyglot-demo
// does and runs its task: every step reads the output of the one before,
// and the last one's numbers are those of the text.
func TestPolyglotExample(t *testing.T) {
	t.Parallel()
	root := testwasm.ModuleRoot(t)
	ex := filepath.Join(root, "plugins/examples/polyglot")
	dir := t.TempDir()
	for name, wasm := range map[string]string{
		"words.wasm":   testwasm.BuildGo(t, filepath.Join(ex, "words")),
		"lengths.wasm": testwasm.BuildRust(t, filepath.Join(ex, "lengths/main.rs")),
		"stats.wasm":   testwasm.BuildAssemblyScript(t, filepath.Join(ex, "stats/index.ts")),
		"report.wasm":  testwasm.BuildC(t, filepath.Join(ex, "report/report.c")),
	} {
		b, err := os.ReadFile(wasm)
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), b, 0o644))
	}
	task, err := os.ReadFile(filepath.Join(ex, "task.hcl"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "task.hcl"), task, 0o644))
	b := &cliBundle{dir: dir, home: filepath.Join(dir, "home")}

	code, out, errOut := b.lh(t, "run", filepath.Join(dir, "task.hcl"))
	require.Equal(t, exitOK, code, errOut)
	require.Contains(t, out, "succeeded: 4/4 units")
	require.Contains(t, out, `"summary": "14 words, 67 letters, 4.8 letters a word, the longest 11"`)

	code, out, errOut = b.lh(t, "run", filepath.Join(dir, "task.hcl"), "--var", "text=Über naïve café, déjà-vu!")
	require.Equal(t, exitOK, code, errOut)
	id := taskID(out)
	code, out, errOut = b.lh(t, "-o", "json", "outputs", id)
	require.Equal(t, exitOK, code, errOut)
	var outputs map[string]json.RawMessage
	require.NoError(t, json.Unmarshal([]byte(out), &outputs), out)
	want := map[string]string{
		"words":   `{"lang":"go","words":["über","naïve","café","déjà","vu"]}`,
		"lengths": `{"lang":"rust","lengths":[4,5,4,4,2]}`,
		"stats":   `{"lang":"assemblyscript","total":19,"longest":5}`,
		"report":  `{"lang":"c","summary":"5 words, 19 letters, 3.8 letters a word, the longest 5","langs":["go","rust","assemblyscript","c"]}`,
	}
	for step, w := range want {
		require.Contains(t, outputs, step, out)
		require.JSONEq(t, w, string(outputs[step]), step)
	}
}
