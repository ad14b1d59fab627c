// Package index is the store's in-memory view of what can be claimed:
// the runnable tasks, their ready units (in the order they are served),
// the live leases and the fan-out steps waiting to be planned. The durable
// records are the truth; the index only says where to look.
package index

import (
	"container/heap"
	"sort"
	"sync"
	"time"
)

// Index is the in-memory view of what can be claimed: the runnable tasks,
// their ready units and the live leases. The durable records (tasks and
// units) are the truth; the index only says where to look, and every
// candidate it offers is checked against its unit record inside the claiming
// transaction. It is rebuilt from the records when the store opens, and
// changed only after a transaction commits (the changes a transaction
// queues for after its commit), so a discarded transaction leaves it
// untouched.
//
// It can be kept in memory at all because Badger lets one process open a
// directory: no other writer can make units ready behind this one's back.
type Index struct {
	// Mu guards the index: its users hold it while they read or change it.
	Mu     sync.Mutex
	Active []string            // runnable task ids, oldest first
	Leases map[Ref]Lease       // units leased now
	ready  map[string]*readyQ  // task id -> its ready units
	plans  map[string]*planJob // tasks whose current fan-out step awaits its items
	// Served is the task that got the last lease: the next claim starts
	// with the task after it, so runnable tasks take turns (see the
	// store's claim).
	Served string
}

// planJob is a task's step waiting to be planned. pending: someone must
// plan it; running: a caller is planning it now. A step entered again while
// it is being planned (a repair) is pending and running at once.
type planJob struct{ pending, running bool }

// Ref names a unit: its task, step and item.
type Ref struct {
	Task       string
	Step, Item int
}

// Lease is a unit's lease as the index keeps it: its owner and expiry.
type Lease struct {
	Owner string
	Until time.Time
}

// readyQ holds one task's ready units. A unit made ready with a not-before
// time (a retry waiting out its backoff) waits in later until that time,
// and is then served before every other ready unit, earliest first (retry):
// a retry runs once its backoff has passed, not after the units that were
// queued when it failed. The others are served in the order they became
// ready, window units (first) ahead of the rest (queue).
//
// due says which slots count: a slot in first or queue while its unit's
// not-before is zero, a slot in later or retry while it is the slot's time.
// Claimed units are deleted from due; slots that no longer count are
// skipped, and dropped as they are met.
type readyQ struct {
	later laterHeap // not due when last looked at
	retry []laterRef
	first []Ref // served before queue; few
	queue []Ref
	head  int
	due   map[Ref]time.Time // unit -> not before (zero: ready now)
}

// laterRef is a unit waiting until at.
type laterRef struct {
	r  Ref
	at time.Time
}

// laterHeap orders waiting units by their time (container/heap).
type laterHeap []laterRef

func (h laterHeap) Len() int           { return len(h) }
func (h laterHeap) Less(i, j int) bool { return h[i].at.Before(h[j].at) }
func (h laterHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *laterHeap) Push(x any)        { *h = append(*h, x.(laterRef)) }
func (h *laterHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	*h = old[:len(old)-1]
	return e
}

// counts reports whether slot r of first or queue counts.
func (q *readyQ) counts(r Ref) bool {
	nb, ok := q.due[r]
	return ok && nb.IsZero()
}

// countsLater reports whether slot e of later or retry counts.
func (q *readyQ) countsLater(e laterRef) bool {
	nb, ok := q.due[e.r]
	return ok && nb.Equal(e.at)
}

// New is an empty index.
func New() *Index {
	return &Index{ready: map[string]*readyQ{}, Leases: map[Ref]Lease{}, plans: map[string]*planJob{}}
}

// HasReady reports whether task id has ready units queued (some may have
// been claimed since: Candidates tells).
func (x *Index) HasReady(id string) bool { return x.ready[id] != nil }

// NeedPlan records that task id's current step must be planned.
func (x *Index) NeedPlan(id string) {
	j := x.plans[id]
	if j == nil {
		j = &planJob{}
		x.plans[id] = j
	}
	j.pending = true
}

// TakePlan hands out a pending plan job nobody is running, oldest task
// first. Every claim asks, so it looks at the (usually empty) set of plan
// jobs, not at every runnable task.
func (x *Index) TakePlan(only string) (string, bool) {
	best := ""
	for id, j := range x.plans {
		if (only == "" || id == only) && j.pending && !j.running && (best == "" || id < best) {
			best = id
		}
	}
	if best == "" {
		return "", false
	}
	j := x.plans[best]
	j.pending, j.running = false, true
	return best, true
}

// ReleasePlan ends a run of a plan job; again makes it pending once more
// (the run stopped before the step was planned).
func (x *Index) ReleasePlan(id string, again bool) {
	j := x.plans[id]
	if j == nil {
		return
	}
	j.running = false
	if again {
		j.pending = true
	}
	if !j.pending {
		delete(x.plans, id)
	}
}

// Planning reports whether a plan job of task id (any task when id is "")
// is pending or running.
func (x *Index) Planning(id string) bool {
	if id != "" {
		return x.plans[id] != nil
	}
	return len(x.plans) > 0
}

