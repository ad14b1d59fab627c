// Package testbadger reads a Badger store the way a test that looks for
// leaks does: every key and value, in the raw.
package testbadger

import (
	"testing"

	"github.com/dgraph-io/badger/v4"
	"github.com/stretchr/testify/require"
)

// RequireAbsent fails t if any key or value of the Badger store in dir
// (closed: it is opened here) holds secret, and returns how many entries
// it read.
func RequireAbsent(t testing.TB, dir, secret string) int {
	t.Helper()
	db, err := badger.Open(badger.DefaultOptions(dir).WithLogger(nil))
	require.NoError(t, err)
	defer db.Close()
	n := 0
	require.NoError(t, db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.DefaultIteratorOptions)
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			n++
			key := it.Item().KeyCopy(nil)
			require.NotContains(t, string(key), secret)
			require.NoError(t, it.Item().Value(func(v []byte) error {
				require.NotContains(t, string(v), secret, "the value of %s", key)
				return nil
			}))
		}
		return nil
	}))
	return n
}
