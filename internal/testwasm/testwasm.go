// Package testwasm builds WebAssembly guests from source for tests.
//
// Tests keep the sources of their guests (testdata/guests) rather than
// committed binaries, so a guest can never drift from the code that claims to
// have built it. Building is cached: the output of a build is stored under a
// directory named by the sha256 of everything that went into it (sources,
// headers, flags, toolchain version), so repeat runs cost one hash.
//
// Builds are safe to run from parallel tests and from parallel test binaries:
// each build writes to a temporary file in the cache directory and renames it
// into place, so a reader sees either no file or a complete one.
//
// When a toolchain is missing the test is skipped with an install hint, unless
// the environment variable CI is "true", in which case it fails: CI must run
// every guest test. The toolchains are Debian's packages, which
// scripts/deps.sh installs: C guests need clang-14, lld-14, wasi-libc and
// libclang-rt-14-dev-wasm32; Rust guests need rustc and
// libstd-rust-dev-wasm32; WebAssembly text needs wabt.
package testwasm

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
)

// InstallHint is the command that installs the C toolchain used by BuildC.
const InstallHint = "apt-get install clang-14 lld-14 wasi-libc libclang-rt-14-dev-wasm32"

// cFlags are the flags every C guest is built with.
var cFlags = []string{"--target=wasm32-wasi", "-O2", "-Wall", "-Werror"}

// keyLocks serialises builds of the same output within one process, so
// parallel tests asking for the same guest build it once.
var keyLocks sync.Map // cache key -> *sync.Mutex

// BuildC compiles the C sources src (paths relative to the test's working
// directory) into one WASI command module and returns the path of the .wasm
// file. The directory holding the project's C header (plugins/sdk/c) is on the
// include path, so guests may #include "lhengine.h".
//
// The build command is:
//
//	clang-14 --target=wasm32-wasi -O2 -Wall -Werror -I plugins/sdk/c -o OUT.wasm SRC...
func BuildC(t testing.TB, src ...string) string {
	t.Helper()
	return BuildCWith(t, nil, src...)
}

// BuildCWith is BuildC with extra compiler flags (such as -DNAME), which
// are added after the default ones and are part of the cache key.
func BuildCWith(t testing.TB, flags []string, src ...string) string {
	t.Helper()
	if len(src) == 0 {
		t.Fatal("testwasm.BuildC: no sources")
	}
	clang := findTool(t, InstallHint, "clang-14", "clang")
	root := moduleRoot(t)
	incDir := filepath.Join(root, "plugins", "sdk", "c")

	h := sha256.New()
	allFlags := append(append([]string{}, cFlags...), flags...)
	fmt.Fprintf(h, "c\x00%s\x00%s\x00", toolVersion(t, clang, "--version"), strings.Join(allFlags, "\x01"))
	var abs []string
	for _, s := range src {
		p, err := filepath.Abs(s)
		if err != nil {
			t.Fatalf("testwasm.BuildC: %v", err)
		}
		abs = append(abs, p)
		hashFile(t, h, p)
	}
	// Headers next to the sources and on the include path are inputs too.
	var headers []string
	for _, dir := range uniqueDirs(append([]string{incDir}, abs...)) {
		hs, _ := filepath.Glob(filepath.Join(dir, "*.h"))
		headers = append(headers, hs...)
	}
	sort.Strings(headers)
	for _, p := range headers {
		hashFile(t, h, p)
	}
	name := strings.TrimSuffix(filepath.Base(src[0]), ".c")
	return cached(t, hex.EncodeToString(h.Sum(nil)), name, func(out string) ([]byte, error) {
		args := append(append([]string{}, allFlags...), "-I", incDir, "-o", out)
		args = append(args, abs...)
		cmd := exec.Command(clang, args...)
		return cmd.CombinedOutput()
	})
}

// CGuest builds the C guest testdata/guests/c/NAME.c of this module, with
// the extra compiler flags (see BuildCWith), and returns the path of the
// .wasm file.
func CGuest(t testing.TB, name string, flags ...string) string {
	t.Helper()
	return BuildCWith(t, flags, filepath.Join(moduleRoot(t), "testdata", "guests", "c", name+".c"))
}

