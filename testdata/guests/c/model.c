/*
 * model.c: calls a model through lhengine_generate (lhengine.h) and
 * outputs the response as it is, or the status and last_error of a
 * refused call. The request is fixed: model "m", key "c-1", one user
 * message.
 *
 *   clang-14 --target=wasm32-wasi -O2 -I plugins/sdk/c -o model.wasm model.c
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "lhengine.h"

int main(void) {
	static char out[1 << 16];
	static const char req[] = "{\"model\":\"m\",\"key\":\"c-1\",\"messages\":[{\"role\":\"user\",\"content\":\"hello from C\"}]}";
	char buf[64];
	while (fread(buf, 1, sizeof buf, stdin) > 0) {
	}
	int32_t n = lhengine_generate(req, (int32_t)strlen(req), out, (int32_t)sizeof out);
	if (n < 0) {
		int32_t m = lhengine_last_error(out, (int32_t)sizeof out - 1);
		out[m > 0 && m < (int32_t)sizeof out ? m : 0] = 0;
		printf("{\"output\":{\"status\":%d,\"message_length\":%d}}\n", (int)n, (int)m);
		return 0;
	}
	printf("{\"output\":%.*s}\n", (int)n, out);
	return 0;
}
