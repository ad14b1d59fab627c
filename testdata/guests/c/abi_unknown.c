/*
 * abi_unknown.c: imports a function lhengine_v1 does not provide; the
 * engine must refuse to load it.
 *
 *   clang-14 --target=wasm32-wasi -O2 -o abi_unknown.wasm abi_unknown.c
 */
__attribute__((import_module("lhengine_v1"), import_name("teleport"))) int host_teleport(const char *where, int len);

int main(void) { return host_teleport("mars", 4); }
