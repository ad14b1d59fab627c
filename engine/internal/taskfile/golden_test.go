package taskfile

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/stretchr/testify/require"

	"github.com/lhengine/lhengine/internal/testhcl"
)

var update = flag.Bool("update", false, "rewrite the .golden files of the error fixtures")

// testdata is the repository's testdata/taskfile directory.
const testdata = "../../../testdata/taskfile"

// TestErrorFixtures parses every testdata/taskfile/errors/*.hcl with plugin
// checks on and, when that succeeds, resolves its variables from "# VAR:
// name=value" lines. Each error must start on a line marked "# ERROR:
// <summary>" and every marker must be matched. The rendered diagnostics must
// equal the fixture's .golden file (go test -update rewrites them).
func TestErrorFixtures(t *testing.T) {
	t.Parallel()
	testhcl.EachFixture(t, filepath.Join(testdata, "errors"), 14, func(t *testing.T, f testhcl.Fixture) {
		display := "errors/" + f.Name
		task, diags := Parse(display, f.Src, Options{CheckPlugins: true, BaseDir: filepath.Join(testdata, "errors")})
		if !diags.HasErrors() {
			require.NotNil(t, task)
			_, varDiags := task.Vars(f.Vars)
			diags = append(diags, varDiags...)
		} else {
			require.Nil(t, task)
		}

		rendered := renderText(t, display, f.Src, diags)
		require.ElementsMatch(t, f.Want, testhcl.Errors(t, display, diags), "diagnostics:\n%s", rendered)
		golden := strings.TrimSuffix(f.Path, ".hcl") + ".golden"
		if *update {
			require.NoError(t, os.WriteFile(golden, []byte(rendered), 0o644))
		}
		wantText, err := os.ReadFile(golden)
		require.NoError(t, err, "run go test -update to create %s", golden)
		require.Equal(t, string(wantText), rendered)
	})
}

func renderText(t *testing.T, filename string, src []byte, diags hcl.Diagnostics) string {
	t.Helper()
	var buf bytes.Buffer
	require.NoError(t, WriteDiagnostics(&buf, map[string][]byte{filename: src}, diags, 80, false))
	return buf.String()
}

// TestWriteDiagnostics checks the rendered form: file:line:col, the excerpt
// and the detail, unwrapped at width 0, and colors only when asked for.
func TestWriteDiagnostics(t *testing.T) {
	t.Parallel()
	src := []byte("task \"x\" {\n  step \"a\" {\n    plugin = \"\"\n  }\n}\n")
	_, diags := Parse("x.hcl", src, Options{})
	require.True(t, diags.HasErrors())

	var plain bytes.Buffer
	require.NoError(t, WriteDiagnostics(&plain, map[string][]byte{"x.hcl": src}, diags, 0, false))
	require.Equal(t, fmt.Sprint(
		"x.hcl:3:14: error: Empty plugin path\n\n",
		"  on x.hcl line 3, in task \"x\":\n",
		"   3:     plugin = \"\"\n\n",
		"plugin must be the path of a WebAssembly module, relative to the task file's directory.\n\n",
	), plain.String())

	var colored bytes.Buffer
	require.NoError(t, WriteDiagnostics(&colored, map[string][]byte{"x.hcl": src}, diags, 0, true))
	require.Contains(t, colored.String(), "\x1b[")

	// A file that is not given is named but not excerpted.
	var noSource bytes.Buffer
	require.NoError(t, WriteDiagnostics(&noSource, nil, diags, 0, false))
	require.Contains(t, noSource.String(), "on x.hcl line 3")
}

// TestWriteDiagnosticsNotUTF8 renders the diagnostics of a file (found by
// FuzzParse) whose long line is not UTF-8: HCL's excerpt of it allocated
// gigabytes a second for minutes, so the file is named without an excerpt.
func TestWriteDiagnosticsNotUTF8(t *testing.T) {
	t.Parallel()
	src, err := os.ReadFile(filepath.Join(testdata, "render", "not_utf8_long_line.hcl"))
	require.NoError(t, err)
	_, diags := Parse("bad.hcl", src, Options{})
	require.True(t, diags.HasErrors())
	var out bytes.Buffer
	require.NoError(t, WriteDiagnostics(&out, map[string][]byte{"bad.hcl": src}, diags, 80, false))
	require.Contains(t, out.String(), "bad.hcl:4:")
}