// RustInstallHint is the command that installs the Rust toolchain used by
// BuildRust.
const RustInstallHint = "apt-get install rustc libstd-rust-dev-wasm32"

// Rustc is the compiler BuildRust runs: Debian's, by its path. A rustc
// earlier on PATH (one installed by rustup in ~/.cargo/bin, say) is not
// used, since its version and standard library are not the ones a clean
// machine gets from scripts/deps.sh.
const Rustc = "/usr/bin/rustc"

// rustFlags are the flags every Rust guest is built with. Debian bookworm's
// rustc is 1.63, whose WASI preview 1 target is wasm32-wasi (later releases
// call it wasm32-wasip1). Stripping debug info takes the module from
// megabytes to about 100 KiB and keeps function names for trap frames.
var rustFlags = []string{"--target", "wasm32-wasi", "-O", "--edition", "2021", "-C", "strip=debuginfo"}

// BuildRust compiles the Rust program whose crate root is src (a path
// relative to the test's working directory, usually DIR/main.rs) into a WASI
// command module and returns the path of the .wasm file. The program uses
// std and the project's Rust SDK only: there is no cargo; the SDK
// (plugins/sdk/rust/lib.rs) is built first as the crate lhengine, which the
// program may use. The .rs files next to src (its modules) and the SDK's are
// part of the cache key; the module is named after src's directory when src
// is main.rs.
//
// The build commands are:
//
//	/usr/bin/rustc --target wasm32-wasi -O --edition 2021 -C strip=debuginfo --crate-type rlib --crate-name lhengine plugins/sdk/rust/lib.rs -o liblhengine.rlib
//	/usr/bin/rustc --target wasm32-wasi -O --edition 2021 -C strip=debuginfo --extern lhengine=liblhengine.rlib SRC -o OUT.wasm
func BuildRust(t testing.TB, src string) string {
	t.Helper()
	rustc := findRustc(t)
	abs, err := filepath.Abs(src)
	if err != nil {
		t.Fatalf("testwasm.BuildRust: %v", err)
	}
	rlib := buildRustSDK(t, rustc)
	h := sha256.New()
	fmt.Fprintf(h, "rust\x00%s\x00%s\x00", toolVersion(t, rustc, "--version"), strings.Join(rustFlags, "\x01"))
	hashFile(t, h, rlib)
	files, _ := filepath.Glob(filepath.Join(filepath.Dir(abs), "*.rs"))
	if !slices.Contains(files, abs) {
		files = append(files, abs)
	}
	sort.Strings(files)
	for _, f := range files {
		hashFile(t, h, f)
	}
	fmt.Fprintf(h, "root\x00%s", filepath.Base(abs))
	name := strings.TrimSuffix(filepath.Base(abs), ".rs")
	if name == "main" {
		name = filepath.Base(filepath.Dir(abs))
	}
	return cached(t, hex.EncodeToString(h.Sum(nil)), name, func(out string) ([]byte, error) {
		args := append(append([]string{}, rustFlags...), "--extern", "lhengine="+rlib, abs, "-o", out)
		cmd := exec.Command(rustc, args...)
		cmd.Dir = filepath.Dir(out) // rustc's temporary files go next to the output
		return cmd.CombinedOutput()
	})
}

