package guest

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"sync"
)

// errStdoutFull is what a guest's write to stdout fails with once the
// attempt's output limit is reached.
var errStdoutFull = errors.New("stdout limit reached")

// stdoutBuffer keeps a guest's stdout up to max bytes. The first write past
// the limit calls overflow (which cancels the attempt) and fails.
type stdoutBuffer struct {
	buf      bytes.Buffer
	max      int
	over     bool
	overflow func()
}

func (w *stdoutBuffer) Write(p []byte) (int, error) {
	if w.over {
		return 0, errStdoutFull
	}
	if w.buf.Len()+len(p) > w.max {
		w.over = true
		w.overflow()
		return 0, errStdoutFull
	}
	return w.buf.Write(p)
}

// logBuffer is the step's log: the guest's stderr interleaved with the lines
// of its log calls. It keeps the first three quarters of max bytes and the
// last quarter, dropping the middle with a "[truncated]" marker, so both how
// the attempt began and how it ended survive a flood. Writes never fail.
//
// It also keeps the last tailMax bytes written to stderr alone, for the
// message of a non-zero exit.
type logBuffer struct {
	mu      sync.Mutex
	head    []byte
	headMax int
	tail    ring
	dropped int64
	stderr  ring
}

const tailMax = 512

func newLogBuffer(max int) *logBuffer {
	tailCap := max / 4
	return &logBuffer{
		headMax: max - tailCap,
		tail:    ring{size: tailCap},
		stderr:  ring{size: tailMax},
	}
}

// Write is the guest's stderr.
func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.stderr.write(p)
	l.add(p)
	return len(p), nil
}

// line appends one log-call line.
func (l *logBuffer) line(level, msg string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.add([]byte("[" + level + "] " + msg + "\n"))
}

func (l *logBuffer) add(p []byte) {
	if room := l.headMax - len(l.head); room > 0 {
		n := min(room, len(p))
		l.head = append(l.head, p[:n]...)
		p = p[n:]
	}
	if len(p) == 0 {
		return
	}
	l.dropped += int64(l.tail.write(p))
}

// Bytes returns the log.
func (l *logBuffer) Bytes() []byte {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := append([]byte(nil), l.head...)
	if l.dropped > 0 {
		out = fmt.Appendf(out, "\n[truncated: %d bytes dropped]\n", l.dropped)
	}
	return l.tail.appendTo(out)
}

// stderrTail returns the end of what the guest wrote to stderr, as one line.
func (l *logBuffer) stderrTail() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := strings.ToValidUTF8(string(l.stderr.appendTo(nil)), "\uFFFD")
	var lines []string
	for _, ln := range strings.Split(s, "\n") {
		if ln = strings.TrimSpace(ln); ln != "" {
			lines = append(lines, ln)
		}
	}
	return strings.Join(lines, " | ")
}

// ring keeps the last size bytes written to it.
type ring struct {
	size int
	buf  []byte // len grows to size, then wraps
	next int    // where the next byte goes once full
}

// write adds p and returns how many older bytes fell out.
func (r *ring) write(p []byte) int {
	c := r.size
	if c == 0 {
		return len(p)
	}
	if r.buf == nil {
		r.buf = make([]byte, 0, c) // only logs that overflow their head pay for it
	}
	dropped := 0
	if len(p) > c {
		dropped += len(p) - c
		p = p[len(p)-c:]
	}
	for len(p) > 0 {
		if len(r.buf) < c {
			n := min(c-len(r.buf), len(p))
			r.buf = append(r.buf, p[:n]...)
			p = p[n:]
			continue
		}
		n := copy(r.buf[r.next:], p)
		dropped += n
		r.next = (r.next + n) % c
		p = p[n:]
	}
	return dropped
}

func (r *ring) appendTo(out []byte) []byte {
	if len(r.buf) < r.size {
		return append(out, r.buf...)
	}
	out = append(out, r.buf[r.next:]...)
	return append(out, r.buf[:r.next]...)
}
