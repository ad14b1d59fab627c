package worker

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"
)

// fakeClock is a Clock that moves only when a test advances it. Timers
// fire (in deadline order) when the clock reaches them.
type fakeClock struct {
	mu      sync.Mutex
	now     time.Time
	timers  []*fakeTimer
	changed chan struct{} // closed and replaced whenever a timer is made
}

type fakeTimer struct {
	c  *fakeClock
	at time.Time
	ch chan time.Time
}

var epoch = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

func newFakeClock() *fakeClock {
	return &fakeClock{now: epoch, changed: make(chan struct{})}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) NewTimer(d time.Duration) Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &fakeTimer{c: c, at: c.now.Add(d), ch: make(chan time.Time, 1)}
	if d <= 0 {
		t.ch <- c.now
	} else {
		c.timers = append(c.timers, t)
	}
	close(c.changed)
	c.changed = make(chan struct{})
	return t
}

func (t *fakeTimer) C() <-chan time.Time { return t.ch }

func (t *fakeTimer) Stop() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	i := slices.Index(t.c.timers, t)
	if i < 0 {
		return false
	}
	t.c.timers = slices.Delete(t.c.timers, i, i+1)
	return true
}

// advanceTo moves the clock to at and fires every timer due by then.
func (c *fakeClock) advanceTo(at time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if at.After(c.now) {
		c.now = at
	}
	c.timers = slices.DeleteFunc(c.timers, func(t *fakeTimer) bool {
		if t.at.After(c.now) {
			return false
		}
		t.ch <- t.at
		return true
	})
}

// waitFor waits until a pending timer satisfies ok and returns the
// earliest such deadline, or until ctx or stop ends (then ok is false).
func (c *fakeClock) waitFor(ctx context.Context, stop <-chan struct{}, ok func(at time.Time) bool) (time.Time, bool) {
	for {
		c.mu.Lock()
		var first time.Time
		for _, t := range c.timers {
			if ok(t.at) && (first.IsZero() || t.at.Before(first)) {
				first = t.at
			}
		}
		if !first.IsZero() {
			c.mu.Unlock()
			return first, true
		}
		changed := c.changed
		c.mu.Unlock()
		select {
		case <-changed:
		case <-stop:
			return time.Time{}, false
		case <-ctx.Done():
			return time.Time{}, false
		}
	}
}

// fireAt waits until a timer is due exactly at, then advances to it.
func (c *fakeClock) fireAt(t *testing.T, ctx context.Context, at time.Time) {
	t.Helper()
	c.waitTimer(t, ctx, at)
	c.advanceTo(at)
}

// waitTimer waits until a timer is due exactly at.
func (c *fakeClock) waitTimer(t *testing.T, ctx context.Context, at time.Time) {
	t.Helper()
	if _, ok := c.waitFor(ctx, nil, func(d time.Time) bool { return d.Equal(at) }); !ok {
		c.mu.Lock()
		var pending []time.Duration
		for _, tm := range c.timers {
			pending = append(pending, tm.at.Sub(epoch))
		}
		c.mu.Unlock()
		t.Fatalf("no timer due at epoch+%s (pending: %v): %v", at.Sub(epoch), pending, ctx.Err())
	}
}

// drive advances the clock from timer to timer until done is closed.
func (c *fakeClock) drive(t *testing.T, ctx context.Context, done <-chan struct{}) {
	t.Helper()
	for {
		at, ok := c.waitFor(ctx, done, func(time.Time) bool { return true })
		if !ok {
			select {
			case <-done:
				return
			default:
				t.Fatalf("nothing happened: %v", ctx.Err())
			}
		}
		c.advanceTo(at)
	}
}
