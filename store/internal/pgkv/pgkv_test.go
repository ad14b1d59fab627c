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
	"github.com/jackc/pgx/v5/pgconn"
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

// twoSessions opens one new database as two processes would: A migrates
// it, B opens it as it is.
func twoSessions(t *testing.T) (a, b *Backend) {
	t.Helper()
	url := testpg.DB(t)
	a, err := Open(t.Context(), url, "A", true)
	require.NoError(t, err)
	t.Cleanup(a.Close)
	b, err = Open(t.Context(), url, "B", false)
	require.NoError(t, err)
	t.Cleanup(b.Close)
	return a, b
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
// tells every other session which task and which of its units, once it committed; a discarded
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

	heard := func(be *Backend) (<-chan []Change, func()) {
		ch := make(chan []Change, 16)
		lctx, stop := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() {
			defer close(done)
			be.Listen(lctx, func(cs []Change) { ch <- cs })
		}()
		return ch, func() { stop(); <-done }
	}
	toB, stopB := heard(b)
	defer stopB()
	toA, stopA := heard(a)
	defer stopA()
	// LISTEN is set up on the listener's own connection: write until it
	// hears, so the test does not depend on when that happened.
	until := func(from *Backend, task string, to <-chan []Change) {
		deadline := time.After(time.Minute)
		for {
			discarded, err := from.Begin(true)
			require.NoError(t, err)
			require.NoError(t, discarded.Set([]byte("u/GONE/0000/00000000"), []byte("x")))
			discarded.Discard()
			commit(t, from, func(txn kv.Txn) {
				require.NoError(t, txn.Set([]byte("u/"+task+"/0002/0000001f"), []byte("{}")))
				require.NoError(t, txn.Set([]byte("t/"+task), []byte("{}")))
				require.NoError(t, txn.Set([]byte("B/blob"), []byte("{}"))) // not a task's
			})
			select {
			case cs := <-to:
				require.Equal(t, []Change{{Task: task, Units: []Unit{{2, 31}}}}, cs,
					"a notice names the tasks and units the commit wrote, and nothing discarded")
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

// TestNoticeNamesUnitsUntilTheyAreTooMany: a transaction that wrote up to
// unitsMax units of a task names them; one that wrote more, or a unit key
// it cannot read, names the whole task. Every notice decodes to what was
// encoded.
func TestNoticeNamesUnitsUntilTheyAreTooMany(t *testing.T) {
	tx := &txn{}
	tx.noteTask("t/A")
	tx.noteTask("u/A/0001/00000002")
	tx.noteTask("u/A/0001/00000002")
	tx.noteTask("a/B")
	for i := range unitsMax + 1 {
		tx.noteTask(fmt.Sprintf("u/C/0000/%08x", i))
	}
	tx.noteTask("u/D/zz")
	tx.noteTask("B/blob")
	require.Len(t, tx.tasks, 4)
	require.Equal(t, map[Unit]bool{{1, 2}: true}, tx.tasks["A"].units)
	require.False(t, tx.tasks["B"].whole)
	require.Empty(t, tx.tasks["B"].units)
	require.True(t, tx.tasks["C"].whole)
	require.True(t, tx.tasks["D"].whole)
	for _, c := range []Change{{Task: "A", Units: []Unit{{1, 2}, {3, 0x7fffffff}}}, {Task: "B"}, {Task: "C", Whole: true}} {
		got := decodeNotice("other", "me "+c.encode()+","+c.encode())
		require.Equal(t, []Change{c, c}, got)
	}
	require.Nil(t, decodeNotice("me", "me A"), "a session's own notices are not read")
}

// FuzzDecodeNotice: any payload decodes without a panic, to changes that
// each name a task.
func FuzzDecodeNotice(f *testing.F) {
	f.Add("s A|0001/00000002,B*,C")
	f.Add("s |,*,||")
	f.Add("s A|ffffffffff/1")
	f.Fuzz(func(t *testing.T, payload string) {
		for _, c := range decodeNotice("me", payload) {
			if c.Task == "" {
				t.Fatalf("a change of no task from %q", payload)
			}
			if c.Whole && len(c.Units) > 0 {
				t.Fatalf("a whole change naming units from %q", payload)
			}
		}
	})
}

// TestExclusiveTransactionsTakeTurns: two ordinary transactions that
// read and write one key conflict, and one is refused; two exclusive
// ones of two sessions take turns: the second waits for the first,
// reads what it committed, and commits too.
func TestExclusiveTransactionsTakeTurns(t *testing.T) {
	t.Parallel()
	a, b := twoSessions(t)
	key := []byte("t/T")
	commit(t, a, func(txn kv.Txn) { require.NoError(t, txn.Set(key, []byte("0"))) })
	read := func(txn kv.Txn) (v string) {
		require.NoError(t, txn.Get(key, func(b []byte, _ uint64) error { v = string(b); return nil }))
		return v
	}

	// Ordinary: both read 0, both write; the second commit is refused.
	t1, err := a.Begin(true)
	require.NoError(t, err)
	defer t1.Discard()
	t2, err := b.Begin(true)
	require.NoError(t, err)
	defer t2.Discard()
	require.Equal(t, "0", read(t1))
	require.Equal(t, "0", read(t2))
	require.NoError(t, t1.Set(key, []byte("1")))
	require.NoError(t, t2.Set(key, []byte("1")))
	require.NoError(t, t1.Commit())
	err = t2.Commit()
	require.True(t, a.Retryable(err), "%v", err)

	// Exclusive: the second begins while the first is open, and waits.
	e1, err := a.BeginExclusive()
	require.NoError(t, err)
	defer e1.Discard()
	require.Equal(t, "1", read(e1))
	require.NoError(t, e1.Set(key, []byte("2")))
	began := make(chan kv.Txn)
	go func() {
		e2, err := b.BeginExclusive()
		if err != nil {
			t.Error(err)
		}
		began <- e2
	}()
	// The database shows the second waiting for the lock.
	for waiting := 0; waiting == 0; {
		select {
		case <-began:
			t.Fatal("a second exclusive transaction began beside the first")
		default:
		}
		require.NoError(t, a.pool.QueryRow(t.Context(), `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&waiting))
	}
	require.NoError(t, e1.Commit())
	e2 := <-began
	require.NotNil(t, e2)
	defer e2.Discard()
	require.Equal(t, "2", read(e2), "the second sees what the first committed")
	require.NoError(t, e2.Set(key, []byte("3")))
	require.NoError(t, e2.Commit())
}

// TestCommitsAreFencedByTheDatabase: a commit that presents a lease
// (Fence) is refused by PostgreSQL itself, inside the commit, once the
// unit's record holds another lease, whatever the transaction read (here:
// nothing); the record keeps the newer lease. A lease the transaction
// granted itself is not fenced, and a walk sends the fence ahead of the
// writes it flushes.
func TestCommitsAreFencedByTheDatabase(t *testing.T) {
	t.Parallel()
	a, _ := twoSessions(t)
	key, other := []byte("u/T/00001/0000000"), []byte("x/other")
	unit := func(owner string, epoch int) []byte {
		return fmt.Appendf(nil, `{"state":"leased","owner":%q,"epoch":%d,"attempt":1}`, owner, epoch)
	}
	fenced := func(txn kv.Txn, owner string, epoch uint64) {
		txn.(interface{ Fence([]byte, string, uint64) }).Fence(key, owner, epoch)
	}
	commit(t, a, func(txn kv.Txn) { require.NoError(t, txn.Set(key, unit("A/w", 5))) })

	// The current lease: the commit goes through.
	commit(t, a, func(txn kv.Txn) {
		fenced(txn, "A/w", 5)
		require.NoError(t, txn.Set(other, []byte("1")))
	})
	// Another process takes the unit over.
	commit(t, a, func(txn kv.Txn) { require.NoError(t, txn.Set(key, unit("B/w", 6))) })

	refused := func(err error) {
		t.Helper()
		require.ErrorIs(t, err, ledger.ErrLeaseLost)
		require.ErrorIs(t, err, ErrFenced)
		var pe *pgconn.PgError
		require.ErrorAs(t, err, &pe)
		require.Equal(t, fencedCode, pe.Code, "refused by the database")
		require.True(t, a.Retryable(err), "run again from its reads, which then see the lease lost")
	}
	for _, owner := range []struct {
		name  string
		epoch uint64
	}{{"A/w", 5}, {"B/w", 5}, {"A/w", 6}} {
		txn, err := a.Begin(true)
		require.NoError(t, err)
		fenced(txn, owner.name, owner.epoch)
		require.NoError(t, txn.Set(key, []byte(`{"state":"done"}`)))
		require.NoError(t, txn.Set(other, []byte("2")))
		refused(txn.Commit())
		txn.Discard()
	}
	// A walk flushes the writes behind the fence: the walk fails.
	txn, err := a.Begin(true)
	require.NoError(t, err)
	fenced(txn, "A/w", 5)
	require.NoError(t, txn.Set(other, []byte("3")))
	it := txn.Iterate(kv.IterOptions{Prefix: []byte("x/")})
	it.Rewind()
	require.False(t, it.Valid())
	refused(it.Err())
	it.Close()
	txn.Discard()

	check, err := a.Begin(false)
	require.NoError(t, err)
	defer check.Discard()
	require.NoError(t, check.Get(key, func(v []byte, _ uint64) error {
		require.Equal(t, string(unit("B/w", 6)), string(v), "the newer lease stands")
		return nil
	}))
	require.NoError(t, check.Get(other, func(v []byte, _ uint64) error {
		require.Equal(t, "1", string(v), "nothing of a refused commit landed")
		return nil
	}))

	// Two leases of one unit in one transaction: one is stale.
	txn, err = a.Begin(true)
	require.NoError(t, err)
	fenced(txn, "B/w", 6)
	fenced(txn, "A/w", 5)
	require.NoError(t, txn.Set(key, []byte(`{"state":"done"}`)))
	refused(txn.Commit())
	txn.Discard()

	// The holder commits, presenting its lease twice; a lease the transaction grants and then presents
	// is its own write, not fenced; a record that is gone fences.
	commit(t, a, func(txn kv.Txn) {
		fenced(txn, "B/w", 6)
		fenced(txn, "B/w", 6)
		require.NoError(t, txn.Set(key, unit("A/w", 7)))
		fenced(txn, "A/w", 7)
	})
	commit(t, a, func(txn kv.Txn) { require.NoError(t, txn.Delete(key)) })
	for _, write := range []bool{false, true} {
		txn, err = a.Begin(true)
		require.NoError(t, err)
		fenced(txn, "A/w", 7)
		if write { // in the upsert: a record that is gone is not written back
			require.NoError(t, txn.Set(key, unit("A/w", 7)))
		}
		refused(txn.Commit())
		txn.Discard()
	}
	gone, err := a.Begin(false)
	require.NoError(t, err)
	defer gone.Discard()
	require.ErrorIs(t, gone.Get(key, func([]byte, uint64) error { return nil }), ledger.ErrNotFound)
}

// TestClaimsSkipRecordsAnotherClaimHolds: a claim's read of candidate
// records locks them in one statement; a second process's claim of the
// same candidates, while the first is open, skips the locked one (busy)
// without waiting, reads the free one and tells a missing one apart; once
// the first commits, the record is free again.
func TestClaimsSkipRecordsAnotherClaimHolds(t *testing.T) {
	t.Parallel()
	a, b := twoSessions(t)
	x, y, z, w := []byte("u/T/x"), []byte("u/T/y"), []byte("u/T/z"), []byte("u/T/w")
	commit(t, a, func(txn kv.Txn) {
		require.NoError(t, txn.Set(x, []byte("X")))
		require.NoError(t, txn.Set(y, []byte("Y")))
	})
	type seen struct {
		val         string
		found, busy bool
	}
	read := func(tx kv.Txn, keys ...[]byte) []seen {
		t.Helper()
		out := make([]seen, len(keys))
		require.NoError(t, tx.(*txn).ReadForClaim(keys, func(i int, v []byte, found, busy bool) error {
			out[i] = seen{string(v), found, busy}
			return nil
		}))
		return out
	}
	ta, err := a.Begin(true)
	require.NoError(t, err)
	defer ta.Discard()
	require.Equal(t, []seen{{"X", true, false}}, read(ta, x))
	require.NoError(t, ta.Set(x, []byte("X leased by A")))
	require.NoError(t, ta.Set(w, []byte("W")))
	require.Equal(t, []seen{{"X leased by A", true, false}, {"W", true, false}}, read(ta, x, w), "its own writes")

	tb, err := b.Begin(true)
	require.NoError(t, err)
	defer tb.Discard()
	require.Equal(t, []seen{{"", true, true}, {"Y", true, false}, {"", false, false}}, read(tb, x, y, z))
	tb.Discard()

	require.NoError(t, ta.Commit())
	tc, err := b.Begin(true)
	require.NoError(t, err)
	defer tc.Discard()
	require.Equal(t, []seen{{"X leased by A", true, false}}, read(tc, x))
}

// TestLeasesOfRecordsStoredBeforeTheFence: migrating a database of schema
// 3 gives the unit records already stored their lease column, so that a
// unit leased before the upgrade commits after it; a record the database
// cannot read as JSON (a \u0000 in its item) gets none, and a unit record
// holding one is fenced like any other once written by this version.
func TestLeasesOfRecordsStoredBeforeTheFence(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	url := testpg.DB(t)
	conn, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	defer conn.Close(context.Background())
	_, err = conn.Exec(ctx, `CREATE TABLE lhengine_schema (one bool PRIMARY KEY DEFAULT true CHECK (one), version int NOT NULL)`)
	require.NoError(t, err)
	for range 3 {
		_, _, err := migrateOne(ctx, conn)
		require.NoError(t, err)
	}
	leased := []byte("u/T/0000/00000001")
	odd := []byte("u/T/0000/00000002")
	_, err = conn.Exec(ctx, `INSERT INTO lhengine_kv (k, v) VALUES ($1, $2), ($3, $4), ('t/T', '{}')`,
		leased, []byte(`{"state":"leased","owner":"S/w","epoch":7}`),
		odd, []byte(`{"value":"a\u0000b","state":"leased","owner":"S/w","epoch":8}`))
	require.NoError(t, err)
	from, to, err := Migrate(ctx, conn)
	require.NoError(t, err)
	require.Equal(t, [2]int{3, SchemaVersion}, [2]int{from, to})

	b, err := Open(ctx, url, "S", false)
	require.NoError(t, err)
	defer b.Close()
	fence := func(txn kv.Txn, key []byte, epoch uint64) {
		txn.(interface{ Fence([]byte, string, uint64) }).Fence(key, "S/w", epoch)
	}
	commit(t, b, func(txn kv.Txn) {
		fence(txn, leased, 7)
		require.NoError(t, txn.Set(leased, []byte(`{"state":"done"}`)))
	})
	txn, err := b.Begin(true)
	require.NoError(t, err)
	fence(txn, odd, 8)
	require.NoError(t, txn.Set(odd, []byte(`{"state":"done"}`)))
	require.ErrorIs(t, txn.Commit(), ErrFenced, "no lease the database could read")
	txn.Discard()

	commit(t, b, func(txn kv.Txn) {
		require.NoError(t, txn.Set(odd, []byte(`{"value":"a\u0000b","failure":{"message":"\u0000"},"state":"leased","owner":"S/w","epoch":9}`)))
	})
	commit(t, b, func(txn kv.Txn) {
		fence(txn, odd, 9)
		require.NoError(t, txn.Set(odd, []byte(`{"value":"a\u0000b","state":"done"}`)))
	})
}
