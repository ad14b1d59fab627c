package live

import (
	"fmt"
	"io"
	"os"
	"sync"
)

// IsTerminal says whether w is a terminal.
func IsTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// line is a line of progress kept at the bottom of a terminal, with the
// log written above it: on a terminal Write clears the line, writes, and
// draws it again, so a log line never lands in the middle of it.
// Elsewhere (tty false) nothing is redrawn.
type line struct {
	w     io.Writer
	tty   bool
	mu    sync.Mutex
	drawn string // on a terminal: the line on screen, not ended by a newline
}

func newLine(w io.Writer) line {
	return line{w: w, tty: IsTerminal(w)}
}

func (p *line) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.tty || p.drawn == "" {
		return p.w.Write(b)
	}
	if _, err := io.WriteString(p.w, "\r\033[K"); err != nil {
		return 0, err
	}
	n, err := p.w.Write(b)
	if err != nil {
		return n, err
	}
	if len(b) > 0 && b[len(b)-1] != '\n' {
		_, _ = io.WriteString(p.w, "\n")
	}
	_, err = io.WriteString(p.w, p.drawn)
	return n, err
}

// draw puts s on the terminal in place of the line drawn; the caller
// holds mu.
func (p *line) draw(s string) {
	fmt.Fprintf(p.w, "\r\033[K%s", s)
	p.drawn = s
}

// end leaves the drawn line on screen and goes to the next; the caller
// holds mu.
func (p *line) end() {
	if p.tty && p.drawn != "" {
		fmt.Fprintln(p.w)
		p.drawn = ""
	}
}
