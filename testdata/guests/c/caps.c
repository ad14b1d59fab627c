/*
 * caps.c: the C half of the capability conformance suite (the Go half is
 * ../go/caps/main.go, using the SDK). Both must make the same host calls
 * and give the same output for each mode of the input {"mode": ...}:
 *
 *   kv        kv.put then kv.get of a key, and kv.get of a missing one
 *   big       http.fetch whose response is larger than the buffer: fetched
 *             with result, after which nothing is pending
 *   artifact  artifact_put of 2 MiB, read back with artifact_read; an
 *             unknown ref is NOT_FOUND
 *   refused   refused calls and what last_error says about them
 *   effect    effect.do twice under one key (the second is replayed),
 *             progress.count and progress.note
 *   bench     "n" calls of kv.get (input {"mode":"bench","n":N})
 *
 *   clang-14 --target=wasm32-wasi -O2 -I plugins/sdk/c -o caps.wasm caps.c
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "lhengine.h"

/* put_str writes s[0:n] as a JSON string. */
static void put_str(const char *s, size_t n) {
	putchar('"');
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		if (c == '"' || c == '\\') {
			printf("\\%c", c);
		} else if (c < 0x20) {
			printf("\\u%04x", c);
		} else {
			putchar(c);
		}
	}
	putchar('"');
}

static char errbuf[LHENGINE_ARTIFACT_META_MAX + 1];

/* last_err is the host's message about the most recent failed call. */
static const char *last_err(void) {
	int32_t n = lhengine_last_error(errbuf, (int32_t)sizeof errbuf - 1);
	if (n < 0 || n >= (int32_t)sizeof errbuf) {
		n = 0;
	}
	errbuf[n] = 0;
	return errbuf;
}

static void put_err(int32_t rc) {
	const char *msg = last_err();
	printf("[%d,", rc);
	put_str(msg, strlen(msg));
	putchar(']');
}

static char out[4096];

/* span_len is the length of a JSON string value [vs, ve) without quotes. */
static long span_len(const char *vs, const char *ve) { return (long)(ve - vs) - 2; }

static int mode_kv(void) {
	int32_t rc = lhengine_call_str("kv.put", "{\"key\":\"cursor\",\"value\":{\"page\":3}}", out, sizeof out);
	if (rc < 0) {
		printf("{\"error\":\"kv.put: %d\"}\n", rc);
		return 0;
	}
	int32_t n = lhengine_call_str("kv.get", "{\"key\":\"cursor\"}", out, sizeof out);
	const char *vs, *ve;
	if (n < 0 || n > (int32_t)sizeof out || !member(out, out + n, "value", &vs, &ve)) {
		printf("{\"error\":\"kv.get: %d\"}\n", n);
		return 0;
	}
	const char *fs, *fe;
	int found = member(out, out + n, "found", &fs, &fe) && fe - fs == 4 && memcmp(fs, "true", 4) == 0;
	printf("{\"output\":{\"found\":%s,\"value\":%.*s,", found ? "true" : "false", (int)(ve - vs), vs);
	n = lhengine_call_str("kv.get", "{\"key\":\"missing\"}", out, sizeof out);
	found = n > 0 && member(out, out + n, "found", &fs, &fe) && fe - fs == 4 && memcmp(fs, "true", 4) == 0;
	printf("\"missing\":%s}}\n", found ? "true" : "false");
	return 0;
}

static int mode_big(void) {
	char small[64];
	int32_t n = lhengine_call_str("http.fetch", "{\"method\":\"GET\",\"url\":\"http://example.test/big\",\"headers\":{}}",
	                              small, sizeof small);
	if (n <= (int32_t)sizeof small) {
		printf("{\"error\":\"http.fetch: %d\"}\n", n);
		return 0;
	}
	char *big = malloc((size_t)n);
	int32_t got = lhengine_result(big, n);
	int32_t again = lhengine_result(big, n);
	const char *vs, *ve, *ss, *se;
	if (got != n || !member(big, big + n, "body", &vs, &ve) || !member(big, big + n, "status", &ss, &se)) {
		printf("{\"error\":\"result: %d of %d\"}\n", got, n);
		return 0;
	}
	printf("{\"output\":{\"status\":%.*s,\"body_len\":%ld,\"again\":%d}}\n", (int)(se - ss), ss, span_len(vs, ve), again);
	free(big);
	return 0;
}

#define ART_SIZE (2 << 20)

