/*
 * lhengine.h: host capabilities of lhengine plugin ABI v1, for C guests.
 *
 * Header-only and optional: a plugin that only reads its request from stdin
 * and writes its result to stdout needs nothing from here. Include it to call
 * the host functions of the "lhengine_v1" import module. The contract is
 * specs/abi.md; this header only declares it.
 *
 * Build a plugin with:
 *
 *   clang-14 --target=wasm32-wasi -O2 -I plugins/sdk/c -o plugin.wasm plugin.c
 */
#ifndef LHENGINE_H
#define LHENGINE_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The ABI major version this header declares; the import module name is
 * "lhengine_v" followed by it. */
#define LHENGINE_ABI 1

/* Log levels for lhengine_log. */
#define LHENGINE_DEBUG 0
#define LHENGINE_INFO 1
#define LHENGINE_WARN 2
#define LHENGINE_ERROR 3

/* Largest message lhengine_log accepts, in bytes. */
#define LHENGINE_LOG_MAX 4096

/* Status codes: a host function returns a value >= 0 on success (a length or
 * 0) and one of these on failure. */
#define LHENGINE_ERR_RANGE -1       /* a (ptr, len) is outside linear memory */
#define LHENGINE_ERR_TOO_LARGE -2   /* the request is larger than allowed */
#define LHENGINE_ERR_INVALID -3     /* malformed request (bad JSON, bad level) */
#define LHENGINE_ERR_DENIED -4      /* not allowed by the task's policy */
#define LHENGINE_ERR_NOT_FOUND -5   /* the named thing does not exist */
#define LHENGINE_ERR_LEASE_LOST -6  /* the work unit's lease is lost; stop */
#define LHENGINE_ERR_BUDGET -7      /* a budget (host calls, cost) is spent */
#define LHENGINE_ERR_UNAVAILABLE -8 /* capability not available here */
#define LHENGINE_ERR_INTERNAL -9    /* the host failed; the call may be retried */
#define LHENGINE_ERR_PAUSED -10     /* the task is pausing for a human decision; stop */

/* Request size caps: larger requests are LHENGINE_ERR_TOO_LARGE. */
#define LHENGINE_CALL_NAME_MAX 64
#define LHENGINE_CALL_REQUEST_MAX (1 << 20)
#define LHENGINE_ARTIFACT_META_MAX 4096
#define LHENGINE_ARTIFACT_DATA_MAX (256 << 20)
#define LHENGINE_ARTIFACT_REF_MAX 1024

#define LHENGINE_IMPORT(name) \
	__attribute__((import_module("lhengine_v1"), import_name(name)))

/* version returns 1, the ABI major version. It does nothing else. */
LHENGINE_IMPORT("version") int32_t lhengine_version(void);

/* log appends msg[0:len] to the step's log at level (LHENGINE_DEBUG ..
 * LHENGINE_ERROR). Returns 0, or LHENGINE_ERR_RANGE, LHENGINE_ERR_TOO_LARGE
 * (len > LHENGINE_LOG_MAX), LHENGINE_ERR_INVALID (bad level),
 * LHENGINE_ERR_BUDGET. */
LHENGINE_IMPORT("log") int32_t lhengine_log(int32_t level, const char *msg, int32_t len);

/* heartbeat renews the lease of the work unit this attempt runs in. Returns
 * 0, or LHENGINE_ERR_LEASE_LOST, after which the attempt is being cancelled
 * and its result will be discarded. */
LHENGINE_IMPORT("heartbeat") int32_t lhengine_heartbeat(void);

/*
 * Functions with an output buffer (out, out_cap) return the full length n of
 * their result. If n <= out_cap it was written to out; otherwise nothing was
 * written and the result is kept as the pending result: fetch it with
 * lhengine_result into a buffer of at least n bytes, before any other host
 * call (which drops it).
 */

/* result writes the pending result to out and returns its length; it stays
 * pending when out_cap is too small (the length is returned, nothing
 * written) and is dropped once written. LHENGINE_ERR_NOT_FOUND when nothing
 * is pending. */
