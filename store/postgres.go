package store

import (
	"context"
	"fmt"

	"github.com/lhengine/lhengine/store/internal/index"
	"github.com/lhengine/lhengine/store/internal/kv"
	"github.com/lhengine/lhengine/store/internal/pgkv"
)

// PostgresOptions configure OpenPostgres.
type PostgresOptions struct {
	Options
	// Migrate brings the database's schema up to this build's before
	// opening it (as `lhengine store migrate` does); without it a schema
	// that is behind is refused, naming that command.
	Migrate bool
}

// OpenPostgres opens the store kept in the PostgreSQL database at url
// (postgres://…): the same records, lease protocol and group commit as
// the embedded store, on one table of keys and values (specs/ledger.md,
// "PostgreSQL"). A commit is durable when PostgreSQL's commit returns, so
// nothing waits for a sync of its own. One process has the store open at
// a time, as with a Badger directory: another gets ErrInUse.
//
// Of Options, Now, Logger, MaxBatch and Planner apply; the rest are
// about Badger's files.
func OpenPostgres(ctx context.Context, url string, o PostgresOptions) (*Store, error) {
	o.setDefaults()
	be, err := pgkv.Open(ctx, url, o.Migrate)
	if err != nil {
		return nil, fmt.Errorf("open store: %w", err)
	}
	s := &Store{now: o.Now, session: newSessionID(), log: o.Logger,
		plan: o.Planner, idx: index.New(), pg: be}
	s.group.Max, s.group.Run, s.group.Complete = o.MaxBatch, s.runBatch, s.complete
	s.wire(kv.NewOn(be), nil)
	if err := s.rebuildIndex(); err != nil {
		be.Close()
		return nil, fmt.Errorf("open store: reading runnable tasks: %w", err)
	}
	return s, nil
}

// MigratePostgres brings the schema of the PostgreSQL database at url up
// to this build's, each version in a transaction of its own, and returns
// the versions before and after.
func MigratePostgres(ctx context.Context, url string) (from, to int, err error) {
	return pgkv.MigrateURL(ctx, url)
}
