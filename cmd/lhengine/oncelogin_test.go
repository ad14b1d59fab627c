package main

import (
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestServePrintsALoginLink: serve --listen prints, beside the dashboard's
// address, a one-time login link; opening it logs the browser in with the
// home's token (the session cookie, and a redirect to the task list), and
// opening it again shows the login page saying it was used. The link's
// secret is in no file of the home and in nothing serve logs.
func TestServePrintsALoginLink(t *testing.T) {
	t.Parallel()
	b := setupProcs(t)
	srv := b.start(t, "serve", "--listen", "127.0.0.1:0", "--concurrency", "1")
	addr := regexp.MustCompile(`^  dashboard: http://(\S+)/$`).FindStringSubmatch(
		srv.until(t, regexp.MustCompile(`^  dashboard: `)))[1]
	line := srv.until(t, regexp.MustCompile(`^  login: `))
	m := regexp.MustCompile(`^  login:     (http://(\S+)/login\?once=([0-9a-f]{64})) \(works once, for 15 minutes\)$`).FindStringSubmatch(line)
	require.NotNil(t, m, line)
	link, secret := m[1], m[3]
	require.Equal(t, addr, m[2])

	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Get(link)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	require.Equal(t, "/", resp.Header.Get("Location"))
	token, err := os.ReadFile(filepath.Join(b.home, "run", "token"))
	require.NoError(t, err)
	require.Len(t, resp.Cookies(), 1)
	require.Equal(t, "lhengine_token", resp.Cookies()[0].Name)
	require.Equal(t, strings.TrimSpace(string(token)), resp.Cookies()[0].Value, "the home's token, as the login form sets it")

	resp, err = client.Get(link)
	require.NoError(t, err)
	page, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Empty(t, resp.Cookies())
	require.Contains(t, string(page), "That login link was already used")

	srv.stop(t)
	require.NotContains(t, srv.stderr.String(), secret, "serve logs no link")
	require.NoError(t, filepath.WalkDir(b.home, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(path)
		require.NoError(t, err)
		require.NotContains(t, string(data), secret, "%s holds the link", path)
		return nil
	}))
}
