package pgkv

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// channel is the NOTIFY channel of change notices.
const channel = "lhengine_changes"

// noticeMax bounds one notice's payload (PostgreSQL's limit is 8000 bytes).
const noticeMax = 7000

// unitsMax bounds the units one notice names of a task: a transaction
// that wrote more names the task as a whole.
const unitsMax = 64

// Change is what a notice says of one task: the units whose records a
// commit wrote, or Whole: read the whole task again (its units were too
// many to name). A change without units and not Whole wrote only the
// task's header or runnable mark.
type Change struct {
	Task  string
	Units []Unit
	Whole bool
}

// Unit names a unit of a Change's task: its step and item.
type Unit struct{ Step, Item int }

// written is what a transaction wrote of one task.
type written struct {
	units map[Unit]bool
	whole bool
}

// noteTask remembers the task a written key belongs to: its header (t/),
// its units (u/) and its runnable mark (a/) are what the other processes'
// claim indexes are made of. A unit key names its unit too.
func (t *txn) noteTask(key string) {
	if len(key) < 3 || key[1] != '/' || (key[0] != 't' && key[0] != 'u' && key[0] != 'a') {
		return
	}
	id, rest, _ := strings.Cut(key[2:], "/")
	if t.tasks == nil {
		t.tasks = map[string]*written{}
	}
	w := t.tasks[id]
	if w == nil {
		w = &written{}
		t.tasks[id] = w
	}
	if key[0] != 'u' || w.whole {
		return
	}
	u, ok := parseUnit(rest)
	if !ok || len(w.units) >= unitsMax {
		w.whole, w.units = true, nil
		return
	}
	if w.units == nil {
		w.units = map[Unit]bool{}
	}
	w.units[u] = true
}

// parseUnit reads "SSSS/IIIIIIII" (hex), a unit key's step and item.
func parseUnit(s string) (Unit, bool) {
	a, b, ok := strings.Cut(s, "/")
	step, err1 := strconv.ParseUint(a, 16, 31)
	item, err2 := strconv.ParseUint(b, 16, 31)
	if !ok || err1 != nil || err2 != nil {
		return Unit{}, false
	}
	return Unit{int(step), int(item)}, true
}

// encode is a Change in a notice: "ID", "ID*" (whole), or
// "ID|SSSS/IIIIIIII|…" naming its units.
func (c Change) encode() string {
	switch {
	case c.Whole:
		return c.Task + "*"
	case len(c.Units) == 0:
		return c.Task
	}
	var b strings.Builder
	b.WriteString(c.Task)
	for _, u := range c.Units {
		fmt.Fprintf(&b, "|%04x/%08x", u.Step, u.Item)
	}
	return b.String()
}

// decodeChange reads what encode wrote. Anything it cannot read names
// the whole task, or nothing when not even the task can be read.
func decodeChange(s string) (Change, bool) {
	if id, ok := strings.CutSuffix(s, "*"); ok {
		return Change{Task: id, Whole: true}, id != ""
	}
	parts := strings.Split(s, "|")
	c := Change{Task: parts[0]}
	for _, p := range parts[1:] {
		u, ok := parseUnit(p)
		if !ok {
			return Change{Task: c.Task, Whole: true}, c.Task != ""
		}
		c.Units = append(c.Units, u)
	}
	return c, c.Task != ""
}

// queueNotices queues on batch, to run inside the transaction, the
// change notices of the tasks it wrote: PostgreSQL delivers them to
// every listener once, and only if, the transaction commits. A payload
// is "SESSION CHANGE,CHANGE,…" (Change.encode), split over several
// notices when long.
func (t *txn) queueNotices(batch *pgx.Batch) {
	var b strings.Builder
	send := func() {
		if b.Len() > 0 {
			batch.Queue("SELECT pg_notify($1, $2)", channel, t.session+" "+b.String())
			b.Reset()
		}
	}
	for id, w := range t.tasks {
		c := Change{Task: id, Whole: w.whole}
		for u := range w.units {
			c.Units = append(c.Units, u)
		}
		slices.SortFunc(c.Units, func(a, b Unit) int {
			if a.Step != b.Step {
				return a.Step - b.Step
			}
			return a.Item - b.Item
		})
		e := c.encode()
		if b.Len()+len(e)+1 > noticeMax {
			send()
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(e)
	}
	clear(t.tasks)
	send()
}

// Listen calls changed with what other sessions' commits changed, as
// their notices arrive, until ctx ends. changed(nil) means anything may
// have changed: notices may have been missed (the connection was lost and
// made again), so read everything again. It returns when ctx ends.
func (b *Backend) Listen(ctx context.Context, changed func([]Change)) {
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

func (b *Backend) listen(ctx context.Context, changed func([]Change)) {
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
		if cs := decodeNotice(b.session, n.Payload); len(cs) > 0 {
			changed(cs)
		}
	}
}

// decodeNotice reads a notice's payload: nothing when session sent it.
func decodeNotice(session, payload string) []Change {
	from, list, _ := strings.Cut(payload, " ")
	if from == session || list == "" {
		return nil
	}
	var out []Change
	for _, e := range strings.Split(list, ",") {
		if c, ok := decodeChange(e); ok {
			out = append(out, c)
		}
	}
	return out
}
