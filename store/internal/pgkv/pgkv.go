// Package pgkv is the store's records in PostgreSQL: a kv.Backend on one
// table of byte keys and values (lhengine_kv), its schema kept by
// versioned migrations, and the store's ownership as a session-level
// advisory lock.
//
// A read-write transaction is SERIALIZABLE: PostgreSQL refuses the commit
// of one that read what another changed meanwhile, as Badger refuses a
// conflicting one. Its writes are buffered and sent at commit in two
// statements (one upsert of every key set, one delete of every key
// deleted), or before a walk that must see them; a read of a key it
// wrote is answered from the buffer. A read-only view is a REPEATABLE
// READ, READ ONLY transaction: one snapshot. A committed transaction is
// on disk when the commit returns (synchronous_commit, PostgreSQL's
// default, must stay on: Open checks).
package pgkv

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/lhengine/lhengine/ledger"
	"github.com/lhengine/lhengine/store/internal/kv"
)

// migrations are the schema's versions: migrations[i] takes the schema
// from version i to i+1. Never edit one that was released; add another.
var migrations = []string{
	`CREATE TABLE lhengine_kv (
		k bytea PRIMARY KEY,
		v bytea NOT NULL
	)`,
	`CREATE TABLE lhengine_workers (
		session text PRIMARY KEY,
		host text NOT NULL,
		pid int NOT NULL,
		version text NOT NULL,
		started timestamptz NOT NULL,
		last_seen timestamptz NOT NULL,
		stopped timestamptz
	)`,
	// Never written: its lock (BeginExclusive) makes the transactions that
	// hold it take turns.
	`CREATE TABLE lhengine_writer (one bool PRIMARY KEY)`,
	// The fence of a commit (txn.Fence). lease is a unit record's lease,
	// "EPOCH OWNER" while it is leased (NULL otherwise), written with the
	// record (leaseOf); the unit records already stored get theirs here,
	// each record that does not read as JSON left without.
	// lhengine_refuse fails the transaction with SQLSTATE LH409; it is
	// only called when a lease presented is no longer held.
	`ALTER TABLE lhengine_kv ADD COLUMN lease text;
	DO $$
	DECLARE
		r record;
	BEGIN
		FOR r IN SELECT k, v FROM lhengine_kv WHERE k >= '\x752f'::bytea AND k < '\x7530'::bytea LOOP
			BEGIN
				UPDATE lhengine_kv SET lease = (SELECT CASE WHEN j->>'state' = 'leased' THEN (j->>'epoch') || ' ' || (j->>'owner') END
					FROM (SELECT convert_from(r.v, 'UTF8')::json AS j) AS p) WHERE k = r.k;
			EXCEPTION WHEN others THEN NULL;
			END;
		END LOOP;
	END $$;
	CREATE FUNCTION lhengine_refuse(stale bigint, presented bigint) RETURNS void
	LANGUAGE plpgsql AS $$
	BEGIN
		RAISE EXCEPTION 'fenced: % of the % leases this transaction presents are no longer current', stale, presented
			USING ERRCODE = 'LH409';
	END $$`,
}

// SchemaVersion is the schema this build reads and writes.
var SchemaVersion = len(migrations)

// migrateLock is the advisory lock key that migrations hold ("lhen").
const migrateLock = 0x6c68656e

// ErrSchema is a database whose schema is not this build's.
var ErrSchema = errors.New("store schema")

// Backend is a kv.Backend on a PostgreSQL database.
type Backend struct {
	pool    *pgxpool.Pool
	conn    *pgxpool.Conn // checked the settings and the schema
	ctx     context.Context
	session string
	url     string
}

