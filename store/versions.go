package store

import (
	"github.com/dgraph-io/badger/v4"

	"github.com/lhengine/lhengine/ledger"
)

// TaskVersions returns the version of every task, oldest first, reading
// keys only: what a reader that keeps tasks it has read needs to know which
// to read again (the task list stream of the API).
func (r *reader) TaskVersions() ([]ledger.TaskVersion, error) {
	opts := badger.DefaultIteratorOptions
	opts.Prefix = []byte("t/")
	opts.PrefetchValues = false
	it := r.t.Txn().NewIterator(opts)
	defer it.Close()
	var out []ledger.TaskVersion
	for it.Rewind(); it.Valid(); it.Next() {
		item := it.Item()
		out = append(out, ledger.TaskVersion{ID: string(item.Key()[2:]), Version: item.Version()})
	}
	return out, nil
}
