// Package lease grants, extends, gives back, takes back and checks the
// leases of work units. A claim (Leases.Claim) leases ready units, runnable
// tasks taking turns, each lease with the task's next fencing epoch;
// expired leases, and those of a session of the store that no longer
// runs, are taken back first. Leased is the check every write of a lease's holder goes
// through: the lease must still be the unit's current one (ErrLeaseLost
// otherwise), so a worker that lost it can never overwrite the work of the
// worker that took over.
package lease

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/lhengine/lhengine/ledger"
	"github.com/lhengine/lhengine/store/internal/budget"
	"github.com/lhengine/lhengine/store/internal/index"
	"github.com/lhengine/lhengine/store/internal/kv"
	"github.com/lhengine/lhengine/store/internal/outbox"
)

// Leases are a store's leases: Idx its claim index (the caller of Claim
// holds no lock on it: Claim takes it), Events its event log and clock,
// Session the store's session, Update its group commit. Alive, when set,
// says whether a session other than Session still runs: a lease of a
// session that does not is dead before it expires. Nil: no other session
// does (Badger: one process per store, so every other session is an
// earlier process that is gone).
type Leases struct {
	Idx     *index.Index
	Events  *outbox.Events
	Session string
	Alive   func(session string) bool
	Update  kv.Update
}

// live reports whether a lease of owner, valid until until, still holds
// at now.
func (s *Leases) live(owner string, until, now time.Time) bool {
	if until.Before(now) {
		return false
	}
	se := OwnerSession(owner)
	return se == s.Session || s.Alive != nil && s.Alive(se)
}

// OwnerSession is the session of a lease owner (Store.Owner's prefix).
func OwnerSession(owner string) string {
	if i := strings.IndexByte(owner, '/'); i >= 0 {
		return owner[:i]
	}
	return owner
}

// Earliest is the earlier of two times, zero meaning none.
func Earliest(a, b time.Time) time.Time {
	if a.IsZero() || (!b.IsZero() && b.Before(a)) {
		return b
	}
	return a
}

// Claim leases up to req.Max units inside t. held, when set, is a task record
// the calling operation has already changed (and will save itself).
//
// Runnable tasks take turns: the claim starts with the task after the one
// that got the previous lease, and a claim for several units first gives
// each task an equal share, then fills up greedily, so a long fan-out
// cannot starve tasks submitted after it.
func (s *Leases) Claim(t *kv.Tx, req ledger.ClaimRequest, held *ledger.Task) (ledger.Claimed, error) {
	s.Idx.Mu.Lock()
	defer s.Idx.Mu.Unlock()
	c := &claiming{s: s, t: t, req: req, held: held, now: s.Events.Now(), b: t.Batch(),
		tasks: map[string]*ledger.Task{}, loaded: map[string]claimMark{}}
	if held != nil {
		c.tasks[held.ID] = held
	}
	if err := c.takeBackExpired(); err != nil {
		return c.out, err
	}
	ids := c.turns()
	share := req.Max
	if len(ids) > 1 {
		share = max(1, req.Max/len(ids))
	}
	for round := 0; round < 2 && len(c.out.Leases) < req.Max; round++ {
		for _, id := range ids {
			if len(c.out.Leases) >= req.Max {
				break
			}
			limit := req.Max
			if round == 0 {
				limit = share
			}
			if err := c.fromTask(id, limit); err != nil {
				return c.out, err
			}
		}
	}
	c.snapshots()
	return c.out, c.save()
}

// claiming is one claim under way: the tasks it read (and what each looked
// like then), the units its transaction's batch made ready that the index
// does not hold yet, and what it has leased so far.
type claiming struct {
	s      *Leases
	t      *kv.Tx
	req    ledger.ClaimRequest
	held   *ledger.Task
	now    time.Time
	b      *kv.Batch
	tasks  map[string]*ledger.Task
	loaded map[string]claimMark   // what each task looked like when read
	extra  map[string][]index.Ref // ready units the index does not list yet, by task
	out    ledger.Claimed
}

// load reads task id once per claim.
func (c *claiming) load(id string) (*ledger.Task, error) {
	if task, ok := c.tasks[id]; ok {
		return task, nil
	}
	task := new(ledger.Task)
	if err := c.t.GetJSON(kv.TaskKey(id), task); err != nil {
		return nil, err
	}
	c.tasks[id] = task
	c.loaded[id] = claimMark{task.Epoch, task.Reclaims, task.Status}
	return task, nil
}

