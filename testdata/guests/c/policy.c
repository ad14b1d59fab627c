/*
 * policy.c: a step that reports the policy parameters of its request, read
 * with the lhengine.h accessors (lhengine_policy_param and friends).
 *
 *   clang-14 --target=wasm32-wasi -O2 -I plugins/sdk/c -o policy.wasm policy.c
 *
 * Output: {"single_tool": BOOL, "few_shot": STRING or null, "reset_every": N
 * (-1 when absent), "markers": RAW JSON or null}.
 */
#include <stdio.h>

#include "json.h"
#include "lhengine.h"

int main(void) {
	size_t n;
	char *req = read_all(&n);
	if (!req) {
		return 1;
	}
	char shot[256];
	int shot_len = lhengine_policy_string(req, n, "few_shot", shot, sizeof shot);
	const char *markers;
	size_t markers_len;
	int has_markers = lhengine_policy_param(req, n, "markers", &markers, &markers_len);

	printf("{\"output\":{\"single_tool\":%s,", lhengine_policy_bool(req, n, "single_tool") ? "true" : "false");
	if (shot_len >= 0) {
		printf("\"few_shot\":\"%s\",", shot);
	} else {
		printf("\"few_shot\":null,");
	}
	printf("\"reset_every\":%ld,\"markers\":", lhengine_policy_int(req, n, "context_reset_every", -1));
	if (has_markers) {
		fwrite(markers, 1, markers_len, stdout);
	} else {
		fputs("null", stdout);
	}
	puts("}}");
	return 0;
}
