/*
 * pipeline.c: the step guest of the engine's end-to-end tests. No SDK.
 *
 *   clang-14 --target=wasm32-wasi -O2 -o pipeline.wasm pipeline.c
 *
 * Behaviour, by the input's "mode":
 *   echo         {"output": INPUT}
 *   item         {"output": {"item": ITEM, "attempt": N}}   (ITEM from the envelope)
 *   fail_until   fails with {"error":...} while attempt < input.ok_at, then echoes
 *   repair_once  {"needs_repair":true,...} while the envelope has no "repair"
 *                member (the first pass), then {"output":{"repaired":REPAIR}}
 *   repair       always {"needs_repair":true,...}
 *   trap         __builtin_trap()
 *   now          {"output": {"now": NOW, "wall": SECONDS}}: NOW the envelope's
 *                "now" (null when absent), SECONDS the guest's wall clock
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "json.h"

static void put(const char *s, const char *e) { fwrite(s, 1, (size_t)(e - s), stdout); }

int main(void) {
	size_t n;
	char *req = read_all(&n);
	if (!req) {
		return 1;
	}
	const char *end = req + n, *in, *in_end, *a, *ae;
	if (!member(req, end, "input", &in, &in_end)) {
		in = "null";
		in_end = in + 4;
	}
	int attempt = 0;
	if (member(req, end, "attempt", &a, &ae)) {
		attempt = atoi(a);
	}
	if (member_is(in, in_end, "mode", "fail_until")) {
		const char *k, *ke;
		int ok_at = member(in, in_end, "ok_at", &k, &ke) ? atoi(k) : 1;
		if (attempt < ok_at) {
			printf("{\"error\":\"attempt %d fails on purpose\"}\n", attempt);
			return 0;
		}
	} else if (member_is(in, in_end, "mode", "item")) {
		const char *it, *ite;
		if (!member(req, end, "item", &it, &ite)) {
			it = "null";
			ite = it + 4;
		}
		fputs("{\"output\":{\"item\":", stdout);
		put(it, ite);
		printf(",\"attempt\":%d}}\n", attempt);
		return 0;
	} else if (member_is(in, in_end, "mode", "repair_once")) {
		const char *r, *re;
		if (!member(req, end, "repair", &r, &re)) {
			puts("{\"needs_repair\":true,\"reason\":\"first pass is never good enough\"}");
			return 0;
		}
		fputs("{\"output\":{\"repaired\":", stdout);
		put(r, re);
		puts("}}");
		return 0;
	} else if (member_is(in, in_end, "mode", "repair")) {
		puts("{\"needs_repair\":true,\"reason\":\"never good enough\"}");
		return 0;
	} else if (member_is(in, in_end, "mode", "now")) {
		const char *t, *te;
		if (!member(req, end, "now", &t, &te)) {
			t = "null";
			te = t + 4;
		}
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		fputs("{\"output\":{\"now\":", stdout);
		put(t, te);
		printf(",\"wall\":%lld}}\n", (long long)ts.tv_sec);
		return 0;
	} else if (member_is(in, in_end, "mode", "trap")) {
		__builtin_trap();
	}
	fputs("{\"output\":", stdout);
	put(in, in_end);
	puts("}");
	return 0;
}