// takeBackExpired returns expired leases to the ready state first, and
// gathers the units made ready by this transaction (or an earlier
// operation of its batch), which are not in the index yet.
func (c *claiming) takeBackExpired() error {
	extra, err := c.s.reclaim(c.t, c.req.Task, c.now, c.load, &c.out.Wake)
	if err != nil {
		return err
	}
	for _, refs := range extra {
		c.out.Reclaimed += len(refs)
	}
	for _, r := range c.b.Ready {
		if !c.b.Taken[r] {
			extra[r.Task] = append(extra[r.Task], r)
		}
	}
	c.extra = extra
	return nil
}

// turns is the order the claim visits tasks in: the one asked for, or every
// active task starting after the one served last.
func (c *claiming) turns() []string {
	ids := c.s.Idx.Active
	if c.req.Task != "" {
		ids = []string{c.req.Task}
	} else if len(ids) > 1 {
		i := sortSearch(ids, c.s.Idx.Served)
		ids = append(append(make([]string, 0, len(ids)), ids[i:]...), ids[:i]...)
	}
	if c.s.Idx.Planning(c.req.Task) {
		// Units appear as a fan-out step is planned: look again soon.
		c.out.Wake = Earliest(c.out.Wake, c.now.Add(planPoll))
	}
	return ids
}

// fromTask leases up to limit more units of task id, within the room its
// step's concurrency (and its window steps') and its units budget leave.
func (c *claiming) fromTask(id string, limit int) error {
	if !c.s.Idx.HasReady(id) && len(c.extra[id]) == 0 {
		return nil
	}
	task, err := c.load(id)
	if errors.Is(err, ledger.ErrNotFound) {
		return nil
	} else if err != nil {
		return err
	}
	if !task.Status.Runnable() {
		return nil
	}
	st := c.t.Step(task, task.Cursor)
	n := min(c.req.Max-len(c.out.Leases), st.Limit-st.Leased+windowRoom(c.t, task), limit)
	if room := budget.UnitsRoom(task); room >= 0 {
		n = min(n, room) // the units budget: no unit past it starts
	}
	if n <= 0 {
		return nil
	}
	var refs []index.Ref
	for len(c.extra[id]) > 0 && len(refs) < n {
		if r := c.extra[id][0]; !c.b.Taken[r] {
			refs = append(refs, r)
		}
		c.extra[id] = c.extra[id][1:]
	}
	// The candidates' records in one read; one another process is
	// claiming or committing right now is left to it, and the claim looks
	// further down the queue instead, a few times at most.
	var busy map[index.Ref]bool
	skip := func(r index.Ref) bool { return c.b.Taken[r] || busy[r] }
	for try := 0; try < claimTries; try++ {
		more, wake := c.s.Idx.Candidates(id, c.now, n-len(refs), skip)
		refs = append(refs, more...)
		c.out.Wake = Earliest(c.out.Wake, wake)
		if len(refs) == 0 {
			return nil
		}
		keys := make([][]byte, len(refs))
		for i, r := range refs {
			keys[i] = kv.UnitKey(id, r.Step, r.Item)
		}
		skipped := 0
		err := c.t.ReadForClaim(keys, func(i int, val []byte, found, isBusy bool) error {
			if isBusy {
				if busy == nil {
					busy = map[index.Ref]bool{}
				}
				busy[refs[i]] = true
				skipped++
				return nil
			}
			u := new(ledger.Unit)
			var err error = ledger.ErrNotFound
			if found {
				if err = json.Unmarshal(val, u); err != nil {
					return fmt.Errorf("unit %s: %w", keys[i], err)
				}
			}
			return c.lease(task, st, refs[i], u, err)
		})
		if err != nil || skipped == 0 {
			return err
		}
		n, refs = skipped, refs[:0] // as many again as were skipped
	}
	return nil
}

// claimTries bounds how many times one claim of a task looks past
// candidates another process holds.
const claimTries = 4

