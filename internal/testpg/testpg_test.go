package testpg_test

import (
	"context"
	"os"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/lhengine/lhengine/internal/testpg"
)

func TestMain(m *testing.M) { os.Exit(testpg.Main(m)) }

func TestDatabasesAreTheTestsOwn(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	a, b := testpg.DB(t), testpg.DB(t)
	require.NotEqual(t, a, b)
	conn, err := pgx.Connect(ctx, a)
	require.NoError(t, err)
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, "CREATE TABLE x (n int)")
	require.NoError(t, err)
	var sync string
	require.NoError(t, conn.QueryRow(ctx, "SHOW synchronous_commit").Scan(&sync))
	require.Equal(t, "on", sync)
	other, err := pgx.Connect(ctx, b)
	require.NoError(t, err)
	defer other.Close(ctx)
	var n int
	require.NoError(t, other.QueryRow(ctx, "SELECT count(*) FROM pg_tables WHERE tablename = 'x'").Scan(&n))
	require.Zero(t, n)
}
