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
command -v clang-14 >/dev/null 2>&1 || need+=(clang-14)
command -v wasm-ld-14 >/dev/null 2>&1 || need+=(lld-14)
[ -f /usr/lib/wasm32-wasi/libc.a ] || need+=(wasi-libc)
ls /usr/lib/llvm-14/lib/clang/*/lib/wasi/libclang_rt.builtins-wasm32.a >/dev/null 2>&1 || need+=(libclang-rt-14-dev-wasm32)
command -v wat2wasm >/dev/null 2>&1 || need+=(wabt)
[ -x /usr/bin/rustc ] || need+=(rustc)
ls /usr/lib/rustlib/wasm32-wasi/lib/libstd-*.rlib >/dev/null 2>&1 || need+=(libstd-rust-dev-wasm32)
[ -x /usr/bin/chromium ] || need+=(chromium)
[ -x /usr/bin/tmux ] || need+=(tmux)
command -v node >/dev/null 2>&1 || need+=(nodejs)
command -v npm >/dev/null 2>&1 || need+=(npm)

if [ ${#need[@]} -gt 0 ]; then
	echo "installing: ${need[*]}" >&2
	sudo=""
	[ "$(id -u)" -eq 0 ] || sudo="sudo"
	export DEBIAN_FRONTEND=noninteractive
	$sudo apt-get update -qq
	$sudo apt-get install -y -qq "${need[@]}" >/dev/null
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
