package linmem

import (
	"encoding/binary"
	"os"
	"sync"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
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

// frozenFile is the memory file of a frozen memory (freezePages): its
// descriptor, and a shared read-only mapping of it, which thawPages copies
// from.
type frozenFile struct {
	fd  int
	src []byte
}

// freezePages makes b (page-aligned, inside a region from mapRegion) a
// private mapping of a new memory file holding b's current bytes: reads
// see the same bytes, a write copies the page it writes (copy on write),
// and thawPages puts the file's bytes back into the pages copied. It
// returns the file, or false when it could not (b is then as it was).
func freezePages(b []byte) (frozenFile, bool) {
	if len(b) == 0 {
		return frozenFile{fd: -1}, false
	}
	fd, err := unix.MemfdCreate("lhengine-image", unix.MFD_CLOEXEC)
	if err != nil {
		return frozenFile{fd: -1}, false
	}
	// Only the pages the memory holds are written; the others have never
	// been touched, or were dropped, and read as zeros, as the file's holes
	// do. A Go plugin's image of 8 MiB holds about a third of its pages.
	touched, ok := writtenPages(b)
	if !ok {
		touched = [][2]int{{0, len(b)}}
	}
	if unix.Ftruncate(fd, int64(len(b))) != nil {
		_ = unix.Close(fd)
		return frozenFile{fd: -1}, false
	}
	for _, r := range touched {
		for off := r[0]; off < r[1]; {
			n, err := unix.Pwrite(fd, b[off:r[1]], int64(off))
			if err != nil || n == 0 {
				_ = unix.Close(fd)
				return frozenFile{fd: -1}, false
			}
			off += n
		}
	}
	src, err := unix.Mmap(fd, 0, len(b), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		_ = unix.Close(fd)
		return frozenFile{fd: -1}, false
	}
	p, err := unix.MmapPtr(fd, 0, unsafe.Pointer(&b[0]), uintptr(len(b)),
		unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_FIXED)
	if err != nil || p != unsafe.Pointer(&b[0]) {
		_ = unix.Munmap(src)
		_ = unix.Close(fd)
		return frozenFile{fd: -1}, false
	}
	return frozenFile{fd: fd, src: src}, true
}

// thawPages puts the frozen bytes back into b (from freezePages, whose
// file is f). Which pages were written since the kernel says
// (/proc/self/pagemap: a page copied on write is no longer the file's);
// only those are copied back, in place, from the file's shared mapping
// (a read of the file, pread, took twice as long per page). The others
// are still the file's pages and are left alone: no copy, and no fault on
// the next attempt's reads. Dropping the written pages instead
// (MADV_DONTNEED) measured slower: their next writes fault and copy again,
// which on a virtual machine costs more than the copy. Without pagemap
// every page is dropped.
func thawPages(b []byte, f frozenFile) bool {
	if len(b) == 0 {
		return true
	}
	written, ok := writtenPages(b)
	if !ok {
		return unix.Madvise(b, unix.MADV_DONTNEED) == nil
	}
	if len(f.src) != len(b) {
		return false
	}
	for _, r := range written {
		copy(b[r[0]:r[1]], f.src[r[0]:r[1]])
	}
	return true
}

// pagemap is /proc/self/pagemap, opened once (-1: it could not be).
var pagemap = sync.OnceValue(func() int {
	fd, err := unix.Open("/proc/self/pagemap", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1
	}
	return fd
})

// pagemap entry bits (Documentation/admin-guide/mm/pagemap.rst).
const (
	pagePresent = 1 << 63
	pageSwapped = 1 << 62
	pageFile    = 1 << 61 // file-backed or shared anonymous
)

// writtenPages returns the byte ranges of b (page-aligned) whose pages are
// private copies: present or swapped, and not the file's.
func writtenPages(b []byte) ([][2]int, bool) {
	fd := pagemap()
	if fd < 0 {
		return nil, false
	}
	page := os.Getpagesize()
	start := uintptr(unsafe.Pointer(&b[0]))
	if start%uintptr(page) != 0 || len(b)%page != 0 {
		return nil, false
	}
	n := len(b) / page
	buf := make([]byte, 8*n)
	for off := 0; off < len(buf); {
		k, err := unix.Pread(fd, buf[off:], int64(start/uintptr(page))*8+int64(off))
		if err != nil || k == 0 {
			return nil, false
		}
		off += k
	}
	var out [][2]int
	for i := range n {
		e := binary.LittleEndian.Uint64(buf[8*i:])
		if e&(pagePresent|pageSwapped) == 0 || e&pageFile != 0 {
			continue
		}
		if l := len(out); l > 0 && out[l-1][1] == i*page {
			out[l-1][1] += page
		} else {
			out = append(out, [2]int{i * page, (i + 1) * page})
		}
	}
	return out, true
}

// unfreezePages makes b anonymous zero pages again, as mapRegion left
// them, and closes the file.
func unfreezePages(b []byte, f frozenFile) bool {
	defer unix.Close(f.fd)
	if f.src != nil {
		_ = unix.Munmap(f.src)
	}
	if len(b) == 0 {
		return true
	}
	p, err := unix.MmapPtr(-1, 0, unsafe.Pointer(&b[0]), uintptr(len(b)),
		unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_NORESERVE|unix.MAP_FIXED)
	return err == nil && p == unsafe.Pointer(&b[0])
}
