/*
 * flood.c: writes to stdout forever, ignoring write errors.
 *
 *   clang-14 --target=wasm32-wasi -O2 -o flood.wasm flood.c
 */
#include <stdio.h>
#include <string.h>

int main(void) {
	static char buf[64 << 10];
	memset(buf, 'x', sizeof buf);
	for (;;) {
		fwrite(buf, 1, sizeof buf, stdout);
	}
}
