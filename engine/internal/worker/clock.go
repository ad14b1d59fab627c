package worker

import "time"

// Clock is the worker's source of time: lease renewal, retry times and the
// idle wait read it. The store has its own (store.Options.Now); tests give
// both the same fake one, so lease expiry and takeover are tested without
// waiting.
type Clock interface {
	Now() time.Time
	// NewTimer returns a timer whose channel receives once, d from now.
	NewTimer(d time.Duration) Timer
}

// Timer is the part of *time.Timer the worker uses.
type Timer interface {
	C() <-chan time.Time
	// Stop prevents the timer from firing; see time.Timer.Stop.
	Stop() bool
}

// RealClock is the wall clock.
type RealClock struct{}

// Now returns time.Now().
func (RealClock) Now() time.Time { return time.Now() }

// NewTimer returns a time.Timer.
func (RealClock) NewTimer(d time.Duration) Timer { return realTimer{time.NewTimer(d)} }

type realTimer struct{ t *time.Timer }

func (r realTimer) C() <-chan time.Time { return r.t.C }
func (r realTimer) Stop() bool          { return r.t.Stop() }
