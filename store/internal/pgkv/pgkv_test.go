package pgkv

import (
	"context"
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/lhengine/lhengine/internal/testpg"
	"github.com/lhengine/lhengine/ledger"
	"github.com/lhengine/lhengine/store/internal/kv"
)

func TestMain(m *testing.M) { os.Exit(testpg.Main(m)) }

// backends opens an empty PostgreSQL backend and, beside it, Badger's, so
// that every walk is checked against the database the records were first
// written for.
func backends(t *testing.T) map[string]kv.Backend {
	t.Helper()
	pg, err := Open(t.Context(), testpg.DB(t), "S", true)
	require.NoError(t, err)
	t.Cleanup(pg.Close)
	db, err := badger.Open(badger.DefaultOptions("").WithInMemory(true).WithLogger(nil))
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, db.Close()) })
	return map[string]kv.Backend{"postgres": pg, "badger": kv.New(db, nil)}
}

func commit(t *testing.T, be kv.Backend, fn func(kv.Txn)) {
	t.Helper()
	txn, err := be.Begin(true)
	require.NoError(t, err)
	defer txn.Discard()
	fn(txn)
	require.NoError(t, txn.Commit())
}

func walk(t *testing.T, it kv.Iterator, seek []byte) []string {
	t.Helper()
	defer it.Close()
	var out []string
	if seek == nil {
		it.Rewind()
	} else {
		it.Seek(seek)
	}
	for ; it.Valid(); it.Next() {
		var v string
		require.NoError(t, it.Value(func(b []byte) error { v = string(b); return nil }))
		require.Equal(t, int64(len(v)), it.ValueSize())
		out = append(out, string(it.Key())+"="+v)
	}
	require.NoError(t, it.Err())
	return out
}

func TestWalksAgreeWithBadger(t *testing.T) {
	t.Parallel()
	for name, be := range backends(t) {
		t.Run(name, func(t *testing.T) {
			commit(t, be, func(txn kv.Txn) {
				for i := range 600 { // more than a page
					require.NoError(t, txn.Set(fmt.Appendf(nil, "u/T/%04d", i), fmt.Appendf(nil, "%d", i)))
				}
				require.NoError(t, txn.Set([]byte("u/S/0"), []byte("s")))
				require.NoError(t, txn.Set([]byte("u/U"), []byte("after")))
				require.NoError(t, txn.Set([]byte("x/\xff\xff"), []byte("high")))
				require.NoError(t, txn.Set([]byte("e"), []byte{}))
			})
			txn, err := be.Begin(false)
			require.NoError(t, err)
			defer txn.Discard()

			all := walk(t, txn.Iterate(kv.IterOptions{Prefix: []byte("u/T/"), Prefetch: 64}), nil)
			require.Len(t, all, 600)
			require.Equal(t, "u/T/0000=0", all[0])
			require.Equal(t, "u/T/0599=599", all[599])

			rev := walk(t, txn.Iterate(kv.IterOptions{Prefix: []byte("u/T/"), Reverse: true, Prefetch: 50}), nil)
			require.Len(t, rev, 600)
			require.Equal(t, "u/T/0599=599", rev[0])

			from := walk(t, txn.Iterate(kv.IterOptions{Prefix: []byte("u/T/")}), []byte("u/T/0590"))
			require.Equal(t, []string{"u/T/0590=590", "u/T/0591=591", "u/T/0592=592", "u/T/0593=593", "u/T/0594=594",
				"u/T/0595=595", "u/T/0596=596", "u/T/0597=597", "u/T/0598=598", "u/T/0599=599"}, from)
			back := walk(t, txn.Iterate(kv.IterOptions{Prefix: []byte("u/T/"), Reverse: true}), []byte("u/T/0002"))
			require.Equal(t, []string{"u/T/0002=2", "u/T/0001=1", "u/T/0000=0"}, back)

			keys := walk(t, txn.Iterate(kv.IterOptions{Prefix: []byte("u/S/"), KeysOnly: true}), nil)
			require.Equal(t, []string{"u/S/0=s"}, keys)
			require.Equal(t, []string{"x/\xff\xff=high"}, walk(t, txn.Iterate(kv.IterOptions{Prefix: []byte("x/\xff")}), nil))
			require.Empty(t, walk(t, txn.Iterate(kv.IterOptions{Prefix: []byte("none/")}), nil))

			var got []byte
			require.NoError(t, txn.Get([]byte("e"), func(v []byte, _ uint64) error { got = v; return nil }))
			require.Empty(t, got)
			require.ErrorIs(t, txn.Get([]byte("missing"), func([]byte, uint64) error { return nil }), ledger.ErrNotFound)
		})
	}
}

