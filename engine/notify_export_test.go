package engine

import "time"

// SetNotifyBackoff makes e wait first, doubling up to max, after a
// delivery that left a notification open, instead of 1s doubling to 5 min.
// Call it before Work.
func SetNotifyBackoff(e *Engine, first, max time.Duration) {
	e.notify.backoff, e.notify.maxBackoff = first, max
}