// Open connects to the database at url. With migrate it first brings the
// schema up to SchemaVersion; without, a schema that is behind is
// refused with ErrSchema naming `lhengine store migrate`. Any number of
// processes, on any number of hosts, may have one database open at once:
// session (the store's) names this one in the change notices its commits
// send (Listen).
func Open(ctx context.Context, url, session string, migrate bool) (*Backend, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("store URL: %w", err)
	}
	if cfg.MaxConns < 16 {
		cfg.MaxConns = 16
	}
	// A process cut off from the database in the middle of a transaction
	// leaves it open on the server, with the row locks of its writes,
	// until the server sees the connection gone (TCP keepalives: hours):
	// the server ends a transaction idle that long, so that the others
	// are not held up behind the cut-off one. Its transactions never wait
	// on anything between their statements.
	if _, ok := cfg.ConnConfig.RuntimeParams["idle_in_transaction_session_timeout"]; !ok {
		cfg.ConnConfig.RuntimeParams["idle_in_transaction_session_timeout"] = IdleInTransaction
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, err
	}
	b := &Backend{pool: pool, ctx: context.WithoutCancel(ctx), session: session, url: url}
	if err := b.open(ctx, migrate); err != nil {
		b.Close()
		return nil, err
	}
	return b, nil
}

func (b *Backend) open(ctx context.Context, migrate bool) error {
	conn, err := b.pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("connect to the store: %w", err)
	}
	b.conn = conn
	defer func() { conn.Release(); b.conn = nil }()
	var sync string
	if err := conn.QueryRow(ctx, "SHOW synchronous_commit").Scan(&sync); err != nil {
		return err
	}
	if sync == "off" {
		return fmt.Errorf("the store's database has synchronous_commit off: a commit could be lost after it returned; turn it on")
	}
	if migrate {
		if _, _, err := Migrate(ctx, conn.Conn()); err != nil {
			return err
		}
	}
	v, err := version(ctx, conn.Conn())
	if err != nil {
		return err
	}
	switch {
	case v < SchemaVersion:
		return fmt.Errorf("%w: the database's schema is version %d, this lhengine needs %d: run `lhengine store migrate`", ErrSchema, v, SchemaVersion)
	case v > SchemaVersion:
		return fmt.Errorf("%w: the database's schema is version %d, newer than this lhengine's %d: use a newer lhengine", ErrSchema, v, SchemaVersion)
	}
	return nil
}

// Close closes the connections.
func (b *Backend) Close() { b.pool.Close() }

// version reads the schema's version: 0 for a database without one.
func version(ctx context.Context, conn *pgx.Conn) (int, error) {
	var v int
	err := conn.QueryRow(ctx, `SELECT version FROM lhengine_schema`).Scan(&v)
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == "42P01" || errors.Is(err, pgx.ErrNoRows) { // undefined_table, or no version yet
		return 0, nil
	}
	return v, err
}

// Migrate brings the schema of conn's database up to SchemaVersion, each
// migration in a transaction of its own with the version it reaches,
// under a transaction-level advisory lock so that two processes migrating
// at once apply each migration once. It returns the versions before and
// after.
func Migrate(ctx context.Context, conn *pgx.Conn) (from, to int, err error) {
	if _, err := conn.Exec(ctx, `CREATE TABLE IF NOT EXISTS lhengine_schema (
		one bool PRIMARY KEY DEFAULT true CHECK (one),
		version int NOT NULL)`); err != nil {
		return 0, 0, fmt.Errorf("migrate: %w", err)
	}
	if from, err = version(ctx, conn); err != nil {
		return 0, 0, fmt.Errorf("migrate: %w", err)
	}
	for {
		done, v, err := migrateOne(ctx, conn)
		if err != nil || done {
			return from, v, err
		}
	}
}

// migrateOne applies the next migration, if any: done reports there was
// none, v the version the schema is at after it.
func migrateOne(ctx context.Context, conn *pgx.Conn) (done bool, v int, err error) {
	err = pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", migrateLock); err != nil {
			return err
		}
		err := tx.QueryRow(ctx, `SELECT version FROM lhengine_schema`).Scan(&v)
		if errors.Is(err, pgx.ErrNoRows) {
			v, err = 0, nil
			if _, err := tx.Exec(ctx, `INSERT INTO lhengine_schema (version) VALUES (0)`); err != nil {
				return err
			}
		}
		if err != nil {
			return err
		}
		if v >= len(migrations) {
			done = true
			return nil
		}
		if _, err := tx.Exec(ctx, migrations[v]); err != nil {
			return fmt.Errorf("migration %d: %w", v+1, err)
		}
		v++
		_, err = tx.Exec(ctx, `UPDATE lhengine_schema SET version = $1`, v)
		return err
	})
	if err != nil {
		return false, v, fmt.Errorf("migrate: %w", err)
	}
	return done, v, nil
}

