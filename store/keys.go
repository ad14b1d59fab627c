package store

import "fmt"

// Key layout. Every key starts with a one-letter table name and the task id,
// so one task's records are one prefix scan away and tasks sort by creation.
//
//	t/<task>                                 Task header (all but its steps)
//	s/<task>/<step>                          StepState of one step of the task
//	m/<task>                                 Manifest (written once)
//	u/<task>/<step>/<item>                   Unit
//	a/<task>                                 runnable (queued or running) tasks
//	o/<task>/<step>/<item>/<attempt>         Attempt (output, failure, log)
//	e/<task>/<seq>                           Event
//	k/<idempotency key>     -> task id       submit dedupe
//
// Numbers are fixed-width hex so that byte order is numeric order.

func taskKey(id string) []byte { return []byte("t/" + id) }

func stepKey(id string, step int) []byte { return fmt.Appendf(nil, "s/%s/%04x", id, step) }

func stepPrefix(id string) []byte { return []byte("s/" + id + "/") }

func manifestKey(id string) []byte { return []byte("m/" + id) }

func unitKey(id string, step, item int) []byte {
	return fmt.Appendf(nil, "u/%s/%04x/%08x", id, step, item)
}

func unitStepPrefix(id string, step int) []byte { return fmt.Appendf(nil, "u/%s/%04x/", id, step) }

func activeKey(id string) []byte { return []byte("a/" + id) }

func attemptKey(id string, step, item, attempt int) []byte {
	return fmt.Appendf(nil, "o/%s/%04x/%08x/%08x", id, step, item, attempt)
}

func attemptPrefix(id string, step int) []byte { return fmt.Appendf(nil, "o/%s/%04x/", id, step) }

func eventKey(id string, seq uint64) []byte { return fmt.Appendf(nil, "e/%s/%016x", id, seq) }

func idemKey(k string) []byte { return []byte("k/" + k) }
