/*
 * spin.c: a tight arithmetic loop of "n" iterations (from the input), for
 * measuring what WithCloseOnContextDone costs guest code.
 *
 *   clang-14 --target=wasm32-wasi -O2 -o spin.wasm spin.c
 */
#include <stdio.h>
#include <stdlib.h>

#include "json.h"

int main(void) {
	size_t n;
	char *req = read_all(&n);
	const char *in, *in_end, *v, *ve;
	long iters = 0;
	if (req && member(req, req + n, "input", &in, &in_end) && member(in, in_end, "n", &v, &ve)) {
		iters = strtol(v, NULL, 10);
	}
	volatile unsigned int acc = 1;
	for (long i = 0; i < iters; i++) {
		acc = acc * 31 + (unsigned int)i;
	}
	printf("{\"output\":%u}\n", acc);
	return 0;
}