// MigrateURL is Migrate on the database at url.
func MigrateURL(ctx context.Context, url string) (from, to int, err error) {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return 0, 0, fmt.Errorf("connect to the store: %w", err)
	}
	defer conn.Close(ctx)
	return Migrate(ctx, conn)
}

// Begin starts a transaction. While the database cannot be reached (a
// connection of the pool died with a restart, or none can be made) it
// tries again, waiting longer each time, for up to BeginWait: nothing of
// the transaction has run yet.
func (b *Backend) Begin(rw bool) (kv.Txn, error) {
	if rw {
		return b.begin("BEGIN ISOLATION LEVEL SERIALIZABLE, READ WRITE")
	}
	return b.begin("BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY")
}

// begin starts a transaction with the statements sql (one round trip) on
// a connection of the pool that the transaction keeps until it ends.
func (b *Backend) begin(sql string) (*txn, error) {
	wait, give := 20*time.Millisecond, time.Now().Add(BeginWait)
	for {
		conn, err := b.pool.Acquire(b.ctx)
		if err == nil {
			if _, err = conn.Exec(b.ctx, sql); err != nil {
				conn.Release() // a broken connection leaves the pool
			}
		}
		if err == nil {
			return &txn{b: b, ctx: b.ctx, conn: conn, writes: map[string][]byte{}, session: b.session}, nil
		}
		if !b.Unavailable(err) || time.Now().After(give) {
			return nil, b.wrap(err)
		}
		t := time.NewTimer(wait)
		<-t.C
		wait = min(2*wait, 2*time.Second)
	}
}

// BeginExclusive starts a read-write transaction holding the writer lock
// (EXCLUSIVE on the table lhengine_writer) before anything else: no other
// exclusive transaction, of any process, runs beside it, and since the
// lock is taken before its first read fixes its snapshot, it sees what
// the one before it committed. Transactions that keep conflicting on the
// same records (one task's header, worked from many processes) thus take
// turns instead of being refused and run again. The lock ends with the
// transaction, also when its process is cut off (the session's
// idle_in_transaction_session_timeout).
func (b *Backend) BeginExclusive() (kv.Txn, error) {
	return b.begin("BEGIN ISOLATION LEVEL SERIALIZABLE, READ WRITE; LOCK TABLE lhengine_writer IN EXCLUSIVE MODE")
}

// IdleInTransaction is the idle_in_transaction_session_timeout of the
// store's sessions, unless the URL sets one.
const IdleInTransaction = "20s"

// BeginWait bounds how long Begin waits for a database it cannot reach.
const BeginWait = 2 * time.Minute

// wrap marks an error that says the database could not be reached with
// ledger.ErrUnavailable, and a commit its fence refused with ErrFenced.
func (b *Backend) wrap(err error) error {
	var pe *pgconn.PgError
	switch {
	case err != nil && b.Unavailable(err) && !errors.Is(err, ledger.ErrUnavailable):
		return fmt.Errorf("%w: %w", ledger.ErrUnavailable, err)
	case errors.As(err, &pe) && pe.Code == fencedCode && !errors.Is(err, ErrFenced):
		return fmt.Errorf("%w: %w", ErrFenced, err)
	}
	return err
}

