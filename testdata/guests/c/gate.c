/*
 * gate.c: a step guest whose pace a test controls. It fetches
 * INPUT.url + "?item=" + the fan-out item's index through http.fetch and outputs the status and
 * the body's length; the test's loopback server answers each request when
 * the test lets it through. With INPUT.count (a counter name without
 * escapes), it then counts 1 under that name (progress.count).
 *
 *   clang-14 --target=wasm32-wasi -O2 -I plugins/sdk/c -o gate.wasm gate.c
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "lhengine.h"

static char resp[8192];
static char req[1024];

int main(void) {
	size_t n;
	char *env = read_all(&n);
	if (!env) {
		return 1;
	}
	const char *end = env + n, *in, *in_end, *u, *ue, *it, *ite;
	if (!member(env, end, "input", &in, &in_end) || !member(in, in_end, "url", &u, &ue) || ue - u < 2) {
		puts("{\"error\":\"input.url is required\"}");
		return 0;
	}
	const char *io, *ioe;
	if (!member(env, end, "item", &io, &ioe) || !member(io, ioe, "index", &it, &ite)) {
		it = "0"; /* not a fan-out */
		ite = it + 1;
	}
	/* u..ue is a JSON string with its quotes: the URL has no escapes. */
	int len = snprintf(req, sizeof req, "{\"method\":\"GET\",\"url\":\"%.*s?item=%.*s\",\"headers\":{}}",
	                   (int)(ue - u - 2), u + 1, (int)(ite - it), it);
	if (len <= 0 || len >= (int)sizeof req) {
		puts("{\"error\":\"url too long\"}");
		return 0;
	}
	int32_t got = lhengine_call_str("http.fetch", req, resp, sizeof resp);
	const char *ss, *se;
	if (got < 0 || got > (int32_t)sizeof resp || !member(resp, resp + got, "status", &ss, &se)) {
		printf("{\"error\":\"http.fetch: %d\"}\n", got);
		return 0;
	}
	const char *c, *ce;
	if (member(in, in_end, "count", &c, &ce) && ce - c >= 2 && ce - c < 200) {
		char count[256];
		snprintf(count, sizeof count, "{\"name\":%.*s,\"delta\":1}", (int)(ce - c), c);
		if (lhengine_call_str("progress.count", count, resp, sizeof resp) < 0) {
			puts("{\"error\":\"progress.count failed\"}");
			return 0;
		}
	}
	printf("{\"output\":{\"item\":%.*s,\"status\":%.*s}}\n", (int)(ite - it), it, (int)(se - ss), ss);
	return 0;
}
