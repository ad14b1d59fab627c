package pgkv

import (
	"context"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// channel is the NOTIFY channel of change notices.
const channel = "lhengine_changes"

// noticeMax bounds one notice's payload (PostgreSQL's limit is 8000 bytes).
const noticeMax = 7000

// noteTask remembers the task a written key belongs to: its header (t/),
// its units (u/) and its runnable mark (a/) are what the other processes'
// claim indexes are made of.
func (t *txn) noteTask(key string) {
	if len(key) < 3 || key[1] != '/' || (key[0] != 't' && key[0] != 'u' && key[0] != 'a') {
		return
	}
	id, _, _ := strings.Cut(key[2:], "/")
	if t.tasks == nil {
		t.tasks = map[string]bool{}
	}
	t.tasks[id] = true
}

// notice sends, inside the transaction, the change notice of the tasks it
// wrote: PostgreSQL delivers it to every listener once, and only if, the
// transaction commits. Its payload is "SESSION ID,ID,…".
func (t *txn) notice() error {
	if len(t.tasks) == 0 {
		return nil
	}
	var b strings.Builder
	send := func() error {
		if b.Len() == 0 {
			return nil
		}
		_, err := t.tx.Exec(t.ctx, "SELECT pg_notify($1, $2)", channel, t.session+" "+b.String())
		b.Reset()
		return err
	}
	for id := range t.tasks {
		if b.Len()+len(id)+1 > noticeMax {
			if err := send(); err != nil {
				return err
			}
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(id)
	}
	clear(t.tasks)
	return send()
}

// Listen calls changed with the tasks other sessions' commits changed, as
// their notices arrive, until ctx ends. changed(nil) means anything may
// have changed: notices may have been missed (the connection was lost and
// made again), so read everything again. It returns when ctx ends.
func (b *Backend) Listen(ctx context.Context, changed func(tasks []string)) {
	for first := true; ctx.Err() == nil; first = false {
		if !first {
			changed(nil)
		}
		b.listen(ctx, changed)
		select { // the database is away: try again shortly
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}

func (b *Backend) listen(ctx context.Context, changed func([]string)) {
	conn, err := pgx.Connect(ctx, b.url)
	if err != nil {
		return
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, "LISTEN "+channel); err != nil {
		return
	}
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return
		}
		session, ids, _ := strings.Cut(n.Payload, " ")
		if session == b.session || ids == "" {
			continue
		}
		changed(strings.Split(ids, ","))
	}
}
