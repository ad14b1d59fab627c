/*
 * garbage.c: answers with something that is not exactly one JSON result
 * object, chosen by the input's "mode":
 *   trailing  a valid result followed by more text
 *   notjson   text that is not JSON
 *   empty     nothing at all
 *   array     a JSON array instead of an object
 *   two       two result objects
 *   badtype   an object whose "error" is not a string
 *
 *   clang-14 --target=wasm32-wasi -O2 -o garbage.wasm garbage.c
 */
#include <stdio.h>

#include "json.h"

int main(void) {
	size_t n;
	char *req = read_all(&n);
	const char *in, *in_end;
	if (!req || !member(req, req + n, "input", &in, &in_end)) {
		return 1;
	}
	if (member_is(in, in_end, "mode", "trailing")) {
		puts("{\"output\":1} and then some");
	} else if (member_is(in, in_end, "mode", "notjson")) {
		puts("this is not JSON");
	} else if (member_is(in, in_end, "mode", "array")) {
		puts("[{\"output\":1}]");
	} else if (member_is(in, in_end, "mode", "two")) {
		puts("{\"output\":1}\n{\"output\":2}");
	} else if (member_is(in, in_end, "mode", "badtype")) {
		puts("{\"error\":{\"code\":7}}");
	}
	/* "empty": write nothing */
	return 0;
}
