/*
 * environ.c: answers {"output": {"environment": ENV, "input": INPUT}}, ENV
 * the request's "environment" member (the task's environment facts; null
 * when the request has none).
 */
#include <stdio.h>

#include "json.h"

int main(void) {
	size_t n;
	char *req = read_all(&n);
	if (!req) {
		puts("{\"error\":\"no request\"}");
		return 0;
	}
	const char *env, *env_end, *in, *in_end;
	if (!member(req, req + n, "environment", &env, &env_end)) {
		env = "null";
		env_end = env + 4;
	}
	if (!member(req, req + n, "input", &in, &in_end)) {
		in = "null";
		in_end = in + 4;
	}
	fputs("{\"output\":{\"environment\":", stdout);
	fwrite(env, 1, (size_t)(env_end - env), stdout);
	fputs(",\"input\":", stdout);
	fwrite(in, 1, (size_t)(in_end - in), stdout);
	puts("}}");
	return 0;
}
