package plugins

import (
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestGoSDKCopyIsCurrent: the Go SDK a new project gets is the SDK's
// source, every non-test file of it (run `go generate ./plugins` after
// changing the SDK).
func TestGoSDKCopyIsCurrent(t *testing.T) {
	t.Parallel()
	var want []string
	for _, pattern := range []string{"sdk/go/*.go", "sdk/go/abi/*.go"} {
		ms, err := filepath.Glob(pattern)
		require.NoError(t, err)
		for _, m := range ms {
			if !strings.HasSuffix(m, "_test.go") {
				want = append(want, filepath.ToSlash(strings.TrimPrefix(m, "sdk/go/")))
			}
		}
	}
	files, err := Project("x", "go")
	require.NoError(t, err)
	got := map[string][]byte{}
	for _, f := range files {
		if rel, ok := strings.CutPrefix(f.Path, "lhengine-sdk/"); ok && strings.HasSuffix(rel, ".go") {
			got[rel] = f.Data
		}
	}
	var gotNames []string
	for n := range got {
		gotNames = append(gotNames, n)
	}
	sort.Strings(want)
	sort.Strings(gotNames)
	require.Equal(t, want, gotNames, "the copy has the SDK's files; run go generate ./plugins")
	for _, n := range want {
		b, err := os.ReadFile(filepath.Join("sdk/go", n))
		require.NoError(t, err)
		require.Equal(t, string(b), string(got[n]), "%s differs from the SDK's; run go generate ./plugins", n)
	}
	mod, err := os.ReadFile("sdk/go/go.mod")
	require.NoError(t, err)
	require.Contains(t, string(mod), "\ngo "+sdkGoVersion+"\n", "sdkGoVersion is the SDK's go directive")
}

// TestProjectFiles: each language's project has its source, Makefile,
// README and task.hcl with the name filled in, and the SDK.
func TestProjectFiles(t *testing.T) {
	t.Parallel()
	sdk := map[string]string{"go": "lhengine-sdk/sdk.go", "c": "lhengine-sdk/lhengine.h", "rust": "lhengine-sdk/lib.rs",
		"assemblyscript": "lhengine-sdk/assembly/index.ts"}
	for _, lang := range Languages() {
		files, err := Project("my_plugin", lang)
		require.NoError(t, err, lang)
		paths := map[string]string{}
		for _, f := range files {
			paths[f.Path] = string(f.Data)
		}
		for _, p := range []string{"Makefile", "README.md", "task.hcl", sdk[lang]} {
			require.Contains(t, paths, p, lang)
		}
		require.Contains(t, paths["Makefile"], "my_plugin.wasm", lang)
		require.Contains(t, paths["task.hcl"], `plugin = "my_plugin.wasm"`, lang)
		for p, data := range paths {
			if !strings.HasPrefix(p, "lhengine-sdk/") {
				require.NotContains(t, data, "__NAME__", p)
				require.NotContains(t, data, "__LANG__", p)
			}
		}
	}
	_, err := Project("my_plugin", "cobol")
	require.ErrorContains(t, err, `unknown language "cobol"`)
	_, err = Project("../x", "go")
	require.ErrorContains(t, err, "plugin name")
}
