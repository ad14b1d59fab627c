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

/* lhengine_log_str logs a NUL-terminated string, truncated to
 * LHENGINE_LOG_MAX bytes. */
static inline int32_t lhengine_log_str(int32_t level, const char *msg) {
	size_t n = strlen(msg);
	if (n > LHENGINE_LOG_MAX) {
		n = LHENGINE_LOG_MAX;
	}
	return lhengine_log(level, msg, (int32_t)n);
}

#undef LHENGINE_IMPORT

#ifdef __cplusplus
}
#endif

#endif /* LHENGINE_H */