LHENGINE_IMPORT("result") int32_t lhengine_result(void *out, int32_t out_cap);

/* call performs the JSON capability name ("effect.do", "http.fetch",
 * "progress.count", "progress.note", "kv.get", "kv.put") with the JSON
 * object req and returns the length of its JSON response (see above).
 * Errors: LHENGINE_ERR_TOO_LARGE (name > 64 or req > 1 MiB),
 * LHENGINE_ERR_RANGE, LHENGINE_ERR_UNAVAILABLE (unknown name),
 * LHENGINE_ERR_INVALID (req not a UTF-8 JSON object), or the capability's
 * own refusal; lhengine_last_error says why. */
LHENGINE_IMPORT("call")
int32_t lhengine_call(const char *name, int32_t name_len, const char *req, int32_t req_len, char *out, int32_t out_cap);

/* artifact_put stores data[0:data_len] as an artifact described by the JSON
 * meta {"name":"report.md","media_type":"text/markdown"} and returns the
 * length of the JSON response {"ref":"sha256:<hex>","size":N}. Limits: meta
 * 4 KiB, data 256 MiB. */
LHENGINE_IMPORT("artifact_put")
int32_t lhengine_artifact_put(const char *meta, int32_t meta_len, const void *data, int32_t data_len, char *out,
                              int32_t out_cap);

/* artifact_read copies up to out_cap bytes of the artifact ref from offset
 * into out and returns how many (0 at the end). LHENGINE_ERR_NOT_FOUND for
 * an unknown ref. */
LHENGINE_IMPORT("artifact_read")
int32_t lhengine_artifact_read(const char *ref, int32_t ref_len, int64_t offset, void *out, int32_t out_cap);

/* last_error writes the message of this attempt's most recent failed host
 * call (nothing written when it does not fit) and returns its length; 0 when
 * no call has failed. */
LHENGINE_IMPORT("last_error") int32_t lhengine_last_error(char *out, int32_t out_cap);

/* lhengine_generate calls a model the step is granted ("model.generate",
 * specs/abi.md section 4.1) with the JSON request req[0:req_len], such as
 * {"model":"fast","key":"turn-1","messages":[{"role":"user","content":"hi"}]},
 * and returns the length of the JSON response {"text":...,"tool_calls":[...],
 * "stop_reason":...,"usage":{"input_tokens":N,"output_tokens":N},"cost":N,
 * "replayed":bool}, under the output convention (lhengine_result fetches a
 * response larger than out_cap). A call the unit made before under the same
 * key with the same request returns the recorded response, "replayed":true.
 * Errors: LHENGINE_ERR_DENIED (model not granted), LHENGINE_ERR_INVALID
 * (malformed request, or refused by the provider), LHENGINE_ERR_UNAVAILABLE
 * (the provider kept failing, or the key's variable is not set). */
static inline int32_t lhengine_generate(const char *req, int32_t req_len, char *out, int32_t out_cap) {
	return lhengine_call("model.generate", 14, req, req_len, out, out_cap);
}

/* lhengine_request_approval asks a person to decide ("approval.request",
 * specs/abi.md) with the JSON request req[0:req_len], such as
 * {"prompt":"Deploy?","subject":{"env":"prod"},"expires_in":"24h"}. The
 * first call returns LHENGINE_ERR_PAUSED: return from the step at once; the
 * unit waits, uncharged, and once a person decided the step runs again and
 * the same call returns the length of the JSON answer
 * {"approval":"3","decision":"approved"|"rejected"|"expired","by":...,"note":...}
 * under the output convention. */
static inline int32_t lhengine_request_approval(const char *req, int32_t req_len, char *out, int32_t out_cap) {
	return lhengine_call("approval.request", 16, req, req_len, out, out_cap);
}

/* lhengine_log_str logs a NUL-terminated string, truncated to
 * LHENGINE_LOG_MAX bytes. */
