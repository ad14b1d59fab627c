/*
 * membomb.c: allocates (and touches) memory 1 MiB at a time, keeping every
 * block, until malloc fails; then aborts, as most guests do when memory
 * runs out.
 *
 *   clang-14 --target=wasm32-wasi -O2 -o membomb.wasm membomb.c
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void *volatile kept; /* a list of every block, so none can be optimised away */

int main(void) {
	for (;;) {
		char *p = malloc(1 << 20);
		if (!p) {
			fputs("membomb: out of memory\n", stderr);
			abort();
		}
		memset(p, 1, 1 << 20);
		*(void **)p = kept;
		kept = p;
	}
}
