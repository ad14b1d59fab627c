/*
 * quota.c: floods one host capability, for the quota tests. The input
 * {"mode": M} chooses it (the first mode of the list below whose quoted
 * name appears anywhere in stdin); each call is made up to 100,000 times
 * and stops at the first refusal:
 *
 *   note      progress.note with 1 KiB of text
 *   count     progress.count of a new counter name per call
 *   kv        kv.put of a new key with 4 KiB of value per call
 *   artifact  artifact_put of 64 KiB of new content per call
 *   log       log of 4 KiB, 2,000 times (log never refuses)
 *
 * The output is {"ok": calls that succeeded, "status": the refusal's
 * status (0 if none), "error": last_error after it}.
 *
 *   clang-14 --target=wasm32-wasi -O2 -I plugins/sdk/c -o quota.wasm quota.c
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lhengine.h"

static char in[4096];
static char req[8192];
static char out[1024];
static char errbuf[4096];
static char text[4096];

static int has(const char *mode) {
	char quoted[64];
	snprintf(quoted, sizeof quoted, "\"%s\"", mode);
	return strstr(in, quoted) != NULL;
}

int main(void) {
	size_t n = fread(in, 1, sizeof in - 1, stdin);
	in[n] = 0;
	memset(text, 'x', sizeof text);
	static unsigned char data[64 << 10];

	long ok = 0;
	int32_t rc = 0;
	for (long i = 0; i < 100000 && rc >= 0; i++) {
		if (has("note")) {
			snprintf(req, sizeof req, "{\"kind\":\"finding\",\"text\":\"%.*s\"}", 1024, text);
			rc = lhengine_call_str("progress.note", req, out, sizeof out);
		} else if (has("count")) {
			snprintf(req, sizeof req, "{\"name\":\"c%ld\",\"delta\":1}", i);
			rc = lhengine_call_str("progress.count", req, out, sizeof out);
		} else if (has("kv")) {
			snprintf(req, sizeof req, "{\"key\":\"k%ld\",\"value\":\"%.*s\"}", i, 4096, text);
			rc = lhengine_call_str("kv.put", req, out, sizeof out);
		} else if (has("artifact")) {
			memcpy(data, &i, sizeof i);
			const char *meta = "{\"name\":\"blob\"}";
			rc = lhengine_artifact_put(meta, (int32_t)strlen(meta), data, (int32_t)sizeof data, out, sizeof out);
		} else if (has("log")) {
			if (i == 2000) {
				break;
			}
			rc = lhengine_log(LHENGINE_INFO, text, 4096);
		} else {
			puts("{\"error\":\"unknown mode\"}");
			return 0;
		}
		if (rc >= 0) {
			ok++;
		}
	}
	int32_t en = 0;
	if (rc < 0) {
		en = lhengine_last_error(errbuf, (int32_t)sizeof errbuf - 1);
		if (en < 0 || en >= (int32_t)sizeof errbuf) {
			en = 0;
		}
	}
	errbuf[en] = 0;
	for (char *p = errbuf; *p; p++) {
		if (*p == '"' || *p == '\\' || (unsigned char)*p < 0x20) {
			*p = ' ';
		}
	}
	printf("{\"output\":{\"ok\":%ld,\"status\":%d,\"error\":\"%s\"}}\n", ok, rc < 0 ? rc : 0, errbuf);
	return 0;
}
