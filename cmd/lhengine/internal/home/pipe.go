package home

import (
	"context"
	"net"
	"sync"
)

// pipeListener is a net.Listener inside the process: Dial returns one end
// of an in-memory connection whose other end Accept returns. A command
// that opened the home itself serves the API on one and is its own
// client, so it goes through the same handlers as any other client.
type pipeListener struct {
	conns chan net.Conn
	once  sync.Once
	done  chan struct{}
}

// newPipeListener returns a listener for Dial.
func newPipeListener() *pipeListener {
	return &pipeListener{conns: make(chan net.Conn), done: make(chan struct{})}
}

// Accept waits for a Dial.
func (l *pipeListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

// Close stops Accept and Dial.
func (l *pipeListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

// Addr is a placeholder address.
func (l *pipeListener) Addr() net.Addr { return pipeAddr{} }

// Dial connects to the listener.
func (l *pipeListener) Dial(ctx context.Context) (net.Conn, error) {
	a, b := net.Pipe()
	select {
	case l.conns <- b:
		return a, nil
	case <-l.done:
		return nil, net.ErrClosed
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

type pipeAddr struct{}

func (pipeAddr) Network() string { return "pipe" }
func (pipeAddr) String() string  { return "in-process" }
