package linmem

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// TestFreezeThawPutsTheImageBack: a frozen memory reads as it was; writes
// after it (over pages of the image and beyond what any page held) are
// undone by Thaw, again and again; a memory that grew is not thawed; and
// the region, back in the pool, reads as zeros for the next memory.
func TestFreezeThawPutsTheImageBack(t *testing.T) {
	pool := newMemPool(4, wasmPage)
	t.Cleanup(pool.drain)
	m := &Cap{pool: pool, limit: 8 * wasmPage}
	m.Allocate(2*wasmPage, 0)
	mem := m.Reallocate(2 * wasmPage)
	require.Len(t, mem, 2*wasmPage)
	image := make([]byte, len(mem))
	for i := range image {
		image[i] = byte(i * 7)
	}
	copy(mem, image)
	require.True(t, m.Freeze())
	require.False(t, m.Freeze(), "frozen once")
	require.Equal(t, image, mem, "the same bytes, now the file's")
	for round := range 4 {
		mem[0], mem[5000], mem[len(mem)-1] = 0xFF, byte(round), 0xEE
		copy(mem[wasmPage:], bytes.Repeat([]byte{0xAB}, 4096))
		if round == 3 { // every page written: a guest that fills its memory
			copy(mem, bytes.Repeat([]byte{0x5A}, len(mem)))
		}
		require.True(t, m.Thaw())
		require.Equal(t, image, mem, "round %d: the image back", round)
	}
	m.Reallocate(3 * wasmPage)
	require.False(t, m.Thaw(), "a memory that grew past its image")
	m.Done()

	r := pool.get(reservation(8*wasmPage), wasmPage)
	again := r.grow(3 * wasmPage)
	require.Equal(t, make([]byte, 3*wasmPage), again, "zeros for the next memory")
	pool.put(r)
}

// BenchmarkThaw puts back an 8 MiB image after an attempt that wrote 52
// pages in 26 runs, what a small attempt of a stateless Go plugin writes.
func BenchmarkThaw(b *testing.B) {
	pool := newMemPool(4, wasmPage)
	b.Cleanup(pool.drain)
	m := &Cap{pool: pool, limit: 256 * wasmPage}
	m.Allocate(128*wasmPage, 0)
	mem := m.Reallocate(128 * wasmPage)
	for i := range mem {
		mem[i] = byte(i)
	}
	require.True(b, m.Freeze())
	defer m.Done()
	for b.Loop() {
		for run := range 26 {
			off := run * len(mem) / 26
			mem[off], mem[off+4096] = 1, 2
		}
		if !m.Thaw() {
			b.Fatal("not thawed")
		}
	}
}

// TestFreezeLeavesUntouchedPagesAsHoles: a memory whose pages were mostly
// never touched is frozen with only the touched ones written to the file;
// the others read as zeros, frozen and after every thaw, whatever an
// attempt wrote there.
func TestFreezeLeavesUntouchedPagesAsHoles(t *testing.T) {
	pool := newMemPool(4, wasmPage)
	t.Cleanup(pool.drain)
	m := &Cap{pool: pool, limit: 8 * wasmPage}
	m.Allocate(4*wasmPage, 0)
	mem := m.Reallocate(4 * wasmPage)
	mem[10], mem[2*wasmPage+5] = 1, 2 // two pages touched of many (read none: a read maps a page too)
	image := make([]byte, len(mem))
	image[10], image[2*wasmPage+5] = 1, 2
	require.True(t, m.Freeze())
	var st unix.Stat_t
	require.NoError(t, unix.Fstat(m.reg.image.fd, &st))
	require.Less(t, st.Blocks*512, int64(len(mem)), "the untouched pages are holes in the file (until read)")
	require.Equal(t, image, mem)
	for range 3 {
		copy(mem[wasmPage:], bytes.Repeat([]byte{0x77}, wasmPage))
		mem[10] = 9
		require.True(t, m.Thaw())
		require.Equal(t, image, mem)
	}
	m.Done()
}
