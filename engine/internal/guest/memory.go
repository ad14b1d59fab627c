package guest

import "github.com/tetratelabs/wazero/experimental"

// memoryCap is the allocator of one attempt's linear memory: it refuses to
// grow the memory past limit bytes, which makes the guest's memory.grow
// return -1. Guests usually turn that into a trap or an abort; the refusal is
// remembered so the failure can be classified as fault.Memory.
//
// wazero calls it from the goroutine running the guest (and frees the memory
// from there too), so it needs no locking.
type memoryCap struct {
	limit   uint64
	hit     bool   // a growth was refused
	refused uint64 // the size refused
	peak    uint64 // the largest size granted
	buf     []byte
	grown   bool // the initial allocation is done
}

var _ experimental.MemoryAllocator = (*memoryCap)(nil)

// Allocate implements experimental.MemoryAllocator. An instance has one
// memory, so the allocator is its own LinearMemory.
func (m *memoryCap) Allocate(capacity, _ uint64) experimental.LinearMemory {
	if capacity > m.limit {
		capacity = m.limit
	}
	m.buf = make([]byte, 0, capacity)
	return m
}

// Reallocate implements experimental.LinearMemory. Wasm memories never
// shrink, so bytes past len(m.buf) were never written and are still zero.
func (m *memoryCap) Reallocate(size uint64) []byte {
	// The first call allocates the module's declared minimum. wazero cannot
	// take a refusal there (Run checks the minimum against the limit before
	// instantiating), so it is never refused.
	first := !m.grown
	m.grown = true
	if size > m.limit && !first {
		m.hit = true
		m.refused = size
		return nil
	}
	m.peak = max(m.peak, size)
	if size <= uint64(cap(m.buf)) {
		m.buf = m.buf[:size]
		return m.buf
	}
	newCap := 2 * uint64(cap(m.buf))
	if newCap < size {
		newCap = size
	}
	if newCap > m.limit {
		newCap = max(m.limit, size)
	}
	nb := make([]byte, size, newCap)
	copy(nb, m.buf)
	m.buf = nb
	return nb
}

// Free implements experimental.LinearMemory.
func (m *memoryCap) Free() { m.buf = nil }
