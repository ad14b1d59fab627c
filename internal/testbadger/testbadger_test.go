package testbadger_test

import (
	"testing"

	"github.com/dgraph-io/badger/v4"
	"github.com/stretchr/testify/require"

	"github.com/lhengine/lhengine/internal/testbadger"
)

// TestRequireAbsent reads every entry of a store that does not hold the
// secret.
func TestRequireAbsent(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db, err := badger.Open(badger.DefaultOptions(dir).WithLogger(nil))
	require.NoError(t, err)
	require.NoError(t, db.Update(func(txn *badger.Txn) error {
		for _, k := range []string{"a", "b", "c"} {
			if err := txn.Set([]byte(k), []byte("value of "+k)); err != nil {
				return err
			}
		}
		return nil
	}))
	require.NoError(t, db.Close())
	require.Equal(t, 3, testbadger.RequireAbsent(t, dir, "sk-secret"))
}