// buildRustSDK builds the Rust SDK, plugins/sdk/rust/lib.rs, as the crate
// lhengine and returns the path of its rlib, cached like the guests.
func buildRustSDK(t testing.TB, rustc string) string {
	t.Helper()
	lib := filepath.Join(moduleRoot(t), "plugins", "sdk", "rust", "lib.rs")
	h := sha256.New()
	fmt.Fprintf(h, "rust-sdk\x00%s\x00%s\x00", toolVersion(t, rustc, "--version"), strings.Join(rustFlags, "\x01"))
	hashFile(t, h, lib)
	key := hex.EncodeToString(h.Sum(nil))
	dir := filepath.Join(cacheRoot(t), key)
	final := filepath.Join(dir, "liblhengine.rlib")
	if _, err := os.Stat(final); err == nil {
		return final
	}
	mu, _ := keyLocks.LoadOrStore(key, &sync.Mutex{})
	mu.(*sync.Mutex).Lock()
	defer mu.(*sync.Mutex).Unlock()
	if _, err := os.Stat(final); err == nil {
		return final
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatalf("testwasm: %v", err)
	}
	// rustc names its temporary files after the output; a private folder
	// keeps parallel test binaries apart until the rename.
	tmp, err := os.MkdirTemp(dir, "rlib-")
	if err != nil {
		t.Fatalf("testwasm: %v", err)
	}
	defer os.RemoveAll(tmp)
	out := filepath.Join(tmp, "liblhengine.rlib")
	args := append(append([]string{}, rustFlags...), "--crate-type", "rlib", "--crate-name", "lhengine", lib, "-o", out)
	cmd := exec.Command(rustc, args...)
	cmd.Dir = tmp
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("testwasm: building the Rust SDK: %v\n%s", err, b)
	}
	if err := os.Rename(out, final); err != nil {
		t.Fatalf("testwasm: %v", err)
	}
	return final
}

// findRustc returns Rustc when it and its wasm32-wasi standard library are
// installed, or skips (fails on CI).
func findRustc(t testing.TB) string {
	t.Helper()
	if _, err := os.Stat(Rustc); err != nil {
		missing(t, fmt.Sprintf("%s not found; install Debian's Rust toolchain with: %s", Rustc, RustInstallHint))
		return ""
	}
	sysroot, err := exec.Command(Rustc, "--print", "sysroot").Output()
	if err != nil {
		t.Fatalf("testwasm: %s --print sysroot: %v", Rustc, err)
	}
	std := filepath.Join(strings.TrimSpace(string(sysroot)), "lib", "rustlib", "wasm32-wasi", "lib", "libstd-*.rlib")
	if libs, _ := filepath.Glob(std); len(libs) == 0 {
		missing(t, fmt.Sprintf("no wasm32-wasi standard library for %s (%s); install it with: %s", Rustc, std, RustInstallHint))
		return ""
	}
	return Rustc
}

// BuildWat assembles a module from WebAssembly text with wat2wasm (Debian
// package wabt) and returns the path of the .wasm file. It suits fixtures
// too odd to write in C: a wrong signature, a missing _start.
//
//	wat2wasm -o OUT.wasm SRC.wat
func BuildWat(t testing.TB, name, wat string) string {
	t.Helper()
	tool := findTool(t, "apt-get install wabt", "wat2wasm")
	h := sha256.New()
	fmt.Fprintf(h, "wat\x00%s\x00%s", toolVersion(t, tool, "--version"), wat)
	return cached(t, hex.EncodeToString(h.Sum(nil)), name, func(out string) ([]byte, error) {
		src := out + ".wat"
		if err := os.WriteFile(src, []byte(wat), 0o644); err != nil {
			return nil, err
		}
		defer os.Remove(src)
		return exec.Command(tool, "-o", out, src).CombinedOutput()
	})
}

