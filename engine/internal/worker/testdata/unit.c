/*
 * unit.c: the step guest of the worker's tests. No JSON parser: it picks
 * the one string it needs out of the request.
 *
 *   clang-14 --target=wasm32-wasi -O2 -Wall -Werror -I plugins/sdk/c -o unit.wasm unit.c
 *
 * If the input has a "url" member, the guest GETs it through http.fetch
 * (so a test's server decides how long the attempt runs) and fails when
 * the fetch fails. Either way it answers
 *
 *   {"output": {"rand": "<16 bytes of random_get, hex>"}}
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <wasi/api.h>

#include "lhengine.h"

static char req[1 << 16];
static char fetch_req[1024];
static char resp[4096];

int main(void) {
	size_t n = fread(req, 1, sizeof req - 1, stdin);
	req[n] = 0;
	const char *url = strstr(req, "\"url\":\"");
	if (url) {
		url += 7;
		const char *end = strchr(url, '"');
		if (!end || end - url > 900) {
			puts("{\"error\":\"bad url\"}");
			return 0;
		}
		snprintf(fetch_req, sizeof fetch_req, "{\"url\":\"%.*s\"}", (int)(end - url), url);
		int32_t rc = lhengine_call_str("http.fetch", fetch_req, resp, sizeof resp);
		if (rc < 0) {
			printf("{\"error\":\"http.fetch: %d\"}\n", rc);
			return 0;
		}
	}
	uint8_t b[16];
	if (__wasi_random_get(b, sizeof b) != 0) {
		puts("{\"error\":\"random_get failed\"}");
		return 0;
	}
	fputs("{\"output\":{\"rand\":\"", stdout);
	for (size_t i = 0; i < sizeof b; i++) {
		printf("%02x", b[i]);
	}
	puts("\"}}");
	return 0;
}
