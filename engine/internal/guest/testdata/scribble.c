/*
 * scribble.c: checks that the linear memory it starts with is all zeros,
 * then dirties it, so that a later instance reusing the memory would see
 * it. Input {"pages": N}: it also grows the memory by N pages and does the
 * same there. It answers {"output": {"dirty": D}}, D being how many bytes
 * it found non-zero (0 unless memory leaks between instances).
 *
 *   clang-14 --target=wasm32-wasi -O2 -o scribble.wasm scribble.c
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PAGE 65536

static unsigned char bss[4 * PAGE];

/* count_nonzero reads through a volatile pointer: the compiler may not
 * assume the memory holds what the program last wrote to it. */
static size_t count_nonzero(volatile unsigned char *p, size_t n) {
	size_t d = 0;
	for (size_t i = 0; i < n; i++) {
		d += p[i] != 0;
	}
	return d;
}

int main(void) {
	char req[4096];
	size_t n = fread(req, 1, sizeof req - 1, stdin);
	req[n] = 0;
	const char *p = strstr(req, "\"pages\":");
	long pages = p ? strtol(p + 8, NULL, 10) : 0;

	size_t dirty = count_nonzero(bss, sizeof bss);
	unsigned char *grown = NULL;
	if (pages > 0) {
		size_t old = __builtin_wasm_memory_grow(0, (size_t)pages);
		if (old == (size_t)-1) {
			puts("{\"error\":\"memory.grow refused\"}");
			return 0;
		}
		grown = (unsigned char *)(old * PAGE);
		dirty += count_nonzero(grown, (size_t)pages * PAGE);
	}
	memset(bss, 0xA5, sizeof bss);
	if (grown) {
		memset(grown, 0xA5, (size_t)pages * PAGE);
	}
	printf("{\"output\":{\"dirty\":%zu}}\n", dirty);
	return 0;
}
