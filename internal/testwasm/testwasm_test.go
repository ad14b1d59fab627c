package testwasm_test

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/lhengine/lhengine/internal/testwasm"
)

func TestBuildCached(t *testing.T) {
	t.Parallel()
	src := filepath.Join(t.TempDir(), "hello.c")
	if err := os.WriteFile(src, []byte("int main(void) { return 0; }\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// Parallel subtests build the same guest at once; each has its own t, so
	// a failed build fails from its own test goroutine. The group returns
	// when all of them have.
	paths := make([]string, 8)
	t.Run("parallel", func(t *testing.T) {
		for i := range paths {
			t.Run(strconv.Itoa(i), func(t *testing.T) {
				t.Parallel()
				paths[i] = testwasm.BuildC(t, src)
			})
		}
	})
	for _, p := range paths {
		if p != paths[0] {
			t.Fatalf("parallel builds gave %s and %s", paths[0], p)
		}
	}
	wasm, err := os.ReadFile(paths[0])
	if err != nil {
		t.Fatal(err)
	}
	if string(wasm[:4]) != "\x00asm" {
		t.Fatalf("%s is not a Wasm module", paths[0])
	}
	if other := testwasm.BuildCWith(t, []string{"-DX=1"}, src); other == paths[0] {
		t.Fatal("flags are not part of the cache key")
	}
	if err := os.WriteFile(src, []byte("int main(void) { return 1; }\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if changed := testwasm.BuildC(t, src); changed == paths[0] {
		t.Fatal("sources are not part of the cache key")
	}
}

func TestBuildWat(t *testing.T) {
	t.Parallel()
	p := testwasm.BuildWat(t, "empty", "(module)")
	if p != testwasm.BuildWat(t, "empty", "(module)") {
		t.Fatal("same source, different output")
	}
}

func TestCopy(t *testing.T) {
	t.Parallel()
	src := testwasm.BuildWat(t, "empty", "(module)")
	dst := filepath.Join(t.TempDir(), "step.wasm")
	if got := testwasm.Copy(t, src, dst); got != dst {
		t.Fatalf("Copy returned %s, want %s", got, dst)
	}
	want, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(dst)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(want) {
		t.Fatal("the copy differs from the module built")
	}
}

func TestTaskDir(t *testing.T) {
	t.Parallel()
	dir := testwasm.TaskDir(t, testwasm.BuildWat(t, "empty", "(module)"), `task "t" {}`)
	task, err := os.ReadFile(filepath.Join(dir, "task.hcl"))
	if err != nil {
		t.Fatal(err)
	}
	if string(task) != `task "t" {}` {
		t.Fatalf("task.hcl holds %q", task)
	}
	if _, err := os.Stat(filepath.Join(dir, "step.wasm")); err != nil {
		t.Fatal(err)
	}
}

func TestBuildRust(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "hello")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	src := filepath.Join(dir, "main.rs")
	if err := os.WriteFile(src, []byte("fn main() { println!(\"hello\"); }\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	p := testwasm.BuildRust(t, src)
	if filepath.Base(p) != "hello.wasm" {
		t.Fatalf("built %s, want it named after the crate's directory", p)
	}
	wasm, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if string(wasm[:4]) != "\x00asm" {
		t.Fatalf("%s is not a Wasm module", p)
	}
	if again := testwasm.BuildRust(t, src); again != p {
		t.Fatalf("same source, different output: %s and %s", p, again)
	}
	// A module next to the crate root is part of the cache key.
	if err := os.WriteFile(filepath.Join(dir, "util.rs"), []byte("pub fn f() {}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if changed := testwasm.BuildRust(t, src); changed == p {
		t.Fatal("the crate's other .rs files are not part of the cache key")
	}
}