// lease grants the unit r of task, whose record is u (err: none), a lease
// with the task's next epoch, if its record says it may run now; a
// candidate the index had wrong leaves the index.
func (c *claiming) lease(task *ledger.Task, st *ledger.StepState, r index.Ref, u *ledger.Unit, err error) error {
	t, now, id := c.t, c.now, task.ID
	rs := st // the unit's step
	if r.Step != task.Cursor && r.Step >= 0 && r.Step < task.StepCount() {
		if ws := t.Step(task, r.Step); WindowClaimable(ws, r.Step, task.Cursor) {
			rs = ws
		}
	}
	// A waiting unit is in the queue only until its approval's expiry,
	// when it is claimed to apply on_expiry.
	waiting := u.State == ledger.UnitWaiting && !u.NotBefore.IsZero()
	if err != nil || (r.Step != task.Cursor && rs == st) || (u.State != ledger.UnitReady && !waiting) || u.Pass != rs.Pass {
		stale := r
		t.After(func(x *index.Index) { x.RemoveReady(stale) })
		return nil
	}
	if rs.Leased >= rs.Limit {
		return nil // its step is at its concurrency limit (room counted window steps too)
	}
	if u.NotBefore.After(now) { // a retry made ready by this transaction, waiting out its backoff
		c.out.Wake = Earliest(c.out.Wake, u.NotBefore)
		return nil
	}
	if waiting {
		rs.Waiting = max(rs.Waiting-1, 0)
		task.Waiting = max(task.Waiting-1, 0)
		u.NotBefore = time.Time{}
	}
	if task.Status == ledger.WaitingApproval {
		task.Status, task.Reason = ledger.Running, ""
	}
	if task.Status == ledger.Queued {
		task.Status = ledger.Running
		task.StartedAt = now
		if err := c.s.Events.Append(t, task, ledger.Event{Type: ledger.EvStarted, Owner: c.req.Owner}); err != nil {
			return err
		}
	}
	task.Epoch++
	task.Attempts++
	task.Leases++
	rs.Leased++
	budget.TickWall(task, now)
	until := now.Add(c.req.LeaseFor)
	task.LeaseOwner, task.LeaseUntil = c.req.Owner, until
	u.State, u.Owner, u.Epoch, u.LeaseUntil = ledger.UnitLeased, c.req.Owner, task.Epoch, until
	if u.Round != task.Retries { // the task was retried since: a whole budget again
		u.Round, u.Base = task.Retries, u.Attempt
	}
	u.Attempt++
	u.Claimed = now
	if err := t.PutJSON(kv.UnitKey(id, r.Step, r.Item), u); err != nil {
		return err
	}
	c.b.Taken[r] = true
	c.s.Idx.Served = id
	leased, rec := r, index.Lease{Owner: u.Owner, Until: u.LeaseUntil}
	t.After(func(x *index.Index) {
		x.RemoveReady(leased)
		x.Leases[leased] = rec
	})
	c.out.Leases = append(c.out.Leases, ledger.Lease{
		Task: id, Step: r.Step, Item: r.Item, Attempt: u.Attempt, Try: u.Attempt - u.Base,
		Owner: u.Owner, Epoch: u.Epoch, Until: u.LeaseUntil, Unit: *u,
	})
	return nil
}

// snapshots gives each lease of a step at its task's cursor the task as
// claimed, shared by the leases of one task (a window unit's worker reads
// the whole task).
func (c *claiming) snapshots() {
	snaps := map[string]*ledger.Task{}
	for i, l := range c.out.Leases {
		if l.Step > c.tasks[l.Task].Cursor {
			continue
		}
		snap, ok := snaps[l.Task]
		if !ok {
			snap = c.t.Snapshot(c.tasks[l.Task])
			snaps[l.Task] = snap
		}
		c.out.Leases[i].Snapshot = snap
	}
}

// save writes every task the claim changed; the caller saves held, and an
// unchanged task needs no write.
func (c *claiming) save() error {
	for id, task := range c.tasks {
		if task == c.held || c.loaded[id] == (claimMark{task.Epoch, task.Reclaims, task.Status}) {
			continue
		}
		task.UpdatedAt = c.now
		if err := c.t.SaveTask(task); err != nil {
			return err
		}
	}
	return nil
}

// planPoll is how soon a claim that found a fan-out step being planned
// suggests looking again.
const planPoll = 5 * time.Millisecond

// sortSearch returns the index of the first id after after in the sorted
// ids (0 when there is none).
func sortSearch(ids []string, after string) int {
	i := sort.SearchStrings(ids, after)
	if i < len(ids) && ids[i] == after {
		i++
	}
	if i >= len(ids) {
		i = 0
	}
	return i
}

// claimMark is what a claim can change in a task: a lease grant takes an
// epoch, a reclaim counts, a first lease starts the task.
type claimMark struct {
	epoch    uint64
	reclaims int
	status   ledger.Status
}

