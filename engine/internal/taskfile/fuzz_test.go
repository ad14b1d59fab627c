package taskfile

import (
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"

	"github.com/lhengine/lhengine/engine/internal/jsonval"
	"github.com/lhengine/lhengine/internal/testhcl"
)

// FuzzParse feeds arbitrary sources to the parser (without the recover that
// Parse adds, so that a panic fails the test) and checks that every error
// diagnostic points into the file, that rendering never fails, that the
// steps of a valid task evaluate with unknown inputs without panicking, and
// that every host pattern a valid task grants admits the host it names, and
// that one input, parsed, validated and evaluated, allocates less than
// testhcl.AllocLimit in all (a crash of the stack cannot be caught: it ends the
// fuzzer, which reports it). The seeds are the fixtures under
// testdata/taskfile/valid and errors, and a step whose input is each of
// testdata/bounds/hostile.txt (nested too deeply or computing too much).
func FuzzParse(f *testing.F) {
	for _, expr := range testhcl.HostileExprs(f, filepath.Join(testdata, "..", "bounds", "hostile.txt")) {
		f.Add([]byte("task \"t\" {\n  step \"a\" {\n    plugin = \"a.wasm\"\n    input  = " + expr + "\n  }\n}\n"))
	}
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
		defer testhcl.LimitAllocs(t, len(src))()
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
				_, _ = jsonval.ToJSON(in)
			}
			_ = s.References()
			outputs[s.Name] = in

			// Every granted host pattern is valid, so it admits itself.
			var patterns []string
			if s.HTTP != nil {
				patterns = append(patterns, s.HTTP.Allow...)
			}
			for _, e := range s.Effects {
				patterns = append(patterns, e.Hosts...)
			}
			for _, p := range patterns {
				if !HostAllowed([]string{p}, samplePort(p)) {
					t.Fatalf("granted pattern %q does not admit %q", p, samplePort(p))
				}
			}
		}
		_, _ = task.Vars(nil)
	})
}

// FuzzVarValue checks that no --var value makes parsing it panic or
// overflow the stack.
func FuzzVarValue(f *testing.F) {
	for _, seed := range []string{
		`["a", "b"]`, `{a = 1}`, `[[[1]]]`, `3`,
		strings.Repeat("[", 5000) + strings.Repeat("]", 5000),
		strings.Repeat("-", 5000) + "1",
	} {
		f.Add(seed)
	}
	v := &Variable{Name: "v", Type: cty.List(cty.DynamicPseudoType)}
	f.Fuzz(func(t *testing.T, raw string) {
		_, _ = v.parseValue(raw)
	})
}

// samplePort returns a host:port that the valid host pattern p admits.
func samplePort(p string) string {
	host, port, err := parseHostPattern(p)
	if err != nil {
		return ""
	}
	if port == "" || port == "*" {
		port = "443"
	}
	return net.JoinHostPort(host, port)
}

// FuzzHostAllowed checks that HostAllowed never panics and that a pattern it
// accepts as valid admits the host it names, and only on the ports it names.
func FuzzHostAllowed(f *testing.F) {
	for _, seed := range [][2]string{
		{"example.org", "example.org:443"},
		{"127.0.0.1:*", "127.0.0.1:8080"},
		{"[::1]:8080", "[::1]:8080"},
		{"https://example.org", "example.org:80"},
		{"*.example.org", "a.example.org:443"},
		{"example.org:0", ":0"},
	} {
		f.Add(seed[0], seed[1])
	}
	f.Fuzz(func(t *testing.T, pattern, hostport string) {
		got := HostAllowed([]string{pattern}, hostport)
		host, port, err := parseHostPattern(pattern)
		if err != nil {
			if got {
				t.Fatalf("invalid pattern %q admits %q", pattern, hostport)
			}
			return
		}
		if !HostAllowed([]string{pattern}, samplePort(pattern)) {
			t.Fatalf("pattern %q does not admit %q", pattern, samplePort(pattern))
		}
		other := "1"
		if port == other {
			other = "2"
		}
		if port != "*" && HostAllowed([]string{pattern}, net.JoinHostPort(host, other)) {
			t.Fatalf("pattern %q admits port %s", pattern, other)
		}
	})
}
