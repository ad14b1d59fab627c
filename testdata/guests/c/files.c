/*
 * files.c: file access through the workspace mounts (WASI preopens). The
 * input is {"mode": "write"|"read"|"append", "path": "...", "content": "..."}:
 * write creates or truncates path with content, append appends it, read
 * reads path. {"mode": "fill", "path": "...", "count": N, "size": S} writes
 * N blocks of S bytes to path with write(2), stopping at the first error.
 * The output is {"ok": true, "data": "..."} (fill: {"ok": true, "written":
 * B}) or {"ok": false, "errno": N, "error": "...", "written": B}; a refused
 * access is not a failure of the plugin.
 *
 *   clang-14 --target=wasm32-wasi -O2 -o files.wasm files.c
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "json.h"

/* str copies the JSON string value of member key (without escapes) into a
 * NUL-terminated heap string; "" when absent. */
static char *str(const char *obj, const char *end, const char *key) {
	const char *vs, *ve;
	if (!member(obj, end, key, &vs, &ve) || ve - vs < 2 || *vs != '"') {
		return strdup("");
	}
	size_t n = (size_t)(ve - vs - 2);
	char *s = malloc(n + 1);
	memcpy(s, vs + 1, n);
	s[n] = 0;
	return s;
}

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

static int fail(void) {
	int e = errno;
	printf("{\"output\":{\"ok\":false,\"errno\":%d,\"error\":", e);
	const char *msg = strerror(e);
	put_str(msg, strlen(msg));
	printf("}}\n");
	return 0;
}

/* num is the non-negative integer value of member key; 0 when absent. */
static long num(const char *obj, const char *end, const char *key) {
	const char *vs, *ve;
	if (!member(obj, end, key, &vs, &ve)) {
		return 0;
	}
	return strtol(vs, NULL, 10);
}

/* fill writes count blocks of size bytes to path. */
static int fill(const char *path, long count, long size) {
	char *buf = malloc((size_t)size);
	memset(buf, 'x', (size_t)size);
	long long written = 0;
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	int e = fd < 0 ? errno : 0;
	for (long i = 0; fd >= 0 && i < count && e == 0; i++) {
		ssize_t n = write(fd, buf, (size_t)size);
		if (n < 0) {
			e = errno;
		} else {
			written += n;
		}
	}
	if (fd >= 0 && close(fd) != 0 && e == 0) {
		e = errno;
	}
	if (e == 0) {
		printf("{\"output\":{\"ok\":true,\"written\":%lld}}\n", written);
		return 0;
	}
	printf("{\"output\":{\"ok\":false,\"errno\":%d,\"written\":%lld,\"error\":", e, written);
	const char *msg = strerror(e);
	put_str(msg, strlen(msg));
	printf("}}\n");
	return 0;
}

int main(void) {
	size_t n;
	char *req = read_all(&n);
	const char *in, *in_end;
	if (!req || !member(req, req + n, "input", &in, &in_end)) {
		puts("{\"error\":\"no input\"}");
		return 0;
	}
	char *path = str(in, in_end, "path");
	char *content = str(in, in_end, "content");
	if (member_is(in, in_end, "mode", "fill")) {
		return fill(path, num(in, in_end, "count"), num(in, in_end, "size"));
	}
	if (member_is(in, in_end, "mode", "write") || member_is(in, in_end, "mode", "append")) {
		FILE *f = fopen(path, member_is(in, in_end, "mode", "write") ? "w" : "a");
		if (!f) {
			return fail();
		}
		size_t len = strlen(content);
		if (fwrite(content, 1, len, f) != len) {
			fclose(f);
			return fail();
		}
		if (fclose(f) != 0) {
			return fail();
		}
		printf("{\"output\":{\"ok\":true}}\n");
		return 0;
	}
	if (member_is(in, in_end, "mode", "read")) {
		FILE *f = fopen(path, "r");
		if (!f) {
			return fail();
		}
		char buf[4096];
		size_t got = fread(buf, 1, sizeof buf, f);
		if (ferror(f)) {
			fclose(f);
			return fail();
		}
		fclose(f);
		printf("{\"output\":{\"ok\":true,\"data\":");
		put_str(buf, got);
		printf("}}\n");
		return 0;
	}
	puts("{\"error\":\"unknown mode\"}");
	return 0;
}
