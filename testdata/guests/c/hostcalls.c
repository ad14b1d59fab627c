/*
 * hostcalls.c: calls lhengine_v1.version "n" times (from the input), for
 * measuring the cost of one host call.
 *
 *   clang-14 --target=wasm32-wasi -O2 -I plugins/sdk/c -o hostcalls.wasm hostcalls.c
 */
#include <stdio.h>
#include <stdlib.h>

#include "json.h"
#include "lhengine.h"

int main(void) {
	size_t n;
	char *req = read_all(&n);
	const char *in, *in_end, *v, *ve;
	long iters = 0;
	if (req && member(req, req + n, "input", &in, &in_end) && member(in, in_end, "n", &v, &ve)) {
		iters = strtol(v, NULL, 10);
	}
	long sum = 0;
	for (long i = 0; i < iters; i++) {
		sum += lhengine_version();
	}
	printf("{\"output\":%ld}\n", sum);
	return 0;
}
