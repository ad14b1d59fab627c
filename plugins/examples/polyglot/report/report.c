/*
 * report: the polyglot example's last step, in C with lhengine.h
 * (plugins/sdk/c): one line of text from the input's "words", "letters" and
 * "longest" (whole numbers), passing on its "langs" as they are, and a note
 * (progress.note) of the line.
 *
 *   clang-14 --target=wasm32-wasi -O2 -Wall -Werror -I plugins/sdk/c \
 *     -o plugins/examples/polyglot/report.wasm plugins/examples/polyglot/report/report.c
 */
#include <stdio.h>
#include <stdlib.h>

#include "lhengine.h"

/* number reads the whole number in member key of input into *out. */
static int number(const char *input, size_t input_len, const char *key, long *out) {
	const char *v;
	size_t n;
	if (!lhengine_json_field(input, input_len, key, &v, &n) || n == 0 || n > 20) {
		return 0;
	}
	char buf[24];
	snprintf(buf, sizeof buf, "%.*s", (int)n, v);
	char *end;
	*out = strtol(buf, &end, 10);
	return *end == 0;
}

int main(void) {
	size_t len;
	char *req = lhengine_read_request(&len);
	if (!req) {
		lhengine_fail("cannot read the request");
		return 0;
	}
	const char *input, *langs;
	size_t input_len, langs_len;
	long words, letters, longest;
	if (!lhengine_request_field(req, len, "input", &input, &input_len) ||
	    !number(input, input_len, "words", &words) || !number(input, input_len, "letters", &letters) ||
	    !number(input, input_len, "longest", &longest)) {
		lhengine_fail("input must have the whole numbers words, letters and longest");
		free(req);
		return 0;
	}
	if (!lhengine_json_field(input, input_len, "langs", &langs, &langs_len)) {
		langs = "[]";
		langs_len = 2;
	}
	char line[256];
	snprintf(line, sizeof line, "%ld words, %ld letters, %.1f letters a word, the longest %ld", words, letters,
	         words > 0 ? (double)letters / (double)words : 0.0, longest);
	if (lhengine_note("finding", line) < 0) {
		char why[512];
		int32_t w = lhengine_last_error(why, sizeof why - 1);
		why[w >= 0 && w < (int32_t)sizeof why ? w : 0] = 0;
		lhengine_fail(why);
		free(req);
		return 0;
	}
	printf("{\"output\":{\"lang\":\"c\",\"summary\":\"%s\",\"langs\":%.*s}}\n", line, (int)langs_len, langs);
	free(req);
	return 0;
}
