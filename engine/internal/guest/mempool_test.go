package guest

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lhengine/lhengine/engine/internal/guest/linmem"
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
// cleared by writing zeros (the first linmem.KeepResident bytes) or by handing
// pages back to the kernel (the rest), and for memories of several limits.
func TestMemoryNotShared(t *testing.T) {
	p := loadAs(t, sharedRuntime(t), "scribble", testwasm.BuildC(t, "testdata/scribble.c"))
	bigPages := int(2*linmem.KeepResident/linmem.PageSize) + 3 // well past keepResident
	for _, lim := range []Limits{{}, {MemoryBytes: 16 << 20}, {MemoryBytes: 1<<20 + 12345}} {
		pages := bigPages
		if lim.MemoryBytes != 0 && uint64(bigPages+8)*linmem.PageSize > lim.MemoryBytes {
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
