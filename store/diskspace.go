package store

// DefaultMinFreeBytes is the free-space floor when Options.MinFreeBytes is 0.
// Badger writes its write-ahead log, value log and tables through memory
// maps of files it extends without allocating them; if the disk fills up,
// the first write to an unallocated page kills the process with SIGBUS. The
// floor covers what Badger may allocate on its own after one more write: a
// memtable flush (16 MiB) and a level-0 compaction (up to five flushed tables
// and the level-1 tables they overlap).
const DefaultMinFreeBytes = 128 << 20

// MinFreeBytes is the store's free-space floor (Options.MinFreeBytes): 0
// when it enforces none (in memory, or the check disabled).
func (s *Store) MinFreeBytes() int64 {
	if s == nil {
		return 0
	}
	return s.space.Bytes()
}
