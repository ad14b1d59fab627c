package worker

import (
	"errors"
	"fmt"
	"sync"

	"github.com/lhengine/lhengine/ledger"
)

// Aborts lets the engine stop the attempts of a task at once when the task
// is cancelled in the same process: without it an attempt learns that its
// lease is gone at its next renewal, up to a third of the lease later. An
// engine shares one Aborts with all its workers.
type Aborts struct {
	mu      sync.Mutex
	running map[string]map[*host]struct{} // by task id
}

// add registers an attempt of task; the returned func removes it.
func (a *Aborts) add(task string, h *host) (remove func()) {
	if a == nil {
		return func() {}
	}
	a.mu.Lock()
	if a.running == nil {
		a.running = map[string]map[*host]struct{}{}
	}
	if a.running[task] == nil {
		a.running[task] = map[*host]struct{}{}
	}
	a.running[task][h] = struct{}{}
	a.mu.Unlock()
	return func() {
		a.mu.Lock()
		delete(a.running[task], h)
		if len(a.running[task]) == 0 {
			delete(a.running, task)
		}
		a.mu.Unlock()
	}
}

// errGivenBack is why an attempt stops when GiveBack cut it short.
var errGivenBack = errors.New("the task was paused: the unit is given back uncharged")

// GiveBack stops every attempt of task running in the engine's workers and
// has their units given back uncharged (store.Store.Release), as a graceful
// stop does when its grace runs out: the attempts are not committed and
// cost their units nothing. It returns how many attempts it stopped. An
// attempt that already ended commits as usual.
func (a *Aborts) GiveBack(task string) int {
	a.mu.Lock()
	hs := make([]*host, 0, len(a.running[task]))
	for h := range a.running[task] {
		hs = append(hs, h)
	}
	a.mu.Unlock()
	for _, h := range hs {
		h.lose(errGivenBack)
	}
	return len(hs)
}

// Abort stops every attempt of task running in the engine's workers, as
// losing its lease would (their work is thrown away), and says why. Call
// it only once the store no longer lets them commit (the task is cancelled).
func (a *Aborts) Abort(task, why string) int {
	a.mu.Lock()
	hs := make([]*host, 0, len(a.running[task]))
	for h := range a.running[task] {
		hs = append(hs, h)
	}
	a.mu.Unlock()
	for _, h := range hs {
		h.lose(fmt.Errorf("%w: %s", ledger.ErrLeaseLost, why))
	}
	return len(hs)
}
