/*
 * noisy.c: writes 100000 numbered lines to stderr, then answers
 * {"output":"done"}. A step's log is bounded; excess stderr is truncated,
 * not a failure.
 *
 *   clang-14 --target=wasm32-wasi -O2 -o noisy.wasm noisy.c
 */
#include <stdio.h>

int main(void) {
	for (int i = 0; i < 100000; i++) {
		fprintf(stderr, "line %d\n", i);
	}
	puts("{\"output\":\"done\"}");
	return 0;
}
