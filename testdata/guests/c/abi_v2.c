/*
 * abi_v2.c: imports the host module of a future ABI major version; the
 * engine must refuse to load it.
 *
 *   clang-14 --target=wasm32-wasi -O2 -o abi_v2.wasm abi_v2.c
 */
__attribute__((import_module("lhengine_v2"), import_name("log"))) int host_log(int level, const char *msg, int len);

int main(void) { return host_log(1, "hi", 2); }