static inline int32_t lhengine_log_str(int32_t level, const char *msg) {
	size_t n = strlen(msg);
	if (n > LHENGINE_LOG_MAX) {
		n = LHENGINE_LOG_MAX;
	}
	return lhengine_log(level, msg, (int32_t)n);
}

/* lhengine_call_str is lhengine_call with NUL-terminated name and request. */
static inline int32_t lhengine_call_str(const char *name, const char *req, char *out, int32_t out_cap) {
	return lhengine_call(name, (int32_t)strlen(name), req, (int32_t)strlen(req), out, out_cap);
}

/* Policy parameters. A step request (the JSON object on stdin) carries a
 * "policy" object: the parameters the run's harness policies hand to the
 * step, such as {"single_tool":true,"few_shot":"examples/v2"}
 * (specs/policies.md); it is {} when none do. These functions find one
 * parameter in the request text without a JSON library. They scan, they do
 * not validate: give them the request as the engine sent it. */

/* lhengine_json_ws_ skips JSON white space. Internal. */
static inline const char *lhengine_json_ws_(const char *p, const char *end) {
	while (p < end && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')) {
		p++;
	}
	return p;
}

/* lhengine_json_skip_ returns the end of the JSON value at p, or NULL when
 * it is cut short. Internal. */
static inline const char *lhengine_json_skip_(const char *p, const char *end) {
	int depth = 0;
	do {
		p = lhengine_json_ws_(p, end);
		if (p >= end) {
			return NULL;
		}
		if (*p == '"') {
			for (p++; p < end && *p != '"'; p++) {
				if (*p == '\\') {
					p++;
				}
			}
			if (p >= end) {
				return NULL;
			}
			p++;
		} else if (*p == '{' || *p == '[') {
			depth++;
			p++;
			continue;
		} else if (*p == '}' || *p == ']') {
			depth--;
			p++;
		} else if (*p == ',' || *p == ':') {
			p++;
			continue;
		} else {
			while (p < end && *p != ',' && *p != '}' && *p != ']' && *p != ' ' && *p != '\n' && *p != '\r' && *p != '\t') {
				p++;
			}
		}
	} while (depth > 0);
	return p;
}

/* lhengine_json_member_ finds member key of the object at obj and sets
 * *val, *val_end to its value. Returns 1 when found. Internal. */
static inline int lhengine_json_member_(const char *obj, const char *end, const char *key, const char **val,
                                        const char **val_end) {
	size_t klen = strlen(key);
	const char *p = lhengine_json_ws_(obj, end);
	if (p >= end || *p != '{') {
		return 0;
	}
	p++;
	for (;;) {
		p = lhengine_json_ws_(p, end);
		if (p >= end || *p != '"') {
			return 0;
		}
		const char *k = p + 1;
		const char *kend = lhengine_json_skip_(p, end);
		if (!kend) {
			return 0;
		}
		p = lhengine_json_ws_(kend, end);
		if (p >= end || *p != ':') {
			return 0;
		}
		const char *v = lhengine_json_ws_(p + 1, end);
		const char *vend = lhengine_json_skip_(v, end);
		if (!vend) {
			return 0;
		}
		if ((size_t)(kend - 1 - k) == klen && memcmp(k, key, klen) == 0) {
			*val = v;
			*val_end = vend;
			return 1;
		}
		p = lhengine_json_ws_(vend, end);
		if (p >= end || *p != ',') {
			return 0;
		}
		p++;
	}
}

/* lhengine_policy_param finds parameter name in the "policy" object of the
 * request req (req_len bytes) and sets *val and *val_len to its value as
 * JSON text (a string keeps its quotes). Returns 1 when the parameter is
 * there, 0 when it is not. Names are compared byte for byte. */
static inline int lhengine_policy_param(const char *req, size_t req_len, const char *name, const char **val,
                                        size_t *val_len) {
	const char *end = req + req_len, *pol, *pol_end, *v, *v_end;
	if (!lhengine_json_member_(req, end, "policy", &pol, &pol_end) ||
	    !lhengine_json_member_(pol, pol_end, name, &v, &v_end)) {
		return 0;
	}
	*val = v;
	*val_len = (size_t)(v_end - v);
	return 1;
}