// BuildGo compiles the main package in pkgDir (a directory inside this
// module, relative to the test's working directory) for GOOS=wasip1
// GOARCH=wasm and returns the path of the .wasm file. The cache key covers
// every non-standard-library Go file the package depends on and the Go
// version.
//
// The build command, run from the module root, is:
//
//	GOOS=wasip1 GOARCH=wasm go build -trimpath -o OUT.wasm ./PKGDIR
func BuildGo(t testing.TB, pkgDir string) string {
	t.Helper()
	goTool := findGo(t)
	dir, err := filepath.Abs(pkgDir)
	if err != nil {
		t.Fatalf("testwasm.BuildGo: %v", err)
	}
	env := append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm", "CGO_ENABLED=0")

	// Every file of every non-standard package in the build, with the Go
	// version, names the output.
	list := exec.Command(goTool, "list", "-deps",
		"-f", "{{if not .Standard}}{{.Dir}}\x01{{join .GoFiles \"\x01\"}}{{end}}", ".")
	list.Dir = dir
	list.Env = env
	var stderr bytes.Buffer
	list.Stderr = &stderr
	out, err := list.Output()
	if err != nil {
		t.Fatalf("testwasm.BuildGo: go list in %s: %v\n%s", pkgDir, err, stderr.String())
	}
	h := sha256.New()
	fmt.Fprintf(h, "go\x00%s\x00-trimpath\x00", toolVersion(t, goTool, "version"))
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Split(line, "\x01")
		if len(fields) < 2 {
			continue
		}
		for _, f := range fields[1:] {
			hashFile(t, h, filepath.Join(fields[0], f))
		}
	}
	return cached(t, hex.EncodeToString(h.Sum(nil)), filepath.Base(dir), func(outPath string) ([]byte, error) {
		cmd := exec.Command(goTool, "build", "-trimpath", "-o", outPath, ".")
		cmd.Dir = dir
		cmd.Env = env
		return cmd.CombinedOutput()
	})
}

// GoGuest builds the Go guest testdata/guests/go/NAME of this module (see
// BuildGo) and returns the path of the .wasm file.
func GoGuest(t testing.TB, name string) string {
	t.Helper()
	return BuildGo(t, filepath.Join(moduleRoot(t), "testdata", "guests", "go", name))
}

// uniqueDirs returns the directories of paths (a directory stands for itself
// when it has no extension), each once.
func uniqueDirs(paths []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, p := range paths {
		d := p
		if filepath.Ext(p) != "" {
			d = filepath.Dir(p)
		}
		if !seen[d] {
			seen[d] = true
			out = append(out, d)
		}
	}
	return out
}

// cached returns the cached output for key, building it with build (which
// writes to the path it is given) when it is not there yet.
func cached(t testing.TB, key, name string, build func(out string) ([]byte, error)) string {
	t.Helper()
	dir := filepath.Join(cacheRoot(t), key)
	final := filepath.Join(dir, name+".wasm")
	if _, err := os.Stat(final); err == nil {
		return final
	}

	mu, _ := keyLocks.LoadOrStore(key, &sync.Mutex{})
	mu.(*sync.Mutex).Lock()
	defer mu.(*sync.Mutex).Unlock()
	if _, err := os.Stat(final); err == nil {
		return final
	}

	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatalf("testwasm: %v", err)
	}
	tmp, err := os.CreateTemp(dir, name+".*.tmp")
	if err != nil {
		t.Fatalf("testwasm: %v", err)
	}
	tmpPath := tmp.Name()
	tmp.Close()
	defer os.Remove(tmpPath) // no-op once renamed

	if out, err := build(tmpPath); err != nil {
		t.Fatalf("testwasm: building %s: %v\n%s", name, err, out)
	}
	if err := os.Rename(tmpPath, final); err != nil {
		t.Fatalf("testwasm: %v", err)
	}
	return final
}

// cacheRoot is $(go env GOCACHE)/../lhengine-testwasm when GOCACHE is set in
// the environment, else the user cache directory's lhengine-testwasm.
func cacheRoot(t testing.TB) string {
	if gc := os.Getenv("GOCACHE"); gc != "" && gc != "off" {
		return filepath.Join(filepath.Dir(gc), "lhengine-testwasm")
	}
	if uc, err := os.UserCacheDir(); err == nil {
		return filepath.Join(uc, "lhengine-testwasm")
	}
	return filepath.Join(os.TempDir(), "lhengine-testwasm")
}

func hashFile(t testing.TB, h io.Writer, path string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatalf("testwasm: %v", err)
	}
	defer f.Close()
	fmt.Fprintf(h, "%s\x00", filepath.Base(path))
	if _, err := io.Copy(h, f); err != nil {
		t.Fatalf("testwasm: %v", err)
	}
	h.Write([]byte{0})
}

var (
	versionsMu sync.Mutex
	versions   = map[string]string{}
)

