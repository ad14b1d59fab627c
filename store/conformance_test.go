package store

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lhengine/lhengine/internal/testpg"
	"github.com/lhengine/lhengine/ledger"
	"github.com/lhengine/lhengine/ledger/ledgertest"
)

// TestConformance runs the store contract's conformance suite against the
// embedded store on disk, synced as in production.
func TestConformance(t *testing.T) {
	t.Parallel()
	ledgertest.Run(t, func(t *testing.T, c ledgertest.Config) ledgertest.Instance {
		dir := filepath.Join(t.TempDir(), "store")
		o := Options{Now: c.Now, Planner: c.Planner}
		s, err := Open(dir, o)
		require.NoError(t, err)
		cur := s
		t.Cleanup(func() { require.NoError(t, cur.Close()) })
		return ledgertest.Instance{Store: s, Reopen: func(t *testing.T) ledger.Store {
			require.NoError(t, cur.Close())
			again, err := Open(dir, o)
			require.NoError(t, err)
			cur = again
			return again
		}}
	})
}

// TestConformancePostgres runs the suite against the store on a
// PostgreSQL database of a throwaway cluster (internal/testpg).
func TestConformancePostgres(t *testing.T) {
	t.Parallel()
	ledgertest.Run(t, func(t *testing.T, c ledgertest.Config) ledgertest.Instance {
		url := testpg.DB(t)
		o := PostgresOptions{Options: Options{Now: c.Now, Planner: c.Planner}, Migrate: true}
		s, err := OpenPostgres(t.Context(), url, o)
		require.NoError(t, err)
		cur := s
		t.Cleanup(func() { require.NoError(t, cur.Close()) })
		return ledgertest.Instance{Store: s, Reopen: func(t *testing.T) ledger.Store {
			require.NoError(t, cur.Close())
			again, err := OpenPostgres(t.Context(), url, o)
			require.NoError(t, err)
			cur = again
			return again
		}}
	})
}
