package guest

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lhengine/lhengine/internal/testwasm"
)

// scribbleRun runs testdata/scribble.c, growing its memory by pages, and
// returns how many non-zero bytes it found in memory that must be fresh.
func scribbleRun(t testing.TB, p *Plugin, pages int, lim Limits) int {
	t.Helper()
	res, err := p.Run(context.Background(), Request{Input: json.RawMessage(fmt.Sprintf(`{"pages":%d}`, pages))}, lim, nil)
	require.NoError(t, err)
	var out struct{ Dirty int }
	require.NoError(t, json.Unmarshal(res.Output, &out), "output %s", res.Output)
	return out.Dirty
}

// TestMemoryNotShared proves an instance never sees what an earlier one
// left in its linear memory, whether its memory comes back from the pool
// cleared by writing zeros (the first poolKeepResident bytes) or by handing
// pages back to the kernel (the rest), and for memories of several limits.
func TestMemoryNotShared(t *testing.T) {
	p := loadAs(t, sharedRuntime(t), "scribble", testwasm.BuildC(t, "testdata/scribble.c"))
	bigPages := int(2*poolKeepResident/wasmPage) + 3 // well past keepResident
	for _, lim := range []Limits{{}, {MemoryBytes: 16 << 20}, {MemoryBytes: 1<<20 + 12345}} {
		pages := bigPages
		if lim.MemoryBytes != 0 && uint64(bigPages+8)*wasmPage > lim.MemoryBytes {
			pages = 4
		}
		for i := range 6 {
			n := pages
			if i%2 == 1 {
				n = 1 // a smaller attempt after a larger one
			}
			assert.Zero(t, scribbleRun(t, p, n, lim), "limit %d, attempt %d", lim.MemoryBytes, i)
		}
	}
}

// TestMemoryNotSharedConcurrent is TestMemoryNotShared with 16 attempts at
// once, for the race detector and the pool's locking.
func TestMemoryNotSharedConcurrent(t *testing.T) {
	p := loadAs(t, sharedRuntime(t), "scribble", testwasm.BuildC(t, "testdata/scribble.c"))
	var wg sync.WaitGroup
	for g := range 16 {
		wg.Go(func() {
			for i := range 8 {
				pages := []int{0, 3, 80}[(g+i)%3]
				lim := Limits{}
				if g%4 == 0 {
					lim.MemoryBytes = 8 << 20
				}
				assert.Zero(t, scribbleRun(t, p, pages, lim), "goroutine %d, attempt %d", g, i)
			}
		})
	}
	wg.Wait()
}

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