// reclaim returns expired leases (and leases of earlier sessions) to the
// ready state. Tasks it touches are loaded through load and saved by the
// caller. The caller holds s.Idx.Mu.
func (s *Leases) reclaim(t *kv.Tx, only string, now time.Time, load func(string) (*ledger.Task, error), wake *time.Time) (map[string][]index.Ref, error) {
	back := map[string][]index.Ref{}
	var deads []index.Ref
	taken := t.Batch().Taken
	for r, l := range s.Idx.Leases {
		if only != "" && r.Task != only || taken[r] {
			continue // taken: leased by an earlier operation of this batch
		}
		if s.live(l.Owner, l.Until, now) {
			*wake = Earliest(*wake, l.Until)
			continue
		}
		deads = append(deads, r)
	}
	sort.Slice(deads, func(i, j int) bool {
		a, b := deads[i], deads[j]
		if a.Task != b.Task {
			return a.Task < b.Task
		}
		return a.Step < b.Step || (a.Step == b.Step && a.Item < b.Item)
	})
	for _, d := range deads {
		dead := d
		forget := func() { t.After(func(x *index.Index) { delete(x.Leases, dead) }) }
		task, err := load(d.Task)
		if errors.Is(err, ledger.ErrNotFound) {
			forget()
			continue
		} else if err != nil {
			return nil, err
		}
		u := new(ledger.Unit)
		if err := t.GetJSON(kv.UnitKey(d.Task, d.Step, d.Item), u); err != nil {
			if errors.Is(err, ledger.ErrNotFound) {
				forget()
				continue
			}
			return nil, err
		}
		if u.State != ledger.UnitLeased || !task.Status.Runnable() || u.Pass != t.Step(task, d.Step).Pass {
			forget()
			continue
		}
		// The index may be behind the record (a heartbeat earlier in this
		// batch): only a lease the record says is dead goes back.
		if s.live(u.Owner, u.LeaseUntil, now) {
			rec := index.Lease{Owner: u.Owner, Until: u.LeaseUntil}
			t.After(func(x *index.Index) {
				if _, ok := x.Leases[dead]; ok {
					x.Leases[dead] = rec
				}
			})
			*wake = Earliest(*wake, u.LeaseUntil)
			continue
		}
		forget()
		item := d.Item
		if err := s.Events.Append(t, task, ledger.Event{Type: ledger.EvLeaseExpired, Step: t.Step(task, d.Step).Name, Item: &item,
			Attempt: u.Attempt, Epoch: u.Epoch, Owner: u.Owner,
			Message: fmt.Sprintf("lease of %s (epoch %d) taken back", u.Owner, u.Epoch)}); err != nil {
			return nil, err
		}
		task.Reclaims++
		task.Leases--
		t.Step(task, d.Step).Leased--
		u.State, u.Owner, u.LeaseUntil, u.NotBefore = ledger.UnitReady, "", time.Time{}, time.Time{}
		if err := t.PutJSON(kv.UnitKey(d.Task, d.Step, d.Item), u); err != nil {
			return nil, err
		}
		t.After(func(x *index.Index) { x.AddReady(dead, time.Time{}, false) })
		back[d.Task] = append(back[d.Task], d)
	}
	return back, nil
}

// Heartbeat extends a lease by extend from now. Only the current owner, with
// the current epoch, may extend it; anyone else gets ErrLeaseLost.
func (s *Leases) Heartbeat(ctx context.Context, l ledger.Lease, extend time.Duration) (time.Time, error) {
	var until time.Time
	err := s.Update(ctx, func(t *kv.Tx) error {
		u, _, err := Leased(t, l)
		if err != nil {
			return err
		}
		until = s.Events.Now().Add(extend)
		u.LeaseUntil = until
		if err := t.PutJSON(kv.UnitKey(l.Task, l.Step, l.Item), u); err != nil {
			return err
		}
		r, rec := index.Ref{Task: l.Task, Step: l.Step, Item: l.Item}, index.Lease{Owner: u.Owner, Until: until}
		t.After(func(x *index.Index) {
			if _, ok := x.Leases[r]; ok {
				x.Leases[r] = rec
			}
		})
		return nil
	})
	return until, err
}

