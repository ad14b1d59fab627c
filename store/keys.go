package store

import (
	"encoding/binary"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Key layout. Every key starts with a one-letter table name and the task id,
// so one task's records are one prefix scan away and tasks sort by creation.
//
//	t/<task>                                 Task
//	m/<task>                                 Manifest (written once)
//	u/<task>/<step>/<item>                   Unit
//	r/<task>/<step>/<item>  -> not-before    ready index (units that may be leased)
//	l/<task>/<step>/<item>  -> until, owner  lease index (units leased now)
//	o/<task>/<step>/<item>/<attempt>         Attempt (output, failure, log)
//	e/<task>/<seq>                           Event
//	k/<idempotency key>     -> task id       submit dedupe
//
// Numbers are fixed-width hex so that byte order is numeric order.

func taskKey(id string) []byte { return []byte("t/" + id) }

func manifestKey(id string) []byte { return []byte("m/" + id) }

func unitKey(id string, step, item int) []byte {
	return fmt.Appendf(nil, "u/%s/%04x/%08x", id, step, item)
}

func unitStepPrefix(id string, step int) []byte { return fmt.Appendf(nil, "u/%s/%04x/", id, step) }

func readyKey(id string, step, item int) []byte {
	return fmt.Appendf(nil, "r/%s/%04x/%08x", id, step, item)
}

func leaseKey(id string, step, item int) []byte {
	return fmt.Appendf(nil, "l/%s/%04x/%08x", id, step, item)
}

func attemptKey(id string, step, item, attempt int) []byte {
	return fmt.Appendf(nil, "o/%s/%04x/%08x/%08x", id, step, item, attempt)
}

func attemptPrefix(id string, step int) []byte { return fmt.Appendf(nil, "o/%s/%04x/", id, step) }

func eventKey(id string, seq uint64) []byte { return fmt.Appendf(nil, "e/%s/%016x", id, seq) }

func idemKey(k string) []byte { return []byte("k/" + k) }

// parseUnitRef parses the "<task>/<step>/<item>" tail of r/ and l/ keys.
func parseUnitRef(key []byte) (id string, step, item int, ok bool) {
	s := string(key)
	if len(s) < 2 {
		return "", 0, 0, false
	}
	parts := strings.Split(s[2:], "/")
	if len(parts) != 3 {
		return "", 0, 0, false
	}
	st, err1 := strconv.ParseUint(parts[1], 16, 32)
	it, err2 := strconv.ParseUint(parts[2], 16, 32)
	if err1 != nil || err2 != nil {
		return "", 0, 0, false
	}
	return parts[0], int(st), int(it), true
}

func encodeTime(t time.Time) []byte {
	var b [8]byte
	if !t.IsZero() {
		binary.BigEndian.PutUint64(b[:], uint64(t.UnixNano()))
	}
	return b[:]
}

func decodeTime(b []byte) time.Time {
	if len(b) < 8 {
		return time.Time{}
	}
	n := binary.BigEndian.Uint64(b[:8])
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, int64(n)).UTC()
}

// leaseVal is the value of an l/ key: the expiry, then the owner.
func leaseVal(until time.Time, owner string) []byte {
	return append(encodeTime(until), owner...)
}
