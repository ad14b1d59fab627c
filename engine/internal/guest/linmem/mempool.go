package linmem

import (
	"sync"
)

// Linear memories are the largest per-attempt cost of a fresh instance:
// allocating (and zeroing) them on the Go heap made up most of a trivial
// attempt's time and drove the GC. A memPool keeps the memories of finished
// attempts for the next ones instead.
//
// A region is the backing store of one linear memory. Where the platform
// allows (see mmap_linux.go) it is an anonymous mapping of the whole
// reservation, the attempt's memory limit: growing the memory is then a
// reslice, never a copy, the pages a guest never touches cost nothing and
// none of it is on the Go heap. Elsewhere, or when the mapping fails, it is
// a Go slice grown by doubling, as wazero's own allocator does.
//
// A region in the pool is all zeros: put clears the bytes the attempt could
// have written, [0, dirty), where dirty is the largest memory size granted
// (a guest, and the host functions writing for it, can only write inside
// the memory's current size, and a memory never shrinks). So the next
// instance sees zeros there exactly as it would in a new allocation.
type region struct {
	buf    []byte // len is the memory size; cap the room before a copy
	size   uint64 // reservation, the pool's key
	mapped bool   // buf is an anonymous mapping of size bytes
	dirty  uint64 // bytes [0, dirty) may be non-zero
	// [0, frozen) is a private mapping of the memory file image
	// (Cap.Freeze) rather than anonymous memory; 0: none.
	frozen uint64
	image  frozenFile
}

// memPool is a bounded free list of regions by reservation size. It is safe
// for concurrent use.
type memPool struct {
	mu   sync.Mutex
	free map[uint64][]*region
	n    int // regions in free
	max  int // most regions kept

	// keepResident is how many leading bytes of a mapped region are
	// cleared by writing zeros (and so stay resident, warm for the next
	// attempt); past it dirty pages are handed back to the kernel, which
	// refills them with zeros on the next touch. It bounds the pool's
	// resident memory to about max*keepResident.
	keepResident uint64

	heapOnly bool // never map regions (for tests of the Go-heap path)
}

const (
	wasmPage = PageSize

	// poolMaxRegions bounds the regions kept: enough for the attempts a
	// process runs at once. The pool holds only as many as ran at once,
	// each keeping resident at most what its guests used, up to
	// poolKeepResident (so at most 256 MiB in all).
	poolMaxRegions = 32
	// poolKeepResident is memPool.keepResident. Writing zeros is much
	// cheaper than having the kernel drop pages and fault them back in
	// (on virtual machines a fault can cost 10 µs), so it is generous:
	// 8 MiB covers the whole memory of most guests, a small Go guest's
	// (about 3.5 MiB) included.
	poolKeepResident = KeepResident
	// poolMaxHeapRegion is the largest Go-heap region kept: larger ones
	// are left to the GC rather than held on to.
	poolMaxHeapRegion = 16 << 20
)

// linearMemories is the process's pool: every Runtime shares it.
var linearMemories = newMemPool(poolMaxRegions, poolKeepResident)

func newMemPool(max int, keepResident uint64) *memPool {
	return &memPool{free: map[uint64][]*region{}, max: max, keepResident: keepResident}
}

// reservation is the size of the region backing a memory limited to limit
// bytes: limit rounded up to whole Wasm pages.
func reservation(limit uint64) uint64 {
	const maxMemory = 1 << 32 // a 32-bit memory's maximum
	limit = min(limit, maxMemory)
	return max(wasmPage, (limit+wasmPage-1)/wasmPage*wasmPage)
}

// get returns an all-zero region of reservation size with room for at
// least hint bytes (a hint only: a heap region grows when asked).
func (p *memPool) get(size, hint uint64) *region {
	p.mu.Lock()
	if l := p.free[size]; len(l) > 0 {
		r := l[len(l)-1]
		l[len(l)-1] = nil
		p.free[size] = l[:len(l)-1]
		p.n--
		p.mu.Unlock()
		return r
	}
	p.mu.Unlock()
	if !p.heapOnly {
		if b, ok := mapRegion(size); ok {
			return &region{buf: b[:0], size: size, mapped: true}
		}
	}
	return &region{buf: make([]byte, 0, min(max(hint, wasmPage), size)), size: size}
}

// grow makes the region's memory n bytes long, n <= r.size, and returns it.
// Bytes past the old length are zero.
func (r *region) grow(n uint64) []byte {
	r.dirty = max(r.dirty, n)
	if n <= uint64(cap(r.buf)) {
		r.buf = r.buf[:n]
		return r.buf
	}
	// A heap region: double, as appending would, within the reservation.
	c := min(max(2*uint64(cap(r.buf)), n), r.size)
	nb := make([]byte, n, c)
	copy(nb, r.buf)
	r.buf = nb
	return nb
}

// put clears r and keeps it for a later get, or releases it when the pool
// is full. The caller must be done with r: nothing may read or write its
// memory any more.
func (p *memPool) put(r *region) {
	if !r.mapped && uint64(cap(r.buf)) > poolMaxHeapRegion {
		return // left to the GC
	}
	var clean uint64 // [0, clean) is zero already
	if r.frozen > 0 {
		// Anonymous zero pages again, in place of the image's file.
		ok := unfreezePages(r.buf[:r.frozen], r.image)
		clean, r.frozen, r.image = r.frozen, 0, frozenFile{}
		if !ok {
			r.release()
			return
		}
	}
	r.clear(p.keepResident, clean)
	r.buf = r.buf[:0]
	p.mu.Lock()
	if p.n < p.max {
		p.free[r.size] = append(p.free[r.size], r)
		p.n++
		p.mu.Unlock()
		return
	}
	p.mu.Unlock()
	r.release()
}

// clear zeroes [clean, r.dirty): [0, clean) is zero already.
func (r *region) clear(keepResident, clean uint64) {
	dirty := r.dirty
	r.dirty = 0
	full := r.buf[:cap(r.buf)]
	if dirty > uint64(len(full)) {
		dirty = uint64(len(full)) // cannot happen: grow keeps dirty <= cap
	}
	if from := max(keepResident, clean); r.mapped && dirty > from {
		// Pages past keepResident go back to the kernel, which gives
		// zero pages on the next touch. keepResident and clean are
		// page-aligned.
		if discardPages(full[from:dirty]) {
			dirty = from
		}
	}
	if clean < dirty {
		clear(full[clean:dirty])
	}
}

// release gives the region's memory back: unmaps it, or leaves it to the GC.
func (r *region) release() {
	if r.mapped {
		unmapRegion(r.buf[:cap(r.buf)])
	}
	r.buf = nil
}

// drain releases every region in the pool (for tests).
func (p *memPool) drain() {
	p.mu.Lock()
	free := p.free
	p.free = map[uint64][]*region{}
	p.n = 0
	p.mu.Unlock()
	for _, l := range free {
		for _, r := range l {
			r.release()
		}
	}
}

// PageSize is the size of a Wasm page.
const PageSize = 1 << 16

// KeepResident is how many leading bytes of a pooled memory are cleared by
// writing zeros (kept warm for the next instance); past it pages go back
// to the kernel.
const KeepResident = 8 << 20