/* lhengine_policy_bool returns 1 when parameter name is true, 0 otherwise. */
static inline int lhengine_policy_bool(const char *req, size_t req_len, const char *name) {
	const char *v;
	size_t n;
	return lhengine_policy_param(req, req_len, name, &v, &n) && n == 4 && memcmp(v, "true", 4) == 0;
}

/* lhengine_policy_int returns parameter name as a whole number, or def when
 * it is absent or not a number. */
static inline long lhengine_policy_int(const char *req, size_t req_len, const char *name, long def) {
	const char *v;
	size_t n;
	if (!lhengine_policy_param(req, req_len, name, &v, &n) || n == 0 || n > 19) {
		return def;
	}
	long x = 0;
	size_t i = 0;
	int neg = v[0] == '-';
	if (neg) {
		i = 1;
	}
	if (i == n) {
		return def;
	}
	for (; i < n; i++) {
		if (v[i] < '0' || v[i] > '9') {
			return def;
		}
		x = x * 10 + (v[i] - '0');
	}
	return neg ? -x : x;
}

/* lhengine_policy_string copies string parameter name, without its quotes
 * and with escapes left as they are, into out (NUL-terminated) and returns
 * its length; -1 when it is absent, not a string or does not fit in out_cap
 * bytes with the NUL. */
static inline int lhengine_policy_string(const char *req, size_t req_len, const char *name, char *out, size_t out_cap) {
	const char *v;
	size_t n;
	if (!lhengine_policy_param(req, req_len, name, &v, &n) || n < 2 || v[0] != '"' || n - 2 + 1 > out_cap) {
		return -1;
	}
	memcpy(out, v + 1, n - 2);
	out[n - 2] = 0;
	return (int)(n - 2);
}

/* lhengine_objective sets *val and *val_len to the task's objective as
 * JSON text (a string, with its quotes and escapes) from the request req
 * (req_len bytes); lhengine_constraints to its constraints (an array of
 * strings). Each returns 1 when the request has it, 0 when the task
 * declares none. Both are verbatim: never summarise them away. */
static inline int lhengine_objective(const char *req, size_t req_len, const char **val, size_t *val_len) {
	const char *v, *v_end;
	if (!lhengine_json_member_(req, req + req_len, "objective", &v, &v_end)) {
		return 0;
	}
	*val = v;
	*val_len = (size_t)(v_end - v);
	return 1;
}

static inline int lhengine_constraints(const char *req, size_t req_len, const char **val, size_t *val_len) {
	const char *v, *v_end;
	if (!lhengine_json_member_(req, req + req_len, "constraints", &v, &v_end)) {
		return 0;
	}
	*val = v;
	*val_len = (size_t)(v_end - v);
	return 1;
}

/* Reading the request and writing the result. */

/* lhengine_read_request reads the whole request (the JSON object on stdin)
 * into a NUL-terminated buffer from malloc and sets *len to its length.
 * Returns NULL when memory runs out or stdin cannot be read. */
static inline char *lhengine_read_request(size_t *len) {
	size_t cap = 1 << 16, n = 0;
	char *buf = (char *)malloc(cap);
	if (!buf) {
		return NULL;
	}
	for (;;) {
		if (cap - n < 2) {
			char *b = (char *)realloc(buf, cap * 2);
			if (!b) {
				free(buf);
				return NULL;
			}
			buf = b;
			cap *= 2;
		}
		size_t r = fread(buf + n, 1, cap - n - 1, stdin);
		n += r;
		if (r == 0) {
			break;
		}
	}
	if (ferror(stdin)) {
		free(buf);
		return NULL;
	}
	buf[n] = 0;
	*len = n;
	return buf;
}

/* lhengine_json_field sets *val and *val_len to the JSON text of member key
 * of the JSON object obj (obj_len bytes), such as a field of the input. A
 * string keeps its quotes and escapes. Returns 1 when the object has the
 * member, 0 when not (or obj is not an object). It scans, it does not
 * validate: give it JSON as the engine sent it. */
