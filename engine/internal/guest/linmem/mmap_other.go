//go:build !linux

package linmem

// mapRegion reports false: outside Linux, regions are Go slices.
func mapRegion(uint64) ([]byte, bool) { return nil, false }

func unmapRegion([]byte) {}

func discardPages([]byte) bool { return false }
