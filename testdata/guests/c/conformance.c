/*
 * conformance.c: the C half of the guest conformance suite (the Go half is
 * ../go/conformance). Both must give identical classified results.
 *
 * It uses no SDK: it reads the request envelope from stdin, picks fields out
 * with a few lines of scanning, and declares the two host imports it needs
 * itself. Built with -DUSE_LHENGINE_H it takes those declarations from
 * plugins/sdk/c/lhengine.h instead.
 *
 *   clang-14 --target=wasm32-wasi -O2 -o conformance.wasm conformance.c
 *   clang-14 --target=wasm32-wasi -O2 -DUSE_LHENGINE_H -I plugins/sdk/c -o conformance_h.wasm conformance.c
 *
 * Behaviour, by the input's "mode":
 *   echo    {"output":{"input":IN,"step":STEP,"attempt":N,"item":ITEM}}
 *   error   {"error":"requested error"}
 *   repair  {"needs_repair":true,"reason":"requested repair"}
 *   log     logs "hello from guest" at info, heartbeats,
 *           {"output":{"logged":true,"lease":"ok"|"lost"}}
 *   exit3   writes "exit3: failing on purpose" to stderr, exits 3
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"

#ifdef USE_LHENGINE_H
#include "lhengine.h"
#define host_log lhengine_log
#define host_heartbeat lhengine_heartbeat
#else
__attribute__((import_module("lhengine_v1"), import_name("log"))) int host_log(int level, const char *msg, int len);
__attribute__((import_module("lhengine_v1"), import_name("heartbeat"))) int host_heartbeat(void);
#endif

static void put(const char *s, const char *e) { fwrite(s, 1, (size_t)(e - s), stdout); }

int main(void) {
	size_t n;
	char *req = read_all(&n);
	if (!req) {
		fputs("out of memory reading the request\n", stderr);
		return 1;
	}
	const char *end = req + n, *in, *in_end;
	if (!member(req, end, "input", &in, &in_end)) {
		in = "null";
		in_end = in + 4;
	}

	if (member_is(in, in_end, "mode", "echo")) {
		const char *s, *se, *a, *ae, *it, *ite;
		if (!member(req, end, "step", &s, &se) || !member(req, end, "attempt", &a, &ae) ||
		    !member(req, end, "item", &it, &ite)) {
			puts("{\"error\":\"request envelope lacks step, attempt or item\"}");
			return 0;
		}
		fputs("{\"output\":{\"input\":", stdout);
		put(in, in_end);
		fputs(",\"step\":", stdout);
		put(s, se);
		fputs(",\"attempt\":", stdout);
		put(a, ae);
		fputs(",\"item\":", stdout);
		put(it, ite);
		puts("}}");
	} else if (member_is(in, in_end, "mode", "error")) {
		puts("{\"error\":\"requested error\"}");
	} else if (member_is(in, in_end, "mode", "repair")) {
		puts("{\"needs_repair\":true,\"reason\":\"requested repair\"}");
	} else if (member_is(in, in_end, "mode", "log")) {
		static const char msg[] = "hello from guest";
		host_log(1, msg, (int)strlen(msg));
		int rc = host_heartbeat();
		printf("{\"output\":{\"logged\":true,\"lease\":\"%s\"}}\n", rc == 0 ? "ok" : "lost");
	} else if (member_is(in, in_end, "mode", "exit3")) {
		fputs("exit3: failing on purpose\n", stderr);
		exit(3);
	} else {
		puts("{\"error\":\"unknown mode\"}");
	}
	return 0;
}
