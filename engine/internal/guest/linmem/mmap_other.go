//go:build !linux

package linmem

// mapRegion reports false: outside Linux, regions are Go slices.
func mapRegion(uint64) ([]byte, bool) { return nil, false }

func unmapRegion([]byte) {}

func discardPages([]byte) bool { return false }

// frozenFile is never made outside Linux.
type frozenFile struct{}

func freezePages([]byte) (frozenFile, bool) { return frozenFile{}, false }

func thawPages([]byte, frozenFile) bool { return false }

func unfreezePages([]byte, frozenFile) bool { return false }
