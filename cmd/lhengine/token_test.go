package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lhengine/lhengine/api"
	"github.com/lhengine/lhengine/internal/testgate"
)

// TestTokenCommands: token add prints a new secret once and keeps it in a
// file of its own, private to the user; a name in use, a bad name and
// "owner" are refused; ls lists names, never secrets; rm removes.
func TestTokenCommands(t *testing.T) {
	t.Parallel()
	home := filepath.Join(t.TempDir(), "home")
	lh := func(args ...string) (int, string, string) {
		var out, errb bytes.Buffer
		code := run(context.Background(), append([]string{"--home", home}, args...), &out, &errb)
		return code, out.String(), errb.String()
	}

	code, out, errOut := lh("token", "ls")
	require.Equal(t, 0, code, errOut)
	require.Empty(t, out, "no home, no token")

	code, out, errOut = lh("token", "add", "alice")
	require.Equal(t, 0, code, errOut)
	secret := strings.TrimSpace(out)
	require.Regexp(t, `^[0-9a-f]{64}$`, secret)
	require.Contains(t, errOut, "shown only this once")
	b, err := os.ReadFile(filepath.Join(home, "run", "tokens", "alice"))
	require.NoError(t, err)
	require.Equal(t, secret, strings.TrimSpace(string(b)))
	fi, err := os.Stat(filepath.Join(home, "run", "tokens", "alice"))
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
	fi, err = os.Stat(home)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o700), fi.Mode().Perm(), "the home is private")

	code, _, errOut = lh("token", "add", "alice")
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "a token named alice exists")
	code, _, errOut = lh("token", "add", "Bob!")
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "use 1 to 64 of a-z, 0-9, _ and -")
	code, _, errOut = lh("token", "add", "owner")
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "the home's own token")

	code, out, errOut = lh("token", "add", "bob", "-o", "json")
	require.Equal(t, 0, code, errOut)
	var added map[string]string
	require.NoError(t, json.Unmarshal([]byte(out), &added))
	require.Equal(t, "bob", added["name"])
	require.Len(t, added["token"], 64)

	code, out, errOut = lh("token", "ls")
	require.Equal(t, 0, code, errOut)
	require.Equal(t, "alice\nbob\n", out)
	require.NotContains(t, out, secret)

	code, out, errOut = lh("token", "rm", "alice")
	require.Equal(t, 0, code, errOut)
	require.Equal(t, "token alice removed\n", out)
	code, _, errOut = lh("token", "rm", "alice")
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "no token named alice")
	code, out, errOut = lh("token", "ls", "-o", "json")
	require.Equal(t, 0, code, errOut)
	require.JSONEq(t, `["bob"]`, out)
}

// TestNamedTokenUnderServe: a token added while serve --listen runs works
// at once over TCP, and what it pauses is recorded as paused by its name,
// whatever the request claims; the home's token is "owner" in the list;
// a token removed is refused at the next request.
func TestNamedTokenUnderServe(t *testing.T) {
	t.Parallel()
	b := setupProcs(t)
	g := testgate.New(t)
	srv := b.start(t, "serve", "--listen", "127.0.0.1:0", "--concurrency", "2")
	addr := regexp.MustCompile(`^  dashboard: http://(\S+)/$`).FindStringSubmatch(
		srv.until(t, regexp.MustCompile(`^  dashboard: `)))[1]

	out := lhOK(t, b, "token", "add", "alice")
	alice := api.NewClient("http://"+addr, nil, strings.TrimSpace(out))
	out = lhOK(t, b, "token", "ls")
	require.Equal(t, "owner\nalice\n", out)

	id := submit(t, b, b.task(t, "gated", g, 4, 2))
	for range 2 {
		within(t, g.Arrived(), "unit reaching the gate")
	}
	ctx := context.Background()
	p, err := alice.Pause(ctx, id, api.PauseRequest{Reason: "review", By: "mallory", Grace: "0s"})
	require.NoError(t, err)
	require.Equal(t, api.Paused, p.Status)
	require.Equal(t, "alice", p.Pause.By)
	require.Equal(t, "paused by alice: review", b.status(t, id).Task.Reason)

	lhOK(t, b, "token", "rm", "alice")
	_, err = alice.Task(ctx, id)
	var ae *api.Error
	require.ErrorAs(t, err, &ae)
	require.Equal(t, http.StatusUnauthorized, ae.HTTPStatus)

	srv.stop(t)
}
