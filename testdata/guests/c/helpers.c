/*
 * helpers.c: a plugin written with the request, result and capability
 * helpers of lhengine.h alone (no json.h), for the tests of the header.
 * Modes of the input {"mode": ...}:
 *
 *   fields    {"output":{"step":STEP,"attempt":N,"objective":OBJ|null,"n":INPUT.n}}
 *   kv        kv_put of {"page":3} under "cursor", then kv_get of it and of
 *             "missing": {"output":{"cursor":RESPONSE,"missing":RESPONSE}}
 *   progress  count of "pa\"ges" by 2 and a note with a newline and quotes
 *   refused   kv_put of "denied": the status and last_error
 *   fail      lhengine_fail with quotes and a newline
 *   repair    lhengine_needs_repair with quotes
 *   null      lhengine_ok(NULL, 0)
 *
 *   clang-14 --target=wasm32-wasi -O2 -Wall -Werror -I plugins/sdk/c -o helpers.wasm helpers.c
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lhengine.h"

static int is_mode(const char *in, size_t in_len, const char *mode) {
	const char *v;
	size_t n;
	size_t m = strlen(mode);
	return lhengine_json_field(in, in_len, "mode", &v, &n) && n == m + 2 && memcmp(v + 1, mode, m) == 0;
}

static void put(const char *s, size_t n) { fwrite(s, 1, n, stdout); }

int main(void) {
	size_t len;
	char *req = lhengine_read_request(&len);
	if (!req) {
		lhengine_fail("cannot read the request");
		return 0;
	}
	const char *in = "null", *v;
	size_t in_len = 4, n;
	lhengine_request_field(req, len, "input", &in, &in_len);

	if (is_mode(in, in_len, "fields")) {
		fputs("{\"output\":{\"step\":", stdout);
		lhengine_request_field(req, len, "step", &v, &n) ? put(v, n) : (void)fputs("null", stdout);
		fputs(",\"attempt\":", stdout);
		lhengine_request_field(req, len, "attempt", &v, &n) ? put(v, n) : (void)fputs("null", stdout);
		fputs(",\"objective\":", stdout);
		lhengine_request_field(req, len, "objective", &v, &n) ? put(v, n) : (void)fputs("null", stdout);
		fputs(",\"n\":", stdout);
		lhengine_json_field(in, in_len, "n", &v, &n) ? put(v, n) : (void)fputs("null", stdout);
		puts("}}");
	} else if (is_mode(in, in_len, "kv")) {
		char a[256], b[256];
		int32_t rc = lhengine_kv_put("cursor", "{\"page\":3}");
		int32_t ra = rc < 0 ? rc : lhengine_kv_get("cursor", a, (int32_t)sizeof a);
		int32_t rb = ra < 0 ? ra : lhengine_kv_get("missing", b, (int32_t)sizeof b);
		if (rc < 0 || ra < 0 || rb < 0 || ra > (int32_t)sizeof a || rb > (int32_t)sizeof b) {
			lhengine_fail("kv refused");
		} else {
			fputs("{\"output\":{\"cursor\":", stdout);
			put(a, (size_t)ra);
			fputs(",\"missing\":", stdout);
			put(b, (size_t)rb);
			puts("}}");
		}
	} else if (is_mode(in, in_len, "progress")) {
		int32_t c = lhengine_count("pa\"ges", 2);
		int32_t d = lhengine_note("finding", "line one\nline \"two\"");
		printf("{\"output\":{\"count\":%d,\"note\":%d}}\n", (int)c, (int)d);
	} else if (is_mode(in, in_len, "refused")) {
		char why[512];
		int32_t rc = lhengine_kv_put("denied", "1");
		int32_t w = lhengine_last_error(why, (int32_t)sizeof why);
		fputs("{\"output\":{\"status\":", stdout);
		printf("%d,\"message\":", (int)rc);
		why[w >= 0 && w < (int32_t)sizeof why ? w : 0] = 0;
		lhengine_write_string(stdout, why);
		puts("}}");
	} else if (is_mode(in, in_len, "fail")) {
		lhengine_fail("bad \"thing\"\nsecond line");
	} else if (is_mode(in, in_len, "repair")) {
		lhengine_needs_repair("why \"x\"");
	} else if (is_mode(in, in_len, "null")) {
		lhengine_ok(NULL, 0);
	} else {
		lhengine_fail("unknown mode");
	}
	free(req);
	return 0;
}
