#!/usr/bin/env bash
# Installs, from Debian's packages, the toolchains the test guests are built
# with:
#   - C: clang-14 targeting wasm32-wasi, its linker, WASI libc and builtins;
#   - Rust: Debian's rustc (/usr/bin/rustc, 1.63 on bookworm) and its
#     wasm32-wasi standard library;
#   - wabt (wat2wasm) for the WebAssembly text fixtures;
#   - chromium, the headless browser the dashboard's test drives
#     (server/dashboard_test.go, through chromedp).
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

if [ ${#need[@]} -eq 0 ]; then
	exit 0
fi
echo "installing: ${need[*]}" >&2
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq "${need[@]}" >/dev/null