// Unavailable reports whether err says the database could not be reached
// or went away (a restart, a cut network): once it is back, a transaction
// run again from its reads may succeed. One whose commit was cut short
// may have committed: running it again then finds what it did (a commit
// finds its lease spent, and is refused), as the lease protocol wants.
func (b *Backend) Unavailable(err error) bool {
	var ce *pgconn.ConnectError
	var pe *pgconn.PgError
	var ne net.Error
	switch {
	case err == nil:
		return false
	case errors.Is(err, ledger.ErrUnavailable):
		return true
	case errors.As(err, &ce), errors.As(err, &ne), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE):
		return true
	case errors.As(err, &pe):
		// connection_exception; admin_shutdown, crash_shutdown, cannot_connect_now
		return strings.HasPrefix(pe.Code, "08") || pe.Code == "57P01" || pe.Code == "57P02" || pe.Code == "57P03"
	}
	return pgconn.SafeToRetry(err) || strings.Contains(err.Error(), "conn closed")
}

// Retryable reports whether err is PostgreSQL refusing a transaction that
// conflicted with another (a serialization failure or a deadlock), or
// whose fence found a lease it presents no longer current (fenced): run
// it again, from its reads (which then see whose lease it is).
func (b *Backend) Retryable(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && (pe.Code == "40001" || pe.Code == "40P01" || pe.Code == fencedCode)
}

// fencedCode is the SQLSTATE of a commit its fence refused.
const fencedCode = "LH409"

// ErrFenced is a commit the database refused because a lease it presents
// (Fence) is no longer the unit's current one: ledger.ErrLeaseLost.
var ErrFenced = fmt.Errorf("%w: the database refused the commit: a lease it presents is no longer current", ledger.ErrLeaseLost)

// txn is a kv.Txn on a PostgreSQL transaction, run on a connection of
// the pool it holds until it ends. writes buffers what it set (a nil
// value: deleted) until flush.
type txn struct {
	b       *Backend
	ctx     context.Context
	conn    *pgxpool.Conn
	writes  map[string][]byte
	done    bool
	session string
	tasks   map[string]*written // what it wrote of each task (see notice)
	fences  []fence             // leases the next writes that go out check
}

// fence is a lease a transaction's commit must find current (Fence).
type fence struct {
	key   []byte
	owner string
	epoch int64
}

// Fence has the commit refused unless the unit record at key still holds
// the lease of owner at epoch, as other transactions last committed it:
// checked by the next writes the transaction sends (its commit's, or a
// walk's; see fencedWrite). A record this transaction wrote itself (a
// lease it granted) is not fenced: its writes are what it read.
func (t *txn) Fence(key []byte, owner string, epoch uint64) {
	if _, own := t.writes[string(key)]; own {
		return
	}
	t.fences = append(t.fences, fence{bytes.Clone(key), owner, int64(epoch)})
}

// The fence of leases whose records the transaction writes is in the
// statement that writes them: an UPDATE of those records whose WHERE says
// that each still holds the lease presented (its lease column, which
// every write of a unit record sets: leaseOf), beside the upsert of the
// other keys, refusing the transaction unless it updated every fenced
// record. Under the transaction's isolation a record changed since its
// snapshot is a serialization failure, so the check is against the
// record as last committed. The fence of the others is a statement of its
// own, sent before the writes, locking the records it checks so that they
// stay as checked. The database never parses a record: a unit's JSON may
// hold what PostgreSQL's JSON types refuse (a \u0000 in an item or a
// failure message).
const (
	upsert = `INSERT INTO lhengine_kv (k, v, lease) SELECT * FROM unnest($1::bytea[], $2::bytea[], $3::text[])
		ON CONFLICT (k) DO UPDATE SET v = EXCLUDED.v, lease = EXCLUDED.lease`
	// $1 to $3: the keys, values and leases set but not fenced; $4 to $7:
	// the fenced ones, their values and leases, and the leases presented.
	fencedWrite = `WITH i AS (` + upsert + `),
		u AS (UPDATE lhengine_kv AS r SET v = f.v, lease = f.lease
			FROM unnest($4::bytea[], $5::bytea[], $6::text[], $7::text[]) AS f(k, v, lease, held)
			WHERE r.k = f.k AND r.lease = f.held RETURNING 1)
		SELECT lhengine_refuse(stale, cardinality($4::bytea[])) FROM (SELECT cardinality($4::bytea[]) - count(*) AS stale FROM u) AS s
		WHERE stale > 0`
	fenceOnly = `SELECT lhengine_refuse(c - held, c) FROM (SELECT cardinality($1::bytea[]) AS c,
			(SELECT count(*) FROM (SELECT 1 FROM lhengine_kv AS r
				JOIN unnest($1::bytea[], $2::text[]) AS f(k, held) ON r.k = f.k
				WHERE r.lease = f.held FOR UPDATE OF r) AS l) AS held) AS s
		WHERE held < c`
)

