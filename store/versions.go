package store

import "github.com/dgraph-io/badger/v4"

// TaskVersion is a task's id and the commit version of its record. Every
// operation that changes anything of a task a Task read returns (its
// header or any step) writes the header, so a version that did not change
// means a task that did not change.
type TaskVersion struct {
	ID      string
	Version uint64
}

// TaskVersions returns the version of every task, oldest first, reading
// keys only: what a reader that keeps tasks it has read needs to know which
// to read again (the task list stream of the API).
func (r *Reader) TaskVersions() ([]TaskVersion, error) {
	opts := badger.DefaultIteratorOptions
	opts.Prefix = []byte("t/")
	opts.PrefetchValues = false
	it := r.t.txn.NewIterator(opts)
	defer it.Close()
	var out []TaskVersion
	for it.Rewind(); it.Valid(); it.Next() {
		item := it.Item()
		out = append(out, TaskVersion{ID: string(item.Key()[2:]), Version: item.Version()})
	}
	return out, nil
}