func TestTransactionsSeeTheirOwnWrites(t *testing.T) {
	t.Parallel()
	for name, be := range backends(t) {
		t.Run(name, func(t *testing.T) {
			commit(t, be, func(txn kv.Txn) { require.NoError(t, txn.Set([]byte("a/1"), []byte("one"))) })
			var version uint64
			view, err := be.Begin(false)
			require.NoError(t, err)
			require.NoError(t, view.Get([]byte("a/1"), func(_ []byte, v uint64) error { version = v; return nil }))
			view.Discard()
			require.NotZero(t, version)

			txn, err := be.Begin(true)
			require.NoError(t, err)
			require.NoError(t, txn.Set([]byte("a/2"), []byte("two")))
			require.NoError(t, txn.Delete([]byte("a/1")))
			require.ErrorIs(t, txn.Get([]byte("a/1"), func([]byte, uint64) error { return nil }), ledger.ErrNotFound)
			require.Equal(t, []string{"a/2=two"}, walk(t, txn.Iterate(kv.IterOptions{Prefix: []byte("a/")}), nil))
			require.NoError(t, txn.Set([]byte("a/3"), []byte("three"))) // after the walk's flush
			require.Equal(t, []string{"a/2=two", "a/3=three"}, walk(t, txn.Iterate(kv.IterOptions{Prefix: []byte("a/")}), nil))
			txn.Discard() // nothing of it lands

			view, err = be.Begin(false)
			require.NoError(t, err)
			defer view.Discard()
			require.Equal(t, []string{"a/1=one"}, walk(t, view.Iterate(kv.IterOptions{Prefix: []byte("a/")}), nil))
			require.NoError(t, view.Get([]byte("a/1"), func(_ []byte, v uint64) error {
				require.Equal(t, version, v, "a record nobody wrote keeps its version")
				return nil
			}))
		})
	}
}

// TestConflictingWritersOneWins: two transactions that read and then
// write the same key cannot both commit, on PostgreSQL as on Badger.
func TestConflictingWritersOneWins(t *testing.T) {
	t.Parallel()
	for name, be := range backends(t) {
		t.Run(name, func(t *testing.T) {
			commit(t, be, func(txn kv.Txn) { require.NoError(t, txn.Set([]byte("n"), []byte("0"))) })
			a, err := be.Begin(true)
			require.NoError(t, err)
			defer a.Discard()
			b, err := be.Begin(true)
			require.NoError(t, err)
			defer b.Discard()
			for _, txn := range []kv.Txn{a, b} {
				require.NoError(t, txn.Get([]byte("n"), func([]byte, uint64) error { return nil }))
				require.NoError(t, txn.Set([]byte("n"), []byte("1")))
			}
			require.NoError(t, a.Commit())
			require.Error(t, b.Commit())
		})
	}
}

func TestTheSchema(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	url := testpg.DB(t)

	_, err := Open(ctx, url, "S", false)
	require.ErrorIs(t, err, ErrSchema)
	require.ErrorContains(t, err, "lhengine store migrate")

	from, to, err := MigrateURL(ctx, url)
	require.NoError(t, err)
	require.Equal(t, [2]int{0, SchemaVersion}, [2]int{from, to})
	from, to, err = MigrateURL(ctx, url)
	require.NoError(t, err)
	require.Equal(t, [2]int{SchemaVersion, SchemaVersion}, [2]int{from, to}, "migrating again changes nothing")

	first, err := Open(ctx, url, "A", false)
	require.NoError(t, err)
	defer first.Close()
	second, err := Open(ctx, url, "B", false)
	require.NoError(t, err, "processes share a PostgreSQL store")
	second.Close()

	conn, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, `UPDATE lhengine_schema SET version = version + 1`)
	require.NoError(t, err)
	_, err = Open(ctx, url, "C", false)
	require.True(t, errors.Is(err, ErrSchema))
	require.ErrorContains(t, err, "newer lhengine")
}

// TestNoticesReachTheOtherSessions: a commit that writes a task's records
// tells every other session which task, once it committed; a discarded
// transaction, and the writer itself, hear nothing.
func TestNoticesReachTheOtherSessions(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	url := testpg.DB(t)
	a, err := Open(ctx, url, "A", true)
	require.NoError(t, err)
	defer a.Close()
	b, err := Open(ctx, url, "B", false)
	require.NoError(t, err)
	defer b.Close()

	heard := func(be *Backend) (<-chan []string, func()) {
		ch := make(chan []string, 16)
		lctx, stop := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() {
			defer close(done)
			be.Listen(lctx, func(ids []string) { ch <- ids })
		}()
		return ch, func() { stop(); <-done }
	}
	toB, stopB := heard(b)
	defer stopB()
	toA, stopA := heard(a)
	defer stopA()
	// LISTEN is set up on the listener's own connection: write until it
	// hears, so the test does not depend on when that happened.
	until := func(from *Backend, task string, to <-chan []string) {
		deadline := time.After(time.Minute)
		for {
			discarded, err := from.Begin(true)
			require.NoError(t, err)
			require.NoError(t, discarded.Set([]byte("u/GONE/0000/00000000"), []byte("x")))
			discarded.Discard()
			commit(t, from, func(txn kv.Txn) {
				require.NoError(t, txn.Set([]byte("u/"+task+"/0000/00000001"), []byte("{}")))
				require.NoError(t, txn.Set([]byte("B/blob"), []byte("{}"))) // not a task's
			})
			select {
			case ids := <-to:
				require.Equal(t, []string{task}, ids, "a notice names the tasks the commit wrote, and nothing discarded")
				return
			case <-time.After(100 * time.Millisecond):
			case <-deadline:
				t.Fatal("no notice heard")
			}
		}
	}
	until(a, "T1", toB)
	until(b, "T2", toA) // A hears B's notices, never its own (T1)
}