// leaseText is how the lease column names the lease of owner at epoch.
func leaseText(owner string, epoch int64) string { return strconv.FormatInt(epoch, 10) + " " + owner }

// leaseOf is the lease column of the record v at key: a unit record's
// lease while it is leased; nil (NULL) for any other record.
func leaseOf(key string, v []byte) *string {
	if !strings.HasPrefix(key, "u/") {
		return nil
	}
	var u struct {
		State string `json:"state"`
		Owner string `json:"owner"`
		Epoch int64  `json:"epoch"`
	}
	if json.Unmarshal(v, &u) != nil || u.State != "leased" {
		return nil
	}
	l := leaseText(u.Owner, u.Epoch)
	return &l
}

// takeFences splits the fences presented since the last batch went out:
// those of keys the transaction sets (in: their writes become the fenced
// update), and the others (out). A key fenced twice alike is fenced once;
// a second, different lease of the same key goes to out.
func (t *txn) takeFences() (in map[string]fence, out []fence) {
	for _, f := range t.fences {
		if v, ok := t.writes[string(f.key)]; !ok || v == nil {
			out = append(out, f)
			continue
		}
		if in == nil {
			in = map[string]fence{}
		}
		if had, ok := in[string(f.key)]; ok {
			if had.owner != f.owner || had.epoch != f.epoch {
				out = append(out, f)
			}
			continue
		}
		in[string(f.key)] = f
	}
	t.fences = t.fences[:0]
	return in, out
}

var deleted = []byte(nil)

func (t *txn) Get(key []byte, fn func([]byte, uint64) error) error {
	if v, ok := t.writes[string(key)]; ok {
		if v == nil {
			return ledger.ErrNotFound
		}
		return fn(v, 0)
	}
	var v []byte
	var ver string
	err := t.conn.QueryRow(t.ctx, `SELECT v, xmin::text FROM lhengine_kv WHERE k = $1`, key).Scan(&v, &ver)
	if errors.Is(err, pgx.ErrNoRows) {
		return ledger.ErrNotFound
	}
	if err != nil {
		return t.b.wrap(err)
	}
	return fn(v, parseVersion(ver))
}

