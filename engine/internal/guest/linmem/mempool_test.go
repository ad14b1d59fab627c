package linmem

import (
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestMemPool checks the pool on its own: every region it hands out reads
// as zeros over its whole reservation, however the last user left it, with
// 16 users at once.
func TestMemPool(t *testing.T) {
	t.Run("mapped", func(t *testing.T) { testMemPool(t, false) })
	t.Run("heap", func(t *testing.T) { testMemPool(t, true) })
}

func testMemPool(t *testing.T, heapOnly bool) {
	const keep = 2 * wasmPage
	pool := newMemPool(4, keep)
	pool.heapOnly = heapOnly
	t.Cleanup(pool.drain)
	sizes := []uint64{reservation(1 << 20), reservation(3*wasmPage + 1)}
	var wg sync.WaitGroup
	for g := range 16 {
		wg.Go(func() {
			for i := range 50 {
				size := sizes[(g+i)%len(sizes)]
				r := pool.get(size, wasmPage)
				require.Equal(t, size, r.size)
				n := uint64(1+(g*7+i)%int(size/wasmPage)) * wasmPage
				mem := r.grow(n)
				require.Len(t, mem, int(n))
				for j, b := range mem {
					if b != 0 {
						t.Errorf("goroutine %d, round %d: byte %d of a fresh memory is %#x", g, i, j, b)
						break
					}
				}
				for j := range mem {
					mem[j] = 0xA5
				}
				pool.put(r)
			}
		})
	}
	wg.Wait()
	pool.mu.Lock()
	defer pool.mu.Unlock()
	assert.LessOrEqual(t, pool.n, pool.max)
}

func TestReservation(t *testing.T) {
	assert.Equal(t, uint64(wasmPage), reservation(0))
	assert.Equal(t, uint64(wasmPage), reservation(1))
	assert.Equal(t, uint64(2*wasmPage), reservation(wasmPage+1))
	assert.Equal(t, uint64(64<<20), reservation(64<<20))
	assert.Equal(t, uint64(1<<32), reservation(1<<40))
}
