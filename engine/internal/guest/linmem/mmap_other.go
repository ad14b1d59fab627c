//go:build !linux

package linmem

// mapRegion reports false: outside Linux, regions are Go slices.
func mapRegion(uint64) ([]byte, bool) { return nil, false }

func unmapRegion([]byte) {}

func discardPages([]byte) bool { return false }

func freezePages([]byte) (int, bool) { return -1, false }

func thawPages([]byte, int) bool { return false }

func unfreezePages([]byte, int) bool { return false }
