package linmem

import (
	"syscall"
	"unsafe"
)

// mapRegion reserves size bytes of zeroed, private, anonymous memory. Pages
// are only backed once touched (MAP_NORESERVE: no swap is reserved for the
// rest), so reserving a memory's whole limit up front costs address space,
// not memory. It reports false when the mapping fails or on 32-bit
// platforms, whose address space is too small to reserve limits in.
func mapRegion(size uint64) ([]byte, bool) {
	if unsafe.Sizeof(uintptr(0)) < 8 {
		return nil, false
	}
	b, err := syscall.Mmap(-1, 0, int(size), syscall.PROT_READ|syscall.PROT_WRITE,
		syscall.MAP_PRIVATE|syscall.MAP_ANONYMOUS|syscall.MAP_NORESERVE)
	if err != nil {
		return nil, false
	}
	return b, true
}

// unmapRegion releases a region from mapRegion.
func unmapRegion(b []byte) { _ = syscall.Munmap(b) }

// discardPages drops the pages of b (page-aligned) from a private anonymous
// mapping: on Linux their next touch reads zeros. It reports false if they
// were not dropped, and b must then be cleared by hand.
func discardPages(b []byte) bool {
	if len(b) == 0 {
		return true
	}
	return syscall.Madvise(b, syscall.MADV_DONTNEED) == nil
}
