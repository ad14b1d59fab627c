// Package testhcl is what the tests of the engine's HCL readers (task
// files, policies, the evaluation bounds) share: fixtures whose expected
// errors are marked in comments, the hostile expressions of
// testdata/bounds/hostile.txt, and a bound on what one fuzz input may
// allocate.
package testhcl

import (
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
)

// Marked is an error on a line: one a fixture's comment expects, or one a
// reader reported.
type Marked struct {
	Line    int
	Summary string
}

var (
	errorMarker = regexp.MustCompile(`#\s*ERROR:\s*(.+?)\s*$`)
	varMarker   = regexp.MustCompile(`^#\s*VAR:\s*([^=\s]+)=(.*)$`)
)

// Markers returns the errors a fixture expects, one for each summary of a
// "# ERROR: summary" comment ("|" between several on one line) on the line
// the error starts on, and the variables its "# VAR: name=value" lines
// give.
func Markers(src []byte) ([]Marked, map[string]string) {
	var want []Marked
	vars := map[string]string{}
	for i, line := range strings.Split(string(src), "\n") {
		if m := errorMarker.FindStringSubmatch(line); m != nil {
			for _, s := range strings.Split(m[1], "|") {
				want = append(want, Marked{Line: i + 1, Summary: strings.TrimSpace(s)})
			}
		}
		if m := varMarker.FindStringSubmatch(line); m != nil {
			vars[m[1]] = m[2]
		}
	}
	return want, vars
}

// Fixture is an error fixture: a file whose comments mark the errors a
// reader must report on it (see Markers).
type Fixture struct {
	Path string            // where it is
	Name string            // its base name
	Src  []byte            // its text
	Want []Marked          // the errors its # ERROR: comments expect
	Vars map[string]string // the values its # VAR: lines give
}

// EachFixture runs check on every dir/*.hcl, at least min of them, each in
// a parallel subtest named after the file (less .hcl). A fixture that
// marks no error fails.
func EachFixture(t *testing.T, dir string, min int, check func(t *testing.T, f Fixture)) {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(dir, "*.hcl"))
	if err != nil {
		t.Fatal(err)
	}
	if len(paths) < min {
		t.Fatalf("%d fixtures in %s, want %d at least", len(paths), dir, min)
	}
	for _, path := range paths {
		name := filepath.Base(path)
		t.Run(strings.TrimSuffix(name, ".hcl"), func(t *testing.T) {
			t.Parallel()
			src, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			want, vars := Markers(src)
			if len(want) == 0 {
				t.Fatalf("%s has no # ERROR: marker", path)
			}
			check(t, Fixture{Path: path, Name: name, Src: src, Want: want, Vars: vars})
		})
	}
}

// Errors returns the errors among diags, each of which must point into the
// file named filename.
func Errors(t testing.TB, filename string, diags hcl.Diagnostics) []Marked {
	t.Helper()
	var got []Marked
	for _, d := range diags.Errs() {
		diag := d.(*hcl.Diagnostic)
		if diag.Subject == nil {
			t.Fatalf("diagnostic %q has no subject", diag.Summary)
		}
		if diag.Subject.Filename != filename {
			t.Fatalf("diagnostic %q is in %q, not %q", diag.Summary, diag.Subject.Filename, filename)
		}
		got = append(got, Marked{Line: diag.Subject.Start.Line, Summary: diag.Summary})
	}
	return got
}

// HostileExprs returns the expressions of the file at path (the
// repository's testdata/bounds/hostile.txt), one a line; lines starting
// with # are comments. Each would crash or exhaust a parser or an
// evaluator without bounds.
func HostileExprs(t testing.TB, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var exprs []string
	for line := range strings.SplitSeq(string(b), "\n") {
		if line != "" && !strings.HasPrefix(line, "#") {
			exprs = append(exprs, line)
		}
	}
	return exprs
}

// AllocLimit is what one fuzz input may make a reader allocate, parsing,
// checking and evaluating it: the evaluation budget (MaxEvalElements values
// of a few hundred bytes each, garbage included) with room to spare, and
// far below what an unbounded product takes (8.5GB for 27 million
// elements).
const AllocLimit = 2 << 30

// LimitAllocs starts counting what the process allocates for an input of
// size bytes; the function it returns fails t when that is more than
// AllocLimit. A fuzz target defers it:
//
//	defer testhcl.LimitAllocs(t, len(src))()
func LimitAllocs(t testing.TB, size int) func() {
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	return func() {
		var after runtime.MemStats
		runtime.ReadMemStats(&after)
		if n := after.TotalAlloc - before.TotalAlloc; n > AllocLimit {
			t.Fatalf("allocated %d bytes for a %d-byte source", n, size)
		}
	}
}
