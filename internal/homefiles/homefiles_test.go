package homefiles_test

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lhengine/lhengine/api"
	"github.com/lhengine/lhengine/internal/homefiles"
)

// TestTokenFiles: named tokens are files of their own, private to the
// user; names are checked, "owner" is the home's, a name in use is
// refused, and the list holds names only.
func TestTokenFiles(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	for _, bad := range []string{"", "Alice", "a/b", "..", "a b", "owner", strings.Repeat("a", 65)} {
		_, err := homefiles.AddToken(home, bad)
		require.Error(t, err, "%q", bad)
	}
	tok, err := homefiles.AddToken(home, "ci-bot_2")
	require.NoError(t, err)
	_, err = homefiles.AddToken(home, "ci-bot_2")
	require.ErrorContains(t, err, "exists")
	fi, err := os.Stat(filepath.Join(home, "run", "tokens", "ci-bot_2"))
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
	di, err := os.Stat(filepath.Join(home, "run", "tokens"))
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o700), di.Mode().Perm())

	names, err := homefiles.TokenNames(home)
	require.NoError(t, err)
	require.Equal(t, []string{"ci-bot_2"}, names)
	all, err := homefiles.Tokens(home)
	require.NoError(t, err)
	require.Equal(t, map[string]string{"ci-bot_2": tok}, all, "no home token yet")
	owner, err := homefiles.Token(home)
	require.NoError(t, err)
	all, err = homefiles.Tokens(home)
	require.NoError(t, err)
	require.Equal(t, map[string]string{"ci-bot_2": tok, "owner": owner}, all)

	require.NoError(t, homefiles.RemoveToken(home, "ci-bot_2"))
	require.ErrorContains(t, homefiles.RemoveToken(home, "ci-bot_2"), "no token named")
	require.Error(t, homefiles.RemoveToken(home, "../token"))
	names, err = homefiles.TokenNames(home)
	require.NoError(t, err)
	require.Empty(t, names)
}

// The home's own token is made once, private, and read back the same.
func TestHomeTokenIsMadeOnce(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	tok, err := homefiles.Token(home)
	require.NoError(t, err)
	require.Len(t, tok, 64)
	again, err := homefiles.Token(home)
	require.NoError(t, err)
	require.Equal(t, tok, again)
	fi, err := os.Stat(api.TokenPath(home))
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
}

// Match names the token whose secret was sent, and nothing for a wrong
// secret, an empty one, or a secret that is only a prefix.
func TestMatch(t *testing.T) {
	t.Parallel()
	tokens := map[string]string{"owner": "s3cret", "alice": "other", "empty": ""}
	require.Equal(t, "owner", homefiles.Match(tokens, "s3cret"))
	require.Equal(t, "alice", homefiles.Match(tokens, "other"))
	require.Equal(t, "", homefiles.Match(tokens, "s3cre"))
	require.Equal(t, "", homefiles.Match(tokens, ""), "an empty secret matches no token, not even an empty one")
	require.Equal(t, "", homefiles.Match(nil, "s3cret"))
}

// The owner record is written whole and read back; OwnerStopped marks
// the record stopped only while it is still the same owner's.
func TestOwnerRecord(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	_, err := homefiles.ReadOwner(home)
	require.ErrorIs(t, err, os.ErrNotExist)

	started := time.Date(2026, 3, 4, 12, 0, 0, 0, time.UTC)
	first := api.Owner{Session: homefiles.NewSession(), PID: 123, Command: "lhengine serve", Started: started, Works: "all", Home: home}
	require.NoError(t, homefiles.WriteOwner(home, first))
	got, err := homefiles.ReadOwner(home)
	require.NoError(t, err)
	require.Equal(t, first, *got)
	fi, err := os.Stat(api.OwnerPath(home))
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), fi.Mode().Perm())

	second := first
	second.Session = homefiles.NewSession()
	require.NotEqual(t, first.Session, second.Session)
	require.NoError(t, homefiles.WriteOwner(home, second))
	homefiles.OwnerStopped(home, first, started.Add(time.Minute))
	got, err = homefiles.ReadOwner(home)
	require.NoError(t, err)
	require.True(t, got.Stopped.IsZero(), "another owner's record is left alone")
	homefiles.OwnerStopped(home, second, started.Add(time.Minute))
	got, err = homefiles.ReadOwner(home)
	require.NoError(t, err)
	require.Equal(t, started.Add(time.Minute), got.Stopped)

	require.NoError(t, os.WriteFile(api.OwnerPath(home), []byte("{"), 0o600))
	_, err = homefiles.ReadOwner(home)
	require.ErrorContains(t, err, api.OwnerPath(home))
}

// Listen makes the socket owner-only in an owner-only directory, replaces
// a socket left behind, and refuses a path too long for a Unix socket.
func TestListen(t *testing.T) {
	t.Parallel()
	// A short home: t.TempDir's paths can be long for a socket.
	home, err := os.MkdirTemp("", "hf")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(home) })
	require.NoError(t, os.MkdirAll(filepath.Join(home, "run"), 0o755))
	require.NoError(t, os.WriteFile(api.SocketPath(home), nil, 0o644)) // left behind

	l, err := homefiles.Listen(home)
	require.NoError(t, err)
	fi, err := os.Stat(api.SocketPath(home))
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
	require.NotZero(t, fi.Mode()&os.ModeSocket)
	di, err := os.Stat(filepath.Join(home, "run"))
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o700), di.Mode().Perm())
	c, err := net.Dial("unix", api.SocketPath(home))
	require.NoError(t, err)
	require.NoError(t, c.Close())
	require.NoError(t, l.Close())
	_, err = os.Stat(api.SocketPath(home))
	require.ErrorIs(t, err, os.ErrNotExist, "closing the listener removes the socket")

	long := filepath.Join(home, strings.Repeat("d", 120))
	_, err = homefiles.Listen(long)
	require.ErrorContains(t, err, "use a home with a shorter path")
}
