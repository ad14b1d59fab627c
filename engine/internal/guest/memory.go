package guest

import "github.com/tetratelabs/wazero/experimental"

// memoryCap is the allocator of one attempt's linear memory: it refuses to
// grow the memory past limit bytes, which makes the guest's memory.grow
// return -1. Guests usually turn that into a trap or an abort; the refusal is
// remembered so the failure can be classified as fault.Memory.
//
// The memory is a region of pool. wazero calls Allocate and Reallocate from
// the goroutine running the guest, so they need no locking. Free may come
// from elsewhere (closing the Runtime closes running instances) and does
// nothing: the region goes back to the pool in done, which Run calls once
// the instance has returned, when nothing can touch the memory any more.
type memoryCap struct {
	pool    *memPool
	limit   uint64
	hit     bool   // a growth was refused
	refused uint64 // the size refused
	peak    uint64 // the largest size granted
	reg     *region
	grown   bool // the initial allocation is done
}

var _ experimental.MemoryAllocator = (*memoryCap)(nil)

// Allocate implements experimental.MemoryAllocator. An instance has one
// memory, so the allocator is its own LinearMemory.
func (m *memoryCap) Allocate(capacity, maxBytes uint64) experimental.LinearMemory {
	if m.reg == nil {
		// The memory never grows past the limit, nor past the maximum
		// the module declares.
		limit := m.limit
		if maxBytes > 0 {
			limit = min(limit, maxBytes)
		}
		m.reg = m.pool.get(reservation(limit), min(capacity, m.limit))
	}
	return m
}

// Reallocate implements experimental.LinearMemory. Wasm memories never
// shrink; the region hands out zeros past the current length.
func (m *memoryCap) Reallocate(size uint64) []byte {
	// The first call allocates the module's declared minimum. wazero cannot
	// take a refusal there (Run checks the minimum against the limit before
	// instantiating), so it is never refused.
	first := !m.grown
	m.grown = true
	if size > m.limit && !first || size > m.reg.size {
		m.hit = true
		m.refused = size
		return nil
	}
	m.peak = max(m.peak, size)
	return m.reg.grow(size)
}

// Free implements experimental.LinearMemory. See done.
func (m *memoryCap) Free() {}

// done returns the memory to the pool. Run calls it when the instance is
// closed or never started, from the goroutine that ran it.
func (m *memoryCap) done() {
	if m.reg != nil {
		m.pool.put(m.reg)
		m.reg = nil
	}
}

// beginAttempt starts the accounting of an attempt in a reused instance:
// no growth refused yet, the peak the current size.
func (m *memoryCap) beginAttempt() {
	m.hit, m.refused, m.peak = false, 0, m.size()
}

// size is the current size of the memory.
func (m *memoryCap) size() uint64 {
	if m.reg == nil {
		return 0
	}
	return uint64(len(m.reg.buf))
}
