package server

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/lhengine/lhengine/api"
)

// Listen listens on the home's API socket (api.SocketPath), in a directory
// only this user may enter, replacing a socket left by an owner that died:
// the caller must already own the home (have its store open), so no live
// process can be serving on it. The socket file is removed when the
// listener is closed.
func Listen(home string) (net.Listener, error) {
	path := api.SocketPath(home)
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, err
	}
	// MkdirAll keeps the mode of a directory that exists: make sure.
	if err := os.Chmod(filepath.Dir(path), 0o700); err != nil {
		return nil, err
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("remove the stale API socket: %w", err)
	}
	if len(path) >= maxSocketPath {
		return nil, fmt.Errorf("the API socket path %s is %d bytes long; Unix sockets take at most %d: use a home with a shorter path", path, len(path), maxSocketPath-1)
	}
	l, err := net.Listen("unix", path)
	if err != nil {
		return nil, err
	}
	if err := os.Chmod(path, 0o600); err != nil {
		l.Close()
		return nil, err
	}
	return l, nil
}

// maxSocketPath is the size of sun_path (Linux 108, BSDs and macOS 104).
const maxSocketPath = 104

// WriteOwner records o as the home's owner (api.OwnerPath), atomically.
func WriteOwner(home string, o api.Owner) error {
	path := api.OwnerPath(home)
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	b, err := json.MarshalIndent(o, "", "  ")
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// OwnerStopped marks the owner record as stopped, if it is still o's.
func OwnerStopped(home string, o api.Owner, at time.Time) {
	if cur, err := ReadOwner(home); err == nil && cur.Session == o.Session {
		o.Stopped = at
		_ = WriteOwner(home, o)
	}
}

// ReadOwner reads the home's owner record.
func ReadOwner(home string) (*api.Owner, error) {
	b, err := os.ReadFile(api.OwnerPath(home))
	if err != nil {
		return nil, err
	}
	var o api.Owner
	if err := json.Unmarshal(b, &o); err != nil {
		return nil, fmt.Errorf("%s: %w", api.OwnerPath(home), err)
	}
	return &o, nil
}

// Token returns the home's bearer token for TCP listeners, creating it
// (32 random bytes, hex, readable by this user only) if there is none.
func Token(home string) (string, error) {
	path := api.TokenPath(home)
	if b, err := os.ReadFile(path); err == nil {
		if tok := strings.TrimSpace(string(b)); tok != "" {
			return tok, nil
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return "", err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return "", err
	}
	var raw [32]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return "", err
	}
	tok := hex.EncodeToString(raw[:])
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, os.ErrExist) {
		return Token(home) // created meanwhile: use that one
	}
	if err != nil {
		return "", err
	}
	_, err = f.WriteString(tok + "\n")
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return tok, err
}

// NewSession returns a new owner session id.
func NewSession() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// PipeListener is a net.Listener inside the process: Dial returns one end
// of an in-memory connection whose other end Accept returns. A command
// that opened the home itself serves the API on one and is its own
// client, so it goes through the same handlers as any other client.
type PipeListener struct {
	conns chan net.Conn
	once  sync.Once
	done  chan struct{}
}

// NewPipeListener returns a listener for Dial.
func NewPipeListener() *PipeListener {
	return &PipeListener{conns: make(chan net.Conn), done: make(chan struct{})}
}

// Accept waits for a Dial.
func (l *PipeListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

// Close stops Accept and Dial.
func (l *PipeListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

// Addr is a placeholder address.
func (l *PipeListener) Addr() net.Addr { return pipeAddr{} }

// Dial connects to the listener.
func (l *PipeListener) Dial(ctx context.Context) (net.Conn, error) {
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