// Release gives back the unit of a lease whose attempt a stopping worker
// cut short, without charging the attempt: the unit is ready again, its
// attempt count and the task's go back to what they were before the
// claim (the next claim runs the same attempt number, with the same random
// seed), and a "released" event records it. What the attempt did through
// the host stays (its effects are journaled by their keys). A lease that is
// no longer current gets ErrLeaseLost and changes nothing.
func (s *Leases) Release(ctx context.Context, l ledger.Lease) error {
	return s.Update(ctx, func(t *kv.Tx) error {
		u, task, err := Leased(t, l)
		if err != nil {
			return err
		}
		t.Durable = true
		st := t.Step(task, l.Step)
		u.State, u.Owner, u.LeaseUntil, u.NotBefore = ledger.UnitReady, "", time.Time{}, time.Time{}
		u.Attempt = max(u.Attempt-1, 0)
		task.Attempts = max(task.Attempts-1, 0)
		task.Leases--
		st.Leased--
		budget.TickWall(task, s.Events.Now())
		if err := t.PutJSON(kv.UnitKey(l.Task, l.Step, l.Item), u); err != nil {
			return err
		}
		ref := index.Ref{Task: l.Task, Step: l.Step, Item: l.Item}
		t.After(func(x *index.Index) {
			delete(x.Leases, ref)
			x.AddReady(ref, time.Time{}, false)
		})
		item := l.Item
		if err := s.Events.Append(t, task, ledger.Event{Type: ledger.EvReleased, Step: st.Name, Item: &item, Attempt: l.Attempt, Epoch: l.Epoch, Owner: l.Owner,
			Message: fmt.Sprintf("given back by %s as it stopped; attempt %d runs again, not charged", l.Owner, l.Attempt)}); err != nil {
			return err
		}
		task.UpdatedAt = s.Events.Now()
		return t.SaveTask(task)
	})
}

// Leased loads the unit and task of a lease and checks that the lease is
// still the unit's current one.
func Leased(t *kv.Tx, l ledger.Lease) (*ledger.Unit, *ledger.Task, error) {
	task := new(ledger.Task)
	if err := t.GetJSON(kv.TaskKey(l.Task), task); err != nil {
		return nil, nil, err
	}
	if task.Status.Terminal() {
		return nil, nil, fmt.Errorf("%w: task %s is %s", ledger.ErrLeaseLost, task.ID, task.Status)
	}
	if l.Step < 0 || l.Step >= task.StepCount() {
		return nil, nil, fmt.Errorf("%w: task %s has no step %d", ledger.ErrLeaseLost, task.ID, l.Step)
	}
	u := new(ledger.Unit)
	if err := t.GetJSON(kv.UnitKey(l.Task, l.Step, l.Item), u); err != nil {
		if errors.Is(err, ledger.ErrNotFound) {
			return nil, nil, fmt.Errorf("%w: unit %s/%d/%d no longer exists", ledger.ErrLeaseLost, l.Task, l.Step, l.Item)
		}
		return nil, nil, err
	}
	if u.Pass != t.Step(task, l.Step).Pass {
		return nil, nil, fmt.Errorf("%w: unit %s/%d/%d belongs to pass %d of its step, which a repair replaced",
			ledger.ErrLeaseLost, l.Task, l.Step, l.Item, u.Pass)
	}
	if u.State != ledger.UnitLeased || u.Owner != l.Owner || u.Epoch != l.Epoch {
		return nil, nil, fmt.Errorf("%w: unit %s/%d/%d is %s by %q at epoch %d; presented %q epoch %d",
			ledger.ErrLeaseLost, l.Task, l.Step, l.Item, u.State, u.Owner, u.Epoch, l.Owner, l.Epoch)
	}
	t.Fence(kv.UnitKey(l.Task, l.Step, l.Item), l.Owner, l.Epoch)
	return u, task, nil
}

// WindowClaimable says whether a unit of step i may be leased while the
// task's cursor is at cur: a window step's units run from the moment its
// anchor runs until the cursor has passed the window step.
func WindowClaimable(ws *ledger.StepState, i, cur int) bool {
	return ws.Every > 0 && ws.Anchor <= cur && cur <= i
}

// windowRoom is how many more units the window steps that may run now
// (those after the cursor) can lease. It reads no step unless the cursor's
// step is an anchor or a window step.
func windowRoom(t *kv.Tx, task *ledger.Task) int {
	cur := task.Cursor
	if st := t.Step(task, cur); st.Windows == 0 && st.Every == 0 {
		return 0
	}
	room := 0
	for c := cur + 1; c < task.StepCount(); c++ {
		ws := t.Step(task, c)
		if !WindowClaimable(ws, c, cur) {
			break
		}
		room += max(0, ws.Limit-ws.Leased)
	}
	return room
}