// toolVersion returns the first line the tool prints for arg, memoised.
func toolVersion(t testing.TB, tool, arg string) string {
	t.Helper()
	versionsMu.Lock()
	defer versionsMu.Unlock()
	if v, ok := versions[tool]; ok {
		return v
	}
	out, err := exec.Command(tool, arg).Output()
	if err != nil {
		t.Fatalf("testwasm: %s %s: %v", tool, arg, err)
	}
	v, _, _ := strings.Cut(string(out), "\n")
	versions[tool] = v
	return v
}

// findTool returns the first of names found on PATH, or skips (fails on CI).
func findTool(t testing.TB, hint string, names ...string) string {
	t.Helper()
	for _, n := range names {
		if p, err := exec.LookPath(n); err == nil {
			return p
		}
	}
	missing(t, fmt.Sprintf("%s not found on PATH; install it with: %s", names[0], hint))
	return ""
}

func findGo(t testing.TB) string {
	t.Helper()
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	// go test puts its own GOROOT/bin first on PATH; this is for a test
	// binary run by hand with GOROOT set.
	if root := os.Getenv("GOROOT"); root != "" {
		p := filepath.Join(root, "bin", "go")
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	missing(t, "go not found on PATH; install Go 1.26 or later")
	return ""
}

func missing(t testing.TB, msg string) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatal("testwasm: " + msg)
	}
	t.Skip("testwasm: " + msg)
}

var (
	rootOnce sync.Once
	root     string
	rootErr  error
)

// moduleRoot is the directory holding this module's go.mod, found by walking
// up from the working directory.
func moduleRoot(t testing.TB) string {
	t.Helper()
	rootOnce.Do(func() {
		dir, err := os.Getwd()
		if err != nil {
			rootErr = err
			return
		}
		for {
			if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
				root = dir
				return
			}
			parent := filepath.Dir(dir)
			if parent == dir {
				rootErr = errors.New("no go.mod above the working directory")
				return
			}
			dir = parent
		}
	})
	if rootErr != nil {
		t.Fatalf("testwasm: %v", rootErr)
	}
	return root
}

// CacheDir returns the directory builds are cached in; tests may keep other
// derived, content-addressed files (a wazero compilation cache) under it.
func CacheDir(t testing.TB) string {
	t.Helper()
	return cacheRoot(t)
}

// TaskDir writes the module built at wasm, as step.wasm, and task, as
// task.hcl, into a new folder, and returns the folder.
func TaskDir(t testing.TB, wasm, task string) string {
	t.Helper()
	dir := t.TempDir()
	Copy(t, wasm, filepath.Join(dir, "step.wasm"))
	if err := os.WriteFile(filepath.Join(dir, "task.hcl"), []byte(task), 0o644); err != nil {
		t.Fatalf("testwasm: %v", err)
	}
	return dir
}

// Copy writes the module built at src (what BuildC, BuildGo and the others
// return) to dst, beside the task file that names it, and returns dst.
func Copy(t testing.TB, src, dst string) string {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatalf("testwasm: %v", err)
	}
	if err := os.WriteFile(dst, b, 0o644); err != nil {
		t.Fatalf("testwasm: %v", err)
	}
	return dst
}

// ModuleRoot returns the directory holding this module's go.mod.
func ModuleRoot(t testing.TB) string {
	t.Helper()
	return moduleRoot(t)
}

// NeedTool returns the path of the first of names found on PATH; when none
// is, it skips the test with the install hint, or fails it when CI is
// "true".
func NeedTool(t testing.TB, hint string, names ...string) string {
	t.Helper()
	return findTool(t, hint, names...)
}

// NeedRustc returns Rustc when it and its wasm32-wasi standard library are
// installed; otherwise it skips the test, or fails it when CI is "true".
func NeedRustc(t testing.TB) string {
	t.Helper()
	return findRustc(t)
}

// The AssemblyScript compiler and WASI shim versions BuildAssemblyScript
// uses: scripts/deps.sh installs them from the npm registry into
// bin/npm/node_modules of the module root (their tarballs cached in
// bin/npm/cache), and the plugin template pins the same.
const (
	ASCVersion      = "0.28.20"
	WASIShimVersion = "0.1.0"
)

