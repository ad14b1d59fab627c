package home

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/stretchr/testify/require"

	"github.com/lhengine/lhengine/api"
	"github.com/lhengine/lhengine/engine"
	"github.com/lhengine/lhengine/internal/homefiles"
)

// TestFind: the nearest .lhengine in the folder or a parent wins, then
// $LHENGINE_HOME, then the per-user default.
func TestFind(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	deep := filepath.Join(root, "a", "b", "c")
	require.NoError(t, os.MkdirAll(deep, 0o755))
	data := filepath.Join(root, "data")

	home, why := Find(deep, "", data)
	require.Equal(t, filepath.Join(data, "lhengine"), home)
	require.Contains(t, why, "per-user default")
	home, why = Find(deep, "/elsewhere", data)
	require.Equal(t, "/elsewhere", home)
	require.Contains(t, why, "$LHENGINE_HOME")

	require.NoError(t, os.Mkdir(filepath.Join(root, "a", ".lhengine"), 0o700))
	home, why = Find(deep, "/elsewhere", data)
	require.Equal(t, filepath.Join(root, "a", ".lhengine"), home)
	require.Equal(t, "the nearest .lhengine above the current folder", why)
	require.NoError(t, os.Mkdir(filepath.Join(deep, ".lhengine"), 0o700))
	home, why = Find(deep, "", data)
	require.Equal(t, filepath.Join(deep, ".lhengine"), home)
	require.Equal(t, "the .lhengine in the current folder", why)
}

// TestPrivate: a home that does not exist is made owner-only when asked
// for and left alone otherwise; one open to others is closed.
func TestPrivate(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "parent", "home")
	require.NoError(t, Private(dir, false, hclog.NewNullLogger()))
	_, err := os.Stat(dir)
	require.ErrorIs(t, err, os.ErrNotExist, "not created unless asked")
	require.NoError(t, Private(dir, true, hclog.NewNullLogger()))
	fi, err := os.Stat(dir)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o700), fi.Mode().Perm())

	require.NoError(t, os.Chmod(dir, 0o755))
	require.NoError(t, Private(dir, false, hclog.NewNullLogger()))
	fi, err = os.Stat(dir)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o700), fi.Mode().Perm())
}

// TestPipeListener: a Dial meets an Accept; after Close both fail.
func TestPipeListener(t *testing.T) {
	t.Parallel()
	l := newPipeListener()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := l.Accept()
		if err == nil {
			accepted <- c
		}
		close(accepted)
	}()
	c, err := l.Dial(context.Background())
	require.NoError(t, err)
	s := <-accepted
	require.NotNil(t, s)
	go func() { _, _ = c.Write([]byte("hi")) }()
	buf := make([]byte, 2)
	_, err = s.Read(buf)
	require.NoError(t, err)
	require.Equal(t, "hi", string(buf))
	require.NoError(t, c.Close())
	require.NoError(t, s.Close())

	require.NoError(t, l.Close())
	_, err = l.Accept()
	require.ErrorIs(t, err, net.ErrClosed)
	_, err = l.Dial(context.Background())
	require.ErrorIs(t, err, net.ErrClosed)
	require.Equal(t, "in-process", l.Addr().String())
}

// TestElection: the first command in a home opens it and owns it, serving
// the socket and recording itself; the next is the owner's client; once
// the owner lets go, its record says it stopped and the next command owns
// the home in its turn.
func TestElection(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	// A short path: a Unix socket's is limited.
	root, err := os.MkdirTemp("", "el")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(root) })
	dir := filepath.Join(root, "home")
	c := Config{Dir: dir, Engine: engine.Config{NoCache: true}}

	_, err = Connect(ctx, c, Mode{})
	require.Error(t, err, "no store and not asked to create one")

	first, err := Connect(ctx, c, Mode{Create: true, Works: "all", Own: true})
	require.NoError(t, err)
	require.True(t, first.Local())
	require.Nil(t, first.Owner)
	rec, err := homefiles.ReadOwner(dir)
	require.NoError(t, err)
	require.Equal(t, first.Self.Session, rec.Session)
	require.Equal(t, "all", rec.Works)
	require.Equal(t, os.Getpid(), rec.PID)

	var seen string
	require.NoError(t, With(ctx, c, Mode{}, func(s *Session) error {
		require.False(t, s.Local())
		seen = s.Owner.Session
		_, err := s.Client.Owner(ctx)
		return err
	}))
	require.Equal(t, first.Self.Session, seen, "a client of the owner")
	o, err := first.Client.Owner(ctx)
	require.NoError(t, err)
	require.Equal(t, first.Self.Session, o.Session, "the owner is its own client")

	require.NoError(t, first.Close())
	rec, err = homefiles.ReadOwner(dir)
	require.NoError(t, err)
	require.Equal(t, "stopped", Fate(&first.Self, rec))
	fate, err := Gone(ctx, dir, &first.Self)
	require.NoError(t, err)
	require.Equal(t, "stopped", fate)
	_, err = os.Stat(api.SocketPath(dir))
	require.ErrorIs(t, err, os.ErrNotExist, "the socket goes with its owner")

	next, err := Connect(ctx, c, Mode{})
	require.NoError(t, err)
	require.True(t, next.Local(), "a free home is opened by the command")
	require.NotEqual(t, first.Self.Session, next.Self.Session)
	require.NoError(t, next.Close())
}

// TestFateOfAProcessGone: an owner whose process is not running died,
// whatever its record says; a running one has no fate yet.
func TestFateOfAProcessGone(t *testing.T) {
	t.Parallel()
	me := &api.Owner{Session: "a", PID: os.Getpid(), Started: time.Now()}
	require.Equal(t, "", Fate(me, me))
	require.Equal(t, "", Fate(me, nil))
	gone := &api.Owner{Session: "b", PID: 1 << 30}
	require.Equal(t, "died", Fate(gone, nil))
	require.False(t, alive(1<<30))
}

// A --server session needs the server to answer: a closed port is an
// error naming it, and --token-file must be readable.
func TestDialServerErrors(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	url := "http://" + l.Addr().String()
	require.NoError(t, l.Close())
	_, err = Connect(ctx, Config{Server: url}, Mode{})
	require.ErrorContains(t, err, "server "+url)
	_, err = Connect(ctx, Config{Server: url, TokenFile: filepath.Join(t.TempDir(), "none")}, Mode{})
	require.ErrorContains(t, err, "--token-file")
}