static inline int lhengine_json_field(const char *obj, size_t obj_len, const char *key, const char **val,
                                      size_t *val_len) {
	const char *v, *v_end;
	if (!lhengine_json_member_(obj, obj + obj_len, key, &v, &v_end)) {
		return 0;
	}
	*val = v;
	*val_len = (size_t)(v_end - v);
	return 1;
}

/* lhengine_request_field is lhengine_json_field of the request req: name is
 * "task_id", "task_name", "step", "item", "attempt", "repair", "input",
 * "policy", "now", "environment", "objective" or "constraints"
 * (specs/abi.md section 3). */
static inline int lhengine_request_field(const char *req, size_t req_len, const char *name, const char **val,
                                         size_t *val_len) {
	return lhengine_json_field(req, req_len, name, val, val_len);
}

/* lhengine_json_quote writes s[0:n] as a JSON string, with its quotes, to
 * out when the whole of it and a NUL fit in out_cap bytes, and returns its
 * length (without the NUL) either way. */
static inline size_t lhengine_json_quote(const char *s, size_t n, char *out, size_t out_cap) {
	static const char hex[] = "0123456789abcdef";
	size_t k = 0;
	char tmp[7];
	for (size_t i = 0; i <= n + 1; i++) {
		const char *piece = tmp;
		size_t len = 1;
		if (i == 0 || i == n + 1) {
			tmp[0] = '"';
		} else {
			unsigned char c = (unsigned char)s[i - 1];
			if (c == '"' || c == '\\') {
				tmp[0] = '\\';
				tmp[1] = (char)c;
				len = 2;
			} else if (c < 0x20) {
				memcpy(tmp, "\\u00", 4);
				tmp[4] = hex[c >> 4];
				tmp[5] = hex[c & 15];
				len = 6;
			} else {
				tmp[0] = (char)c;
			}
		}
		if (k + len < out_cap) {
			memcpy(out + k, piece, len);
		}
		k += len;
	}
	if (k < out_cap) {
		out[k] = 0;
	}
	return k;
}

/* lhengine_write_string writes s (NUL-terminated) to f as a JSON string. */
static inline void lhengine_write_string(FILE *f, const char *s) {
	size_t n = strlen(s);
	size_t need = lhengine_json_quote(s, n, NULL, 0);
	char *q = (char *)malloc(need + 1);
	if (!q) {
		fputs("\"\"", f);
		return;
	}
	lhengine_json_quote(s, n, q, need + 1);
	fwrite(q, 1, need, f);
	free(q);
}

/* lhengine_ok writes the result {"output": JSON} to stdout, where json is
 * json_len bytes of JSON text (NULL for a null output). Write one result
 * per attempt, then return from main. */
static inline void lhengine_ok(const char *json, size_t json_len) {
	fputs("{\"output\":", stdout);
	if (json) {
		fwrite(json, 1, json_len, stdout);
	} else {
		fputs("null", stdout);
	}
	fputs("}\n", stdout);
}

/* lhengine_fail writes the result {"error": msg}: the step fails with kind
 * plugin_error and this message, and its retry block may try again. */
static inline void lhengine_fail(const char *msg) {
	fputs("{\"error\":", stdout);
	lhengine_write_string(stdout, msg);
	fputs("}\n", stdout);
}

/* lhengine_needs_repair writes the result {"needs_repair": true, "reason":
 * reason}: the step's check failed and its repair block applies. */
static inline void lhengine_needs_repair(const char *reason) {
	fputs("{\"needs_repair\":true,\"reason\":", stdout);
	lhengine_write_string(stdout, reason);
	fputs("}\n", stdout);
}

/* lhengine_call_pair_ calls capability name with the request
 * {"K1":"V1","K2":V2}, V1 quoted as a JSON string, V2 too when quote2 and
 * taken as JSON text otherwise, or {"K1":"V1"} when k2 is NULL. A NULL out
 * discards a response of up to 64 bytes. Internal. */