// AddActive marks a task runnable.
func (x *Index) AddActive(id string) {
	i := sort.SearchStrings(x.Active, id)
	if i < len(x.Active) && x.Active[i] == id {
		return
	}
	x.Active = append(x.Active, "")
	copy(x.Active[i+1:], x.Active[i:])
	x.Active[i] = id
}

// RemoveTask forgets everything about a task that is no longer runnable.
func (x *Index) RemoveTask(id string) {
	i := sort.SearchStrings(x.Active, id)
	if i < len(x.Active) && x.Active[i] == id {
		x.Active = append(x.Active[:i], x.Active[i+1:]...)
	}
	delete(x.ready, id)
	if j := x.plans[id]; j != nil && !j.running {
		delete(x.plans, id)
	} else if j != nil {
		j.pending = false
	}
	for r := range x.Leases {
		if r.Task == id {
			delete(x.Leases, r)
		}
	}
}

// AddReady queues a ready unit: with a notBefore time, to be served once
// that time has passed, ahead of the units queued without one; else at the
// back of its task's queue, or with first ahead of every unit queued
// without it (window units, which would otherwise wait for their anchor's
// whole fan-out). A unit queued already keeps its slot if its not-before
// is the same.
func (x *Index) AddReady(r Ref, notBefore time.Time, first bool) {
	q := x.ready[r.Task]
	if q == nil {
		q = &readyQ{due: map[Ref]time.Time{}}
		x.ready[r.Task] = q
	}
	if old, ok := q.due[r]; ok && old.Equal(notBefore) {
		return
	}
	q.due[r] = notBefore
	switch {
	case !notBefore.IsZero():
		heap.Push(&q.later, laterRef{r, notBefore})
	case first:
		q.first = append(q.first, r)
	default:
		q.queue = append(q.queue, r)
	}
}

// RemoveReady forgets a ready unit (claimed, or found stale).
func (x *Index) RemoveReady(r Ref) {
	if q := x.ready[r.Task]; q != nil {
		delete(q.due, r)
	}
}

// DropStep forgets the ready units and leases of one step of a task.
func (x *Index) DropStep(id string, step int) {
	if q := x.ready[id]; q != nil {
		for r := range q.due {
			if r.Step == step {
				delete(q.due, r)
			}
		}
	}
	for r := range x.Leases {
		if r.Task == id && r.Step == step {
			delete(x.Leases, r)
		}
	}
}

// Candidates returns up to max ready units of task id that are due at now
// and not skipped, in the order readyQ describes, and the earliest
// not-before of those that are not due yet. It drops the slots that no
// longer count as it goes.
func (x *Index) Candidates(id string, now time.Time, max int, skip func(Ref) bool) ([]Ref, time.Time) {
	q := x.ready[id]
	if q == nil || max <= 0 {
		return nil, time.Time{}
	}
	var out []Ref
	var wake time.Time
	for len(q.later) > 0 {
		e := q.later[0]
		if q.countsLater(e) && e.at.After(now) {
			wake = e.at
			break
		}
		heap.Pop(&q.later)
		if q.countsLater(e) {
			q.retry = append(q.retry, e) // due: popped in time order
		}
	}
	for q.head < len(q.queue) && !q.counts(q.queue[q.head]) {
		q.head++
	}
	if q.head > 1024 && q.head > len(q.queue)/2 {
		q.queue = append([]Ref(nil), q.queue[q.head:]...)
		q.head = 0
	}
	var seen map[Ref]bool // a unit made ready again may hold two slots
	if len(q.retry) > 0 {
		kept := q.retry[:0]
		for _, e := range q.retry {
			if q.countsLater(e) {
				kept = append(kept, e)
			}
		}
		q.retry = kept
	}
	if len(q.first) > 0 {
		kept := q.first[:0]
		for _, r := range q.first {
			if q.counts(r) {
				kept = append(kept, r)
			}
		}
		q.first = kept
	}
	nr, n := len(q.retry), len(q.retry)+len(q.first)
	for i := 0; i < n+len(q.queue)-q.head && len(out) < max; i++ {
		var r Ref
		switch {
		case i < nr:
			r = q.retry[i].r
		case i < n:
			r = q.first[i-nr]
		default:
			r = q.queue[q.head+i-n]
			if !q.counts(r) {
				continue
			}
		}
		if seen[r] || skip(r) {
			continue
		}
		if seen == nil {
			seen = map[Ref]bool{}
		}
		seen[r] = true
		out = append(out, r)
	}
	return out, wake
}

// ReplaceTask replaces what x holds of task id with what from holds of it:
// how a process that shares its store with others (PostgreSQL) takes in a
// task their commits changed, from an index of that task read from the
// records (from is then not to be used). A plan job x is running stays
// running, pending if from says the step still awaits planning.
func (x *Index) ReplaceTask(id string, from *Index) {
	x.RemoveTask(id)
	if i := sort.SearchStrings(from.Active, id); i < len(from.Active) && from.Active[i] == id {
		x.AddActive(id)
	}
	if q := from.ready[id]; q != nil {
		x.ready[id] = q
	}
	if j := from.plans[id]; j != nil && j.pending {
		x.NeedPlan(id)
	}
	for r, l := range from.Leases {
		if r.Task == id {
			x.Leases[r] = l
		}
	}
}
