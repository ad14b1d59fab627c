/*
 * trap.c: executes the Wasm "unreachable" instruction.
 *
 *   clang-14 --target=wasm32-wasi -O2 -o trap.wasm trap.c
 */
#include <stdio.h>

int main(void) {
	fputs("trap: about to trap\n", stderr);
	__builtin_trap();
}