static inline int32_t lhengine_call_pair_(const char *name, const char *k1, const char *v1, const char *k2,
                                          const char *v2, int quote2, char *out, int32_t out_cap) {
	size_t n1 = lhengine_json_quote(v1, strlen(v1), NULL, 0);
	size_t n2 = !k2 ? 0 : quote2 ? lhengine_json_quote(v2, strlen(v2), NULL, 0) : strlen(v2);
	size_t cap = n1 + n2 + strlen(k1) + (k2 ? strlen(k2) : 0) + 16;
	char *req = (char *)malloc(cap);
	if (!req) {
		return LHENGINE_ERR_INTERNAL;
	}
	size_t k = (size_t)snprintf(req, cap, "{\"%s\":", k1);
	k += lhengine_json_quote(v1, strlen(v1), req + k, cap - k);
	if (!k2) {
		/* {"K1":"V1"} */
	} else if (quote2) {
		k += (size_t)snprintf(req + k, cap - k, ",\"%s\":", k2);
		k += lhengine_json_quote(v2, strlen(v2), req + k, cap - k);
	} else {
		k += (size_t)snprintf(req + k, cap - k, ",\"%s\":", k2);
		memcpy(req + k, v2, n2);
		k += n2;
	}
	req[k++] = '}';
	char small[64];
	if (!out) {
		out = small;
		out_cap = (int32_t)sizeof small;
	}
	int32_t rc = lhengine_call(name, (int32_t)strlen(name), req, (int32_t)k, out, out_cap);
	free(req);
	return rc;
}

/* lhengine_count adds delta to the task's progress counter name
 * ("progress.count"). Returns 0 or a status code. */
static inline int32_t lhengine_count(const char *name, long delta) {
	char num[24];
	snprintf(num, sizeof num, "%ld", delta);
	int32_t rc = lhengine_call_pair_("progress.count", "name", name, "delta", num, 0, NULL, 0);
	return rc < 0 ? rc : 0;
}

/* lhengine_note proposes a progress note ("progress.note") of kind
 * "finding", "decision" or "blocker". Returns 0 or a status code. */
static inline int32_t lhengine_note(const char *kind, const char *text) {
	int32_t rc = lhengine_call_pair_("progress.note", "kind", kind, "text", text, 1, NULL, 0);
	return rc < 0 ? rc : 0;
}

/* lhengine_kv_put sets key of the work unit's key-value state to the JSON
 * text value ("kv.put"). Returns 0 or a status code. */
static inline int32_t lhengine_kv_put(const char *key, const char *value_json) {
	int32_t rc = lhengine_call_pair_("kv.put", "key", key, "value", value_json, 0, NULL, 0);
	return rc < 0 ? rc : 0;
}

/* lhengine_kv_get reads key ("kv.get") and returns the length of the JSON
 * response {"found":true,"value":JSON} or {"found":false}, under the
 * output convention. */
static inline int32_t lhengine_kv_get(const char *key, char *out, int32_t out_cap) {
	return lhengine_call_pair_("kv.get", "key", key, NULL, NULL, 0, out, out_cap);
}

/* lhengine_fetch makes the request req ("http.fetch", a JSON object such as
 * {"method":"GET","url":"http://..."}) and returns the length of the JSON
 * response, under the output convention. */
static inline int32_t lhengine_fetch(const char *req, char *out, int32_t out_cap) {
	return lhengine_call_str("http.fetch", req, out, out_cap);
}

/* lhengine_effect performs the effect req ("effect.do", a JSON object
 * {"key":...,"kind":"http"|"file","request":{...}}) once per key and
 * returns the length of the JSON response {"result":{...},"replayed":bool},
 * under the output convention. */
static inline int32_t lhengine_effect(const char *req, char *out, int32_t out_cap) {
	return lhengine_call_str("effect.do", req, out, out_cap);
}

#undef LHENGINE_IMPORT

#ifdef __cplusplus
}
#endif

#endif /* LHENGINE_H */
