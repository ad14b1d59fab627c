// Package linmem holds the linear memories of guest instances: Cap, the
// allocator wazero calls for one instance's memory (refusing growth past
// the attempt's limit, remembering the refusal so it is classified as
// fault.Memory), and the process's pool of memory regions it draws from
// (mempool.go: mapped regions reserved up front where the platform allows,
// cleared for the next instance).
package linmem

import "github.com/tetratelabs/wazero/experimental"

// Cap is the allocator of one attempt's linear memory: it refuses to
// grow the memory past limit bytes, which makes the guest's memory.grow
// return -1. Guests usually turn that into a trap or an abort; the refusal is
// remembered so the failure can be classified as fault.Memory (Hit).
//
// The memory is a region of pool. wazero calls Allocate and Reallocate from
// the goroutine running the guest, so they need no locking. Free may come
// from elsewhere (closing the Runtime closes running instances) and does
// nothing: the region goes back to the pool in Done, which the runner calls once
// the instance has returned, when nothing can touch the memory any more.
type Cap struct {
	pool    *memPool
	limit   uint64
	hit     bool   // a growth was refused
	refused uint64 // the size refused
	peak    uint64 // the largest size granted
	reg     *region
	grown   bool // the initial allocation is done
}

var _ experimental.MemoryAllocator = (*Cap)(nil)

// New returns the allocator of a memory limited to limit bytes, its region
// taken from the process's pool.
func New(limit uint64) *Cap { return &Cap{pool: linearMemories, limit: limit} }

// Peak is the largest size granted (since BeginAttempt, for a reused
// instance).
func (m *Cap) Peak() uint64 { return m.peak }

// Hit says whether a growth was refused (the guest ran out of memory).
func (m *Cap) Hit() bool { return m.hit }

// RefusedSize is the size the refused growth asked for.
func (m *Cap) RefusedSize() uint64 { return m.refused }

// Allocate implements experimental.MemoryAllocator. An instance has one
// memory, so the allocator is its own LinearMemory.
func (m *Cap) Allocate(capacity, maxBytes uint64) experimental.LinearMemory {
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
func (m *Cap) Reallocate(size uint64) []byte {
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

// Free implements experimental.LinearMemory. See Done.
func (m *Cap) Free() {}

// Done returns the memory to the pool. The runner calls it when the
// instance is closed or never started, from the goroutine that ran it.
func (m *Cap) Done() {
	if m.reg != nil {
		m.pool.put(m.reg)
		m.reg = nil
	}
}

// Freeze makes the memory's current bytes its image, to be put back by
// Thaw: the memory becomes a private mapping of a memory file holding
// them, so that a write copies only the page it writes, and Thaw reads
// the image back into those pages alone. Putting the image back then
// costs the pages an attempt wrote, not the whole memory, and the image's
// pages are the file's, shared with the memory wherever the attempt did
// not write, not a second copy on the heap. It reports false where it
// cannot (a memory on the Go heap, a system other than Linux, a failed
// mapping): the caller keeps a copy of its own.
func (m *Cap) Freeze() bool {
	r := m.reg
	if r == nil || !r.mapped || r.frozen > 0 || len(r.buf) == 0 {
		return false
	}
	img, ok := freezePages(r.buf)
	if !ok {
		return false
	}
	r.frozen, r.image = uint64(len(r.buf)), img
	return true
}

// Thaw puts the image Freeze took back into the memory, which must not
// have grown since. It reports false when it could not: the memory is
// then in an unknown state, and must not serve again.
func (m *Cap) Thaw() bool {
	r := m.reg
	if r == nil || r.frozen == 0 || uint64(len(r.buf)) != r.frozen {
		return false
	}
	return thawPages(r.buf, r.image)
}

// BeginAttempt starts the accounting of an attempt in a reused instance:
// no growth refused yet, the peak the current size.
func (m *Cap) BeginAttempt() {
	m.hit, m.refused, m.peak = false, 0, m.Size()
}

// Size is the current size of the memory.
func (m *Cap) Size() uint64 {
	if m.reg == nil {
		return 0
	}
	return uint64(len(m.reg.buf))
}