static int mode_artifact(void) {
	unsigned char *data = malloc(ART_SIZE);
	for (uint32_t i = 0; i < ART_SIZE; i++) {
		data[i] = (unsigned char)(i * 31 + (i >> 11));
	}
	const char *meta = "{\"name\":\"data.bin\",\"media_type\":\"application/octet-stream\"}";
	int32_t n = lhengine_artifact_put(meta, (int32_t)strlen(meta), data, ART_SIZE, out, sizeof out);
	const char *rs, *re, *zs, *ze;
	if (n < 0 || n > (int32_t)sizeof out || !member(out, out + n, "ref", &rs, &re) ||
	    !member(out, out + n, "size", &zs, &ze)) {
		printf("{\"error\":\"artifact_put: %d\"}\n", n);
		return 0;
	}
	const char *ref = rs + 1;
	int32_t ref_len = (int32_t)(re - rs - 2);
	unsigned char *back = malloc(ART_SIZE + 1);
	int64_t off = 0;
	for (;;) {
		int32_t cap = 65536;
		if (off + cap > ART_SIZE + 1) {
			cap = (int32_t)(ART_SIZE + 1 - off);
		}
		int32_t r = lhengine_artifact_read(ref, ref_len, off, back + off, cap);
		if (r < 0) {
			printf("{\"error\":\"artifact_read: %d\"}\n", r);
			return 0;
		}
		if (r == 0) {
			break;
		}
		off += r;
	}
	int same = off == ART_SIZE && memcmp(data, back, ART_SIZE) == 0;
	printf("{\"output\":{\"ref\":%.*s,\"size\":%.*s,\"same\":%s,\"unknown\":", (int)(re - rs), rs, (int)(ze - zs), zs,
	       same ? "true" : "false");
	const char *bad = "sha256:0000";
	put_err(lhengine_artifact_read(bad, (int32_t)strlen(bad), 0, back, 16));
	printf("}}\n");
	return 0;
}

static int mode_refused(void) {
	printf("{\"output\":{\"unknown\":");
	put_err(lhengine_call_str("mail.send", "{}", out, sizeof out));
	printf(",\"invalid\":");
	put_err(lhengine_call_str("kv.get", "not json", out, sizeof out));
	printf(",\"denied\":");
	put_err(lhengine_call_str("kv.put", "{\"key\":\"denied\",\"value\":1}", out, sizeof out));
	int32_t ok = lhengine_call_str("kv.get", "{\"key\":\"x\"}", out, sizeof out);
	const char *msg = last_err();
	printf(",\"ok\":%s,\"after_ok\":", ok >= 0 ? "true" : "false");
	put_str(msg, strlen(msg));
	printf("}}\n");
	return 0;
}

static int effect(char *buf, int32_t cap, const char **replayed) {
	const char *req = "{\"key\":\"send-1\",\"kind\":\"http\",\"request\":{\"method\":\"POST\","
	                  "\"url\":\"http://127.0.0.1:8080/mail\",\"headers\":{\"Content-Type\":\"application/json\"},"
	                  "\"body\":\"{}\"}}";
	int32_t n = lhengine_call_str("effect.do", req, buf, cap);
	const char *vs, *ve;
	if (n < 0 || n > cap || !member(buf, buf + n, "replayed", &vs, &ve)) {
		return -1;
	}
	*replayed = (ve - vs == 4) ? "true" : "false";
	return n;
}

static int mode_effect(void) {
	const char *r1, *r2;
	char first[4096];
	int n1 = effect(first, sizeof first, &r1);
	int n2 = effect(out, sizeof out, &r2);
	const char *rs, *re, *ss, *se, *bs, *be;
	if (n1 < 0 || n2 < 0 || !member(first, first + n1, "result", &rs, &re) || !member(rs, re, "status", &ss, &se) ||
	    !member(rs, re, "body", &bs, &be)) {
		printf("{\"error\":\"effect.do failed\"}\n");
		return 0;
	}
	int32_t c = lhengine_call_str("progress.count", "{\"name\":\"pages\",\"delta\":1}", out, sizeof out);
	int32_t nt = lhengine_call_str("progress.note", "{\"kind\":\"finding\",\"text\":\"two pages\"}", out, sizeof out);
	printf("{\"output\":{\"status\":%.*s,\"body\":%.*s,\"replayed\":[%s,%s],\"progress\":%s}}\n", (int)(se - ss), ss,
	       (int)(be - bs), bs, r1, r2, c >= 0 && nt >= 0 ? "true" : "false");
	return 0;
}

static int mode_bench(long n) {
	long ok = 0;
	static const char req[] = "{\"key\":\"cursor\"}";
	for (long i = 0; i < n; i++) {
		if (lhengine_call("kv.get", 6, req, sizeof req - 1, out, sizeof out) > 0) {
			ok++;
		}
	}
	printf("{\"output\":%ld}\n", ok);
	return 0;
}

int main(void) {
	size_t n;
	char *req = read_all(&n);
	const char *in, *in_end, *v, *ve;
	if (!req || !member(req, req + n, "input", &in, &in_end)) {
		puts("{\"error\":\"no input\"}");
		return 0;
	}
	if (member_is(in, in_end, "mode", "kv")) {
		return mode_kv();
	} else if (member_is(in, in_end, "mode", "big")) {
		return mode_big();
	} else if (member_is(in, in_end, "mode", "artifact")) {
		return mode_artifact();
	} else if (member_is(in, in_end, "mode", "refused")) {
		return mode_refused();
	} else if (member_is(in, in_end, "mode", "effect")) {
		return mode_effect();
	} else if (member_is(in, in_end, "mode", "bench") && member(in, in_end, "n", &v, &ve)) {
		return mode_bench(strtol(v, NULL, 10));
	}
	puts("{\"error\":\"unknown mode\"}");
	return 0;
}
