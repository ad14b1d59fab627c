package store

import (
	"sort"
	"sync"
	"time"
)

// index is the in-memory view of what can be claimed: the runnable tasks,
// their ready units and the live leases. The durable records (tasks and
// units) are the truth; the index only says where to look, and every
// candidate it offers is checked against its unit record inside the claiming
// transaction. It is rebuilt from the records when the store opens, and
// changed only after a transaction commits (tx.after), so a discarded
// transaction leaves it untouched.
//
// It can be kept in memory at all because Badger lets one process open a
// directory: no other writer can make units ready behind this one's back.
type index struct {
	mu     sync.Mutex
	active []string             // runnable task ids, oldest first
	ready  map[string]*readyQ   // task id -> its ready units
	leases map[unitRef]leaseRec // units leased now
}

type unitRef struct {
	task       string
	step, item int
}

type leaseRec struct {
	owner string
	until time.Time
}

// readyQ holds one task's ready units in the order they became ready.
// Claimed units are deleted from due; their queue slots are skipped and
// dropped when they reach the head.
type readyQ struct {
	queue []unitRef
	head  int
	due   map[unitRef]time.Time // unit -> not before
}

func newIndex() *index {
	return &index{ready: map[string]*readyQ{}, leases: map[unitRef]leaseRec{}}
}

// addActive marks a task runnable.
func (x *index) addActive(id string) {
	i := sort.SearchStrings(x.active, id)
	if i < len(x.active) && x.active[i] == id {
		return
	}
	x.active = append(x.active, "")
	copy(x.active[i+1:], x.active[i:])
	x.active[i] = id
}

// removeTask forgets everything about a task that is no longer runnable.
func (x *index) removeTask(id string) {
	i := sort.SearchStrings(x.active, id)
	if i < len(x.active) && x.active[i] == id {
		x.active = append(x.active[:i], x.active[i+1:]...)
	}
	delete(x.ready, id)
	for r := range x.leases {
		if r.task == id {
			delete(x.leases, r)
		}
	}
}

func (x *index) addReady(r unitRef, notBefore time.Time) {
	q := x.ready[r.task]
	if q == nil {
		q = &readyQ{due: map[unitRef]time.Time{}}
		x.ready[r.task] = q
	}
	if _, ok := q.due[r]; !ok {
		q.queue = append(q.queue, r)
	}
	q.due[r] = notBefore
}

func (x *index) removeReady(r unitRef) {
	if q := x.ready[r.task]; q != nil {
		delete(q.due, r)
	}
}

// dropStep forgets the ready units and leases of one step of a task.
func (x *index) dropStep(id string, step int) {
	if q := x.ready[id]; q != nil {
		for r := range q.due {
			if r.step == step {
				delete(q.due, r)
			}
		}
	}
	for r := range x.leases {
		if r.task == id && r.step == step {
			delete(x.leases, r)
		}
	}
}

// candidates returns up to max ready units of task id that are due at now,
// in queue order, and the earliest not-before of those that are not due yet.
// It compacts the head of the queue as it goes.
func (x *index) candidates(id string, now time.Time, max int) ([]unitRef, time.Time) {
	q := x.ready[id]
	if q == nil || max <= 0 {
		return nil, time.Time{}
	}
	var out []unitRef
	var wake time.Time
	for q.head < len(q.queue) {
		if _, ok := q.due[q.queue[q.head]]; ok {
			break
		}
		q.head++
	}
	if q.head > 1024 && q.head > len(q.queue)/2 {
		q.queue = append([]unitRef(nil), q.queue[q.head:]...)
		q.head = 0
	}
	var seen map[unitRef]bool // a unit made ready again may hold two slots
	for i := q.head; i < len(q.queue) && len(out) < max; i++ {
		r := q.queue[i]
		nb, ok := q.due[r]
		if !ok || seen[r] {
			continue
		}
		if nb.After(now) {
			wake = earliest(wake, nb)
			continue
		}
		if seen == nil {
			seen = map[unitRef]bool{}
		}
		seen[r] = true
		out = append(out, r)
	}
	return out, wake
}
