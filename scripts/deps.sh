#!/usr/bin/env bash
# Installs, from Debian's packages, the toolchains the test guests are built
# with:
#   - C: clang-14 targeting wasm32-wasi, its linker, WASI libc and builtins;
#   - Rust: Debian's rustc (/usr/bin/rustc, 1.63 on bookworm) and its
#     wasm32-wasi standard library;
#   - wabt (wat2wasm) for the WebAssembly text fixtures;
#   - chromium, the headless browser the dashboard's test drives
#     (server/dashboard_test.go, through chromedp);
#   - tmux, the terminal the live progress bar's test runs lhengine run in
#     (cmd/lhengine/livebar_test.go);
#   - PostgreSQL (Debian's postgresql: initdb, pg_ctl, postgres), which the
#     PostgreSQL store's tests start as a throwaway cluster in a temporary
#     folder (internal/testpg);
#   - node and npm (Debian's nodejs and npm, unless node and npm are
#     already on PATH) for AssemblyScript, and then, from the npm registry,
#     the pinned assemblyscript and @assemblyscript/wasi-shim into
#     bin/npm/node_modules, their tarballs cached in bin/npm/cache: the
#     AssemblyScript guests are built with them, and the `plugin new`
#     test's npm install reads that cache offline. Done once per version.
# Go plugins need only the Go toolchain.
#
# The checks look for Debian's files, not for whatever is first on PATH: a
# rustc installed by rustup (~/.cargo/bin) is not the one the tests use.
set -euo pipefail

need=()
why=()
want() { need+=("$1"); why+=("$1: $2"); }
command -v clang-14 >/dev/null 2>&1 || want clang-14 "compiles the C test guests and C plugins to wasm32-wasi"
command -v wasm-ld-14 >/dev/null 2>&1 || want lld-14 "links the C guests (wasm-ld)"
[ -f /usr/lib/wasm32-wasi/libc.a ] || want wasi-libc "the C library of the C guests"
ls /usr/lib/llvm-14/lib/clang/*/lib/wasi/libclang_rt.builtins-wasm32.a >/dev/null 2>&1 ||
	want libclang-rt-14-dev-wasm32 "clang's builtins for wasm32"
command -v wat2wasm >/dev/null 2>&1 || want wabt "assembles the WebAssembly text fixtures (wat2wasm)"
[ -x /usr/bin/rustc ] || want rustc "compiles the Rust SDK and the Rust guests"
ls /usr/lib/rustlib/wasm32-wasi/lib/libstd-*.rlib >/dev/null 2>&1 ||
	want libstd-rust-dev-wasm32 "Rust's standard library for wasm32-wasi"
[ -x /usr/bin/chromium ] || want chromium "the headless browser the dashboard's test drives"
ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || command -v initdb >/dev/null 2>&1 ||
	want postgresql "the server the PostgreSQL store's tests start in a temporary folder"
[ -x /usr/bin/tmux ] || want tmux "the terminal the live progress bar's test runs in"
command -v node >/dev/null 2>&1 || want nodejs "runs the AssemblyScript compiler"
command -v npm >/dev/null 2>&1 || want npm "installs the AssemblyScript compiler from the npm registry"
# npm reaches the registry over TLS: Debian's nodejs trusts the system's
# certificates, which a bare system may lack (a recommendation, skipped
# below).
[ -f /etc/ssl/certs/ca-certificates.crt ] || want ca-certificates "the certificates npm checks the registry's with"

if [ ${#need[@]} -gt 0 ]; then
	echo "scripts/deps.sh: installing ${#need[@]} Debian packages (and what they depend on) for the tests' toolchains:" >&2
	printf '  %s\n' "${why[@]}" >&2
	sudo=""
	[ "$(id -u)" -eq 0 ] || sudo="sudo"
	export DEBIAN_FRONTEND=noninteractive
	echo "scripts/deps.sh: apt-get update" >&2
	$sudo apt-get update -q
	# apt's own lines (what it fetches, unpacks and sets up) are the
	# progress; recommendations (documentation, extra fonts, cargo) are
	# not needed here.
	$sudo apt-get install -y --no-install-recommends -o Dpkg::Progress-Fancy=0 "${need[@]}" >&2
	echo "scripts/deps.sh: installed ${need[*]}" >&2
fi

# The AssemblyScript compiler and WASI shim, at the versions
# internal/testwasm (ASCVersion, WASIShimVersion) and the plugin template
# (plugins/templates/assemblyscript/package.json.tmpl) pin.
ASC_VERSION=0.28.20
WASI_SHIM_VERSION=0.1.0
npmdir="$(cd "$(dirname "$0")/.." && pwd)/bin/npm"
stamp="$npmdir/node_modules/.lhengine-$ASC_VERSION-$WASI_SHIM_VERSION"
if [ ! -f "$stamp" ]; then
	echo "installing from npm: assemblyscript@$ASC_VERSION @assemblyscript/wasi-shim@$WASI_SHIM_VERSION into $npmdir" >&2
	mkdir -p "$npmdir"
	[ -f "$npmdir/package.json" ] || echo '{"private":true}' >"$npmdir/package.json"
	npm install --prefix "$npmdir" --cache "$npmdir/cache" --no-audit --no-fund --save-exact \
		"assemblyscript@$ASC_VERSION" "@assemblyscript/wasi-shim@$WASI_SHIM_VERSION" >/dev/null
	touch "$stamp"
fi