// ASCInstallHint is how to install what BuildAssemblyScript needs.
const ASCInstallHint = "make deps (scripts/deps.sh: Debian's nodejs and npm, then npm install of assemblyscript@" +
	ASCVersion + " and @assemblyscript/wasi-shim@" + WASIShimVersion + " into bin/npm)"

// ascFlags are the flags every AssemblyScript guest is built with, after
// --config of the WASI shim.
var ascFlags = []string{"-O3"}

// NPMDir returns the module root's bin/npm, holding node_modules with the
// pinned assemblyscript and @assemblyscript/wasi-shim and the npm cache
// they came from, once node is on PATH and they are installed; otherwise it
// skips the test, or fails it when CI is "true".
func NPMDir(t testing.TB) string {
	t.Helper()
	findTool(t, ASCInstallHint, "node")
	findTool(t, ASCInstallHint, "npm")
	dir := filepath.Join(moduleRoot(t), "bin", "npm")
	for pkg, want := range map[string]string{"assemblyscript": ASCVersion, "@assemblyscript/wasi-shim": WASIShimVersion} {
		b, err := os.ReadFile(filepath.Join(dir, "node_modules", filepath.FromSlash(pkg), "package.json"))
		if err != nil {
			missing(t, fmt.Sprintf("%s is not installed in %s; run %s", pkg, dir, ASCInstallHint))
			return ""
		}
		if !bytes.Contains(b, []byte(`"version": "`+want+`"`)) {
			missing(t, fmt.Sprintf("%s in %s is not version %s; run %s", pkg, dir, want, ASCInstallHint))
			return ""
		}
	}
	return dir
}

// BuildAssemblyScript compiles the AssemblyScript program src (a path
// relative to the test's working directory, usually DIR/index.ts) into a
// WASI command module with asc and @assemblyscript/wasi-shim, and returns
// the path of the .wasm file. The .ts files next to src and those of the
// SDK (plugins/sdk/assemblyscript/assembly), which guests import by a
// relative path, are part of the cache key. The module is named after
// src's directory.
//
// The build command, run in bin/npm, is:
//
//	node_modules/.bin/asc SRC --config node_modules/@assemblyscript/wasi-shim/asconfig.json -O3 -o OUT.wasm
func BuildAssemblyScript(t testing.TB, src string) string {
	t.Helper()
	npm := NPMDir(t)
	node := findTool(t, ASCInstallHint, "node")
	abs, err := filepath.Abs(src)
	if err != nil {
		t.Fatalf("testwasm.BuildAssemblyScript: %v", err)
	}
	h := sha256.New()
	fmt.Fprintf(h, "asc\x00%s\x00%s\x00%s\x00%s\x00", ASCVersion, WASIShimVersion, toolVersion(t, node, "--version"),
		strings.Join(ascFlags, "\x01"))
	own, _ := filepath.Glob(filepath.Join(filepath.Dir(abs), "*.ts"))
	sdk, _ := filepath.Glob(filepath.Join(moduleRoot(t), "plugins", "sdk", "assemblyscript", "assembly", "*.ts"))
	sort.Strings(own)
	sort.Strings(sdk)
	for _, f := range append(own, sdk...) {
		hashFile(t, h, f)
	}
	fmt.Fprintf(h, "root\x00%s", filepath.Base(abs))
	name := filepath.Base(filepath.Dir(abs))
	return cached(t, hex.EncodeToString(h.Sum(nil)), name, func(out string) ([]byte, error) {
		// Run from bin/npm with the shim's config named relative to it:
		// asc resolves the config's "lib" folder against its working
		// directory when given an absolute config path.
		args := append([]string{abs, "--config", "node_modules/@assemblyscript/wasi-shim/asconfig.json"}, ascFlags...)
		args = append(args, "-o", out)
		cmd := exec.Command(filepath.Join(npm, "node_modules", ".bin", "asc"), args...)
		cmd.Dir = npm
		return cmd.CombinedOutput()
	})
}