// ReadForClaim reads the records at keys in one statement: the ones no
// other transaction holds locked, locking them (`FOR UPDATE SKIP LOCKED`);
// when some are missing from its answer, a second one tells a record
// skipped from one that is gone. A key this transaction wrote is answered
// from its buffer.
func (t *txn) ReadForClaim(keys [][]byte, fn func(int, []byte, bool, bool) error) error {
	var ask [][]byte
	for _, k := range keys {
		if _, own := t.writes[string(k)]; !own {
			ask = append(ask, k)
		}
	}
	free, exists := map[string][]byte{}, map[string]bool{}
	if len(ask) > 0 {
		rows, err := t.conn.Query(t.ctx, `SELECT k, v FROM lhengine_kv WHERE k = ANY($1) FOR UPDATE SKIP LOCKED`, ask)
		if err != nil {
			return t.b.wrap(err)
		}
		for rows.Next() {
			var k, v []byte
			if err := rows.Scan(&k, &v); err != nil {
				rows.Close()
				return err
			}
			free[string(k)] = v
		}
		if err := rows.Err(); err != nil {
			return t.b.wrap(err)
		}
	}
	if len(free) < len(ask) {
		// Some were skipped or are gone: which is which.
		rows, err := t.conn.Query(t.ctx, `SELECT k FROM lhengine_kv WHERE k = ANY($1)`, ask)
		if err != nil {
			return t.b.wrap(err)
		}
		for rows.Next() {
			var k []byte
			if err := rows.Scan(&k); err != nil {
				rows.Close()
				return err
			}
			exists[string(k)] = true
		}
		if err := rows.Err(); err != nil {
			return t.b.wrap(err)
		}
	}
	for i, k := range keys {
		var err error
		if v, own := t.writes[string(k)]; own {
			err = fn(i, v, v != nil, false)
		} else if v, ok := free[string(k)]; ok {
			err = fn(i, v, true, false)
		} else {
			err = fn(i, nil, exists[string(k)], exists[string(k)])
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// parseVersion reads a row's xmin, the transaction that wrote it: a
// version that changes with every write of the key.
func parseVersion(s string) uint64 {
	n, _ := strconv.ParseUint(s, 10, 64)
	return n
}

func (t *txn) Set(key, val []byte) error {
	v := make([]byte, len(val)) // never nil: nil marks a deletion
	copy(v, val)
	t.writes[string(key)] = v
	return nil
}

func (t *txn) Delete(key []byte) error {
	t.writes[string(key)] = deleted
	return nil
}

// flush sends the buffered writes.
func (t *txn) flush() error {
	var batch pgx.Batch
	t.queueWrites(&batch)
	if batch.Len() == 0 {
		return nil
	}
	return t.b.wrap(t.conn.SendBatch(t.ctx, &batch).Close())
}

// queueWrites queues the buffered writes on batch, with the fences of the
// leases presented since the last batch: the fence of the records not
// written, one delete of the keys deleted, one upsert of the keys set but
// not fenced, with the fenced update of the others (fencedWrite).
func (t *txn) queueWrites(batch *pgx.Batch) {
	in, out := t.takeFences()
	var setK, setV, delK, fK, fV [][]byte
	var setL, fL []*string
	var fHeld []string
	for k, v := range t.writes {
		t.noteTask(k)
		f, fenced := in[k]
		switch {
		case v == nil:
			delK = append(delK, []byte(k))
		case fenced:
			fK, fV, fL = append(fK, []byte(k)), append(fV, v), append(fL, leaseOf(k, v))
			fHeld = append(fHeld, leaseText(f.owner, f.epoch))
		default:
			setK, setV, setL = append(setK, []byte(k)), append(setV, v), append(setL, leaseOf(k, v))
		}
	}
	if len(out) > 0 {
		keys, held := make([][]byte, len(out)), make([]string, len(out))
		for i, f := range out {
			keys[i], held[i] = f.key, leaseText(f.owner, f.epoch)
		}
		batch.Queue(fenceOnly, keys, held)
	}
	if len(delK) > 0 {
		batch.Queue(`DELETE FROM lhengine_kv WHERE k = ANY($1)`, delK)
	}
	switch {
	case len(fK) > 0:
		batch.Queue(fencedWrite, setK, setV, setL, fK, fV, fL, fHeld)
	case len(setK) > 0:
		batch.Queue(upsert, setK, setV, setL)
	}
	clear(t.writes)
}

// Commit sends the buffered writes, the change notices and the COMMIT
// in one round trip (a pipeline: once a statement fails, the server skips
// the rest, and the transaction is rolled back).
func (t *txn) Commit() error {
	var batch pgx.Batch
	t.queueWrites(&batch)
	t.queueNotices(&batch)
	batch.Queue("COMMIT")
	br := t.conn.SendBatch(t.ctx, &batch)
	var tag pgconn.CommandTag
	var err error
	for range batch.Len() {
		if tag, err = br.Exec(); err != nil {
			break
		}
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return t.b.wrap(err)
	}
	t.end()
	if tag.String() != "COMMIT" { // not expected: a statement that failed returned its error
		return errors.New("the store's database rolled the transaction back")
	}
	return nil
}

// Discard rolls the transaction back, unless it committed.
func (t *txn) Discard() {
	if t.done {
		return
	}
	if _, err := t.conn.Exec(t.ctx, "ROLLBACK"); err != nil {
		_ = t.conn.Conn().Close(t.ctx) // in an unknown state: it leaves the pool
	}
	t.end()
}

// end gives the connection back to the pool.
func (t *txn) end() {
	t.done = true
	t.conn.Release()
}

func (t *txn) Iterate(o kv.IterOptions) kv.Iterator {
	it := &iter{t: t, o: o, upper: kv.UpperBound(o.Prefix), page: o.Prefetch}
	if it.page <= 0 {
		it.page = 256
	}
	it.err = t.flush() // a walk sees the transaction's own writes
	return it
}

// iter walks keys a page at a time.
type iter struct {
	t      *txn
	o      kv.IterOptions
	upper  []byte
	page   int
	rows   []row
	pos    int
	more   bool // the last page was full: there may be more after it
	err    error
	closed bool
}

type row struct {
	k, v    []byte
	size    int64
	version uint64
}

func (i *iter) Rewind() {
	if i.o.Reverse {
		i.load(i.upper, false, true)
	} else {
		i.load(i.o.Prefix, true, true)
	}
}

func (i *iter) Seek(key []byte) { i.load(key, true, true) }

// load reads the page from key on (inclusive when incl): the first when
// first, for Rewind and Seek; the next one otherwise.
func (i *iter) load(from []byte, incl, first bool) {
	i.rows, i.pos, i.more = i.rows[:0], 0, false
	if i.err != nil {
		return
	}
	val := "v"
	if i.o.KeysOnly {
		val = "NULL::bytea"
	}
	q := `SELECT k, ` + val + `, length(v), xmin::text FROM lhengine_kv WHERE `
	args := []any{}
	arg := func(v any) string { args = append(args, v); return "$" + strconv.Itoa(len(args)) }
	if !i.o.Reverse {
		cmp := ">"
		if incl {
			cmp = ">="
		}
		if from == nil || bytes.Compare(from, i.o.Prefix) < 0 {
			from, cmp = i.o.Prefix, ">="
		}
		q += "k " + cmp + " " + arg(from)
		if i.upper != nil {
			q += " AND k < " + arg(i.upper)
		}
		q += " ORDER BY k"
	} else {
		q += "k >= " + arg(i.o.Prefix)
		switch {
		case from == nil: // the end of the key space
		case incl && first && !bytes.Equal(from, i.upper):
			q += " AND k <= " + arg(from)
		default:
			q += " AND k < " + arg(from)
		}
		q += " ORDER BY k DESC"
	}
	q += " LIMIT " + strconv.Itoa(i.page)
	rows, err := i.t.conn.Query(i.t.ctx, q, args...)
	if err != nil {
		i.err = i.t.b.wrap(err)
		return
	}
	defer rows.Close()
	for rows.Next() {
		var r row
		var ver string
		if err := rows.Scan(&r.k, &r.v, &r.size, &ver); err != nil {
			i.err = err
			return
		}
		r.version = parseVersion(ver)
		i.rows = append(i.rows, r)
	}
	if err := rows.Err(); err != nil {
		i.err = i.t.b.wrap(err)
		return
	}
	i.more = len(i.rows) == i.page
}

func (i *iter) Valid() bool {
	return i.err == nil && i.pos < len(i.rows)
}

func (i *iter) Next() {
	i.pos++
	if i.pos >= len(i.rows) && i.more {
		last := i.rows[len(i.rows)-1].k
		i.load(last, false, false)
	}
}

func (i *iter) Key() []byte      { return i.rows[i.pos].k }
func (i *iter) ValueSize() int64 { return i.rows[i.pos].size }
func (i *iter) Version() uint64  { return i.rows[i.pos].version }
func (i *iter) Err() error       { return i.err }
func (i *iter) Close()           { i.closed = true }

func (i *iter) Value(fn func([]byte) error) error {
	r := i.rows[i.pos]
	if i.o.KeysOnly && r.v == nil {
		return i.t.Get(r.k, func(v []byte, _ uint64) error { return fn(v) })
	}
	return fn(r.v)
}
