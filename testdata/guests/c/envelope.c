/*
 * envelope.c: the smallest useful plugin. It imports nothing from the host
 * (ABI "1 (envelope only)"): it reads the request from stdin and answers
 * {"output": INPUT}, echoing the request's input.
 *
 *   clang-14 --target=wasm32-wasi -O2 -o envelope.wasm envelope.c
 */
#include <stdio.h>

#include "json.h"

int main(void) {
	size_t n;
	char *req = read_all(&n);
	const char *in, *in_end;
	if (!req || !member(req, req + n, "input", &in, &in_end)) {
		puts("{\"error\":\"no input in the request\"}");
		return 0;
	}
	fputs("{\"output\":", stdout);
	fwrite(in, 1, (size_t)(in_end - in), stdout);
	puts("}");
	return 0;
}
