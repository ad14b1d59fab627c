/*
 * loop.c: never returns. Only a step timeout stops it.
 *
 *   clang-14 --target=wasm32-wasi -O2 -o loop.wasm loop.c
 */
int main(void) {
	volatile unsigned long n = 0;
	for (;;) {
		n++;
	}
}
