package taskfile

import (
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"
)

// FuzzParse feeds arbitrary sources to the parser (without the recover that
// Parse adds, so that a panic fails the test) and checks that every error
// diagnostic points into the file, that rendering never fails, and that the
// steps of a valid task evaluate with unknown inputs without panicking.
func FuzzParse(f *testing.F) {
	for _, pattern := range []string{"valid/*.hcl", "errors/*.hcl"} {
		paths, err := filepath.Glob(filepath.Join(testdata, pattern))
		if err != nil {
			f.Fatal(err)
		}
		for _, path := range paths {
			src, err := os.ReadFile(path)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(src)
		}
	}

	f.Fuzz(func(t *testing.T, src []byte) {
		const filename = "fuzz.hcl"
		task, diags := parse(filename, src, Options{})
		for _, d := range diags {
			if d.Severity != hcl.DiagError {
				continue
			}
			if d.Subject == nil {
				t.Fatalf("error without subject: %s: %s", d.Summary, d.Detail)
			}
			if d.Subject.Filename != filename {
				t.Fatalf("error %q has subject in %q", d.Summary, d.Subject.Filename)
			}
		}
		if err := WriteDiagnostics(io.Discard, map[string][]byte{filename: src}, diags, 80, false); err != nil {
			t.Fatalf("rendering: %v", err)
		}
		if diags.HasErrors() {
			if task != nil {
				t.Fatal("task returned with errors")
			}
			return
		}
		if task == nil {
			t.Fatal("no task and no errors")
		}

		// Evaluate with everything a valid task may read, all unknown or
		// null: this must give diagnostics, never a panic.
		vars := map[string]cty.Value{}
		for _, v := range task.Variables {
			vars[v.Name] = cty.NullVal(v.Type)
		}
		outputs := map[string]cty.Value{}
		for _, s := range task.Steps {
			scope := Scope{TaskID: "fuzz", Vars: vars, Outputs: outputs}
			items, _ := s.EvalForEach(scope)
			if len(items) > 0 {
				scope.Each = &items[0]
			}
			in, _ := s.EvalInput(scope)
			if in.IsWhollyKnown() {
				_, _ = ToJSON(in)
			}
			_ = s.References()
			outputs[s.Name] = in
		}
		_, _ = task.Vars(nil)
	})
}
