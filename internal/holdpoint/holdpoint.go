// Package holdpoint lets a test of this module stop the code at a named
// point of one object (a store directory, say) and let it go again, to see
// what the rest of the process answers meanwhile. A point nobody watches
// costs one atomic load.
//
//	p, stop := holdpoint.Watch(holdpoint.StoreSync, dir)
//	defer stop()
//	p.Hold()
//	... <-p.Arrived() ... // the store in dir is about to sync, and waits
//	p.Release()
//
// It is the in-process sibling of internal/crashpoint, which kills the
// process at a named point instead.
package holdpoint

import (
	"sync"
	"sync/atomic"
)

// The named points.
const (
	// StoreSync: the store is about to sync the commits of a batch to
	// disk; they are visible inside the process, not yet durable.
	StoreSync = "store.sync"
	// StoreReadWaits: a read answered outside the process waits for the
	// sync of what it saw.
	StoreReadWaits = "store.read_waits"
)

type key struct{ name, where string }

var (
	mu      sync.Mutex
	watched map[key]*Point
	active  atomic.Int32 // len(watched), read without mu
)

// Point is a test's watch on one named point of one object.
type Point struct {
	arrived chan struct{}
	mu      sync.Mutex
	held    chan struct{} // closed by Release; nil while not holding
}

// Watch starts watching name at where; stop ends the watch and lets any
// waiter go.
func Watch(name, where string) (p *Point, stop func()) {
	p = &Point{arrived: make(chan struct{}, 1024)}
	k := key{name, where}
	mu.Lock()
	if watched == nil {
		watched = map[key]*Point{}
	}
	watched[k] = p
	active.Store(int32(len(watched)))
	mu.Unlock()
	return p, func() {
		mu.Lock()
		if watched[k] == p {
			delete(watched, k)
		}
		active.Store(int32(len(watched)))
		mu.Unlock()
		p.Release()
	}
}

// Hold makes every later arrival wait until Release.
func (p *Point) Hold() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.held == nil {
		p.held = make(chan struct{})
	}
}

// Release lets the waiters go; later arrivals pass.
func (p *Point) Release() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.held != nil {
		close(p.held)
		p.held = nil
	}
}

// Arrived receives once per arrival at the point (arrivals beyond 1024
// not yet received are not counted).
func (p *Point) Arrived() <-chan struct{} { return p.arrived }

// Reached marks an arrival at name of where, and waits there while a test
// holds the point.
func Reached(name, where string) {
	if active.Load() == 0 {
		return
	}
	mu.Lock()
	p := watched[key{name, where}]
	mu.Unlock()
	if p == nil {
		return
	}
	select {
	case p.arrived <- struct{}{}:
	default:
	}
	p.mu.Lock()
	h := p.held
	p.mu.Unlock()
	if h != nil {
		<-h
	}
}
