/*
 * json.h: the few lines of JSON scanning the C test guests need. Not a
 * parser: it finds the byte span of a member of an object, which is all a
 * plugin needs to pick fields out of its request and echo them back.
 */
#ifndef GUEST_JSON_H
#define GUEST_JSON_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* read_all reads stdin to its end into a NUL-terminated heap buffer. */
static inline char *read_all(size_t *len) {
	size_t cap = 4096, n = 0;
	char *buf = malloc(cap);
	if (!buf) {
		return NULL;
	}
	for (;;) {
		if (n + 1 >= cap) {
			cap *= 2;
			char *nb = realloc(buf, cap);
			if (!nb) {
				free(buf);
				return NULL;
			}
			buf = nb;
		}
		size_t r = fread(buf + n, 1, cap - n - 1, stdin);
		if (r == 0) {
			break;
		}
		n += r;
	}
	buf[n] = 0;
	*len = n;
	return buf;
}

static inline const char *skip_ws(const char *p, const char *end) {
	while (p < end && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')) {
		p++;
	}
	return p;
}

/* skip_value returns the end of the JSON value starting at p, or NULL. */
static inline const char *skip_value(const char *p, const char *end) {
	p = skip_ws(p, end);
	if (p >= end) {
		return NULL;
	}
	if (*p == '"') {
		for (p++; p < end; p++) {
			if (*p == '\\') {
				p++;
			} else if (*p == '"') {
				return p + 1;
			}
		}
		return NULL;
	}
	if (*p == '{' || *p == '[') {
		int depth = 0;
		for (; p < end; p++) {
			if (*p == '"') {
				p = skip_value(p, end);
				if (!p) {
					return NULL;
				}
				p--;
			} else if (*p == '{' || *p == '[') {
				depth++;
			} else if (*p == '}' || *p == ']') {
				if (--depth == 0) {
					return p + 1;
				}
			}
		}
		return NULL;
	}
	while (p < end && !strchr(",}] \t\r\n", *p)) { /* number, true, false, null */
		p++;
	}
	return p;
}

/* member finds key in the object [obj, end) and sets [*vs, *ve) to its value. */
static inline int member(const char *obj, const char *end, const char *key, const char **vs, const char **ve) {
	size_t klen = strlen(key);
	const char *p = skip_ws(obj, end);
	if (p >= end || *p != '{') {
		return 0;
	}
	p++;
	for (;;) {
		p = skip_ws(p, end);
		if (p >= end || *p != '"') {
			return 0;
		}
		const char *ks = p + 1;
		const char *ke = skip_value(p, end);
		if (!ke) {
			return 0;
		}
		p = skip_ws(ke, end);
		if (p >= end || *p != ':') {
			return 0;
		}
		const char *v = skip_ws(p + 1, end);
		const char *e = skip_value(v, end);
		if (!e) {
			return 0;
		}
		if ((size_t)(ke - 1 - ks) == klen && memcmp(ks, key, klen) == 0) {
			*vs = v;
			*ve = e;
			return 1;
		}
		p = skip_ws(e, end);
		if (p < end && *p == ',') {
			p++;
		}
	}
}

/* member_is reports whether obj's member key is the JSON string "want". */
static inline int member_is(const char *obj, const char *end, const char *key, const char *want) {
	const char *vs, *ve;
	size_t n = strlen(want);
	return member(obj, end, key, &vs, &ve) && (size_t)(ve - vs) == n + 2 && vs[0] == '"' &&
	       memcmp(vs + 1, want, n) == 0;
}

#endif
