package server_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lhengine/lhengine/api"
	"github.com/lhengine/lhengine/engine"
	"github.com/lhengine/lhengine/internal/homefiles"
	"github.com/lhengine/lhengine/internal/testwasm"
	"github.com/lhengine/lhengine/server"
)

func sumOf(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// uploadBundle uploads files (by path) through c and returns the bundle
// naming them, with task as its task file.
func uploadBundle(t *testing.T, c *api.Client, task string, files map[string][]byte) *api.Bundle {
	t.Helper()
	b := &api.Bundle{Task: task, Files: map[string]api.BundleFile{}}
	for p, content := range files {
		require.NoError(t, c.Upload(context.Background(), sumOf(content), content))
		b.Files[p] = api.BundleFile{SHA256: sumOf(content), Size: int64(len(content))}
	}
	return b
}

// uploadCounter serves h and counts the uploads it receives.
type uploadCounter struct {
	mu    sync.Mutex
	puts  int
	bytes int64
}

func (u *uploadCounter) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == "PUT" && strings.HasPrefix(r.URL.Path, "/v1/uploads/") {
			u.mu.Lock()
			u.puts++
			u.bytes += r.ContentLength
			u.mu.Unlock()
		}
		h.ServeHTTP(w, r)
	})
}

func (u *uploadCounter) read() (int, int64) {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.puts, u.bytes
}

// remoteBundle is an engine on a temp home served over TCP behind its
// token by an httptest server that counts uploads, and a client folder
// with the pipeline guest: the server reads nothing of the folder itself.
type remoteBundle struct {
	ctx     context.Context
	e       *engine.Engine
	c       *api.Client
	count   *uploadCounter
	client  string // the client's folder
	home    string
	wasm    []byte
	wasmSum string
}

func setupRemote(t *testing.T) *remoteBundle {
	t.Helper()
	r := &remoteBundle{ctx: context.Background(), count: &uploadCounter{}, client: t.TempDir(), home: filepath.Join(t.TempDir(), "home")}
	var err error
	r.e, err = engine.Open(r.ctx, engine.Config{Home: r.home})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, r.e.Close(r.ctx)) })
	token, err := homefiles.Token(r.home)
	require.NoError(t, err)
	srv := server.New(r.e, server.Options{Owner: api.Owner{PID: os.Getpid(), Works: "all"}})
	hs := httptest.NewServer(r.count.wrap(server.RequireToken(srv.Handler(), token)))
	t.Cleanup(hs.Close)
	r.c = api.NewClient(hs.URL, nil, token)
	t.Cleanup(r.c.Close)
	testwasm.Copy(t, testwasm.CGuest(t, "pipeline"), filepath.Join(r.client, "step.wasm"))
	r.wasm, err = os.ReadFile(filepath.Join(r.client, "step.wasm"))
	require.NoError(t, err)
	r.wasmSum = sumOf(r.wasm)
	return r
}

// writeTask writes task.hcl in the client folder: one pipeline step with a
// note of its own, so that two tasks differ in their task file only.
func (r *remoteBundle) writeTask(t *testing.T, note string) string {
	t.Helper()
	path := filepath.Join(r.client, "task.hcl")
	require.NoError(t, os.WriteFile(path, []byte(`task "up" {
  step "a" {
    plugin = "step.wasm"
    input  = { mode = "echo", note = "`+note+`" }
  }
}`), 0o644))
	return path
}

// TestUploadsAreDeduplicated: a second submission of the same plugin
// sends its task file only, and a plugin the store already holds as a
// module is not sent at all.
func TestUploadsAreDeduplicated(t *testing.T) {
	t.Parallel()
	r := setupRemote(t)

	path := r.writeTask(t, "first")
	first, st, err := server.SubmitRemote(r.ctx, r.c, api.SubmitRequest{Path: path}, "")
	require.NoError(t, err)
	require.True(t, first.Created)
	require.Equal(t, 2, st.Files)
	require.Equal(t, 2, st.Uploaded)
	puts, sent := r.count.read()
	require.Equal(t, 2, puts)
	require.Greater(t, sent, int64(len(r.wasm)), "the plugin and the task file")

	r.writeTask(t, "second")
	second, st, err := server.SubmitRemote(r.ctx, r.c, api.SubmitRequest{Path: path}, "")
	require.NoError(t, err)
	require.NotEqual(t, first.ID, second.ID)
	require.Equal(t, 1, st.Uploaded, "the task file only")
	puts2, sent2 := r.count.read()
	require.Equal(t, puts+1, puts2)
	require.Less(t, sent2-sent, int64(len(r.wasm)), "no plugin bytes sent again")

	m, err := r.c.Manifest(r.ctx, second.ID)
	require.NoError(t, err)
	require.Equal(t, r.wasmSum, m.Summary.Plugins["a"].SHA256)
	require.Equal(t, filepath.Join(r.client, "step.wasm"), m.Summary.Plugins["a"].Path, "the manifest names the client's paths")
	require.Contains(t, m.Source, `note = "second"`)

	// A store that holds the plugin as a module (a local submission's)
	// is not sent it either.
	other := setupRemote(t)
	_, _, err = other.e.Submit(other.ctx, other.writeTask(t, "local"), engine.SubmitOptions{})
	require.NoError(t, err)
	missing, err := other.c.Missing(other.ctx, []string{other.wasmSum})
	require.NoError(t, err)
	require.Empty(t, missing)
	other.writeTask(t, "remote")
	_, st, err = server.SubmitRemote(other.ctx, other.c, api.SubmitRequest{Path: filepath.Join(other.client, "task.hcl")}, "")
	require.NoError(t, err)
	require.Equal(t, 1, st.Uploaded, "the task file only")
	_, sent = other.count.read()
	require.Less(t, sent, int64(len(other.wasm)))
}

// TestUploadsRefuseWhatDoesNotMatch: content whose sha256 is not the one
// it is sent under is refused and not kept, and a bundle naming content
// never uploaded is refused, naming the path.
func TestUploadsRefuseWhatDoesNotMatch(t *testing.T) {
	t.Parallel()
	r := setupRemote(t)
	var ae *api.Error

	want := sumOf([]byte("one"))
	err := r.c.Upload(r.ctx, want, []byte("two"))
	require.ErrorAs(t, err, &ae)
	require.Equal(t, api.CodeInvalid, ae.Code)
	require.Contains(t, ae.Message, "not "+want)
	missing, err := r.c.Missing(r.ctx, []string{want, sumOf([]byte("two"))})
	require.NoError(t, err)
	require.Equal(t, []string{want, sumOf([]byte("two"))}, missing, "nothing was kept")
	entries, err := os.ReadDir(filepath.Join(r.home, "uploads"))
	require.NoError(t, err)
	require.Empty(t, entries, "no temporary file left behind")

	require.ErrorAs(t, r.c.Upload(r.ctx, "NOT-A-SUM", []byte("x")), &ae)
	require.Equal(t, api.CodeInvalid, ae.Code)

	task := []byte(`task "x" {
  step "a" {
    plugin = "step.wasm"
  }
}`)
	b := uploadBundle(t, r.c, "/client/task.hcl", map[string][]byte{"/client/task.hcl": task})
	b.Files["/client/step.wasm"] = api.BundleFile{SHA256: r.wasmSum, Size: int64(len(r.wasm))}
	_, err = r.c.Submit(r.ctx, api.SubmitRequest{Bundle: b})
	require.ErrorAs(t, err, &ae)
	require.Equal(t, api.CodeInvalid, ae.Code)
	require.Contains(t, ae.Message, "/client/step.wasm (sha256 "+r.wasmSum+") was never uploaded")

	require.NoError(t, r.c.Upload(r.ctx, r.wasmSum, r.wasm))
	b.Files["/client/step.wasm"] = api.BundleFile{SHA256: r.wasmSum, Size: 12}
	_, err = r.c.Submit(r.ctx, api.SubmitRequest{Bundle: b})
	require.ErrorAs(t, err, &ae)
	require.Contains(t, ae.Message, "is 12 bytes in the bundle")

	b.Files["/client/step.wasm"] = api.BundleFile{SHA256: r.wasmSum, Size: int64(len(r.wasm))}
	_, err = r.c.Submit(r.ctx, api.SubmitRequest{Bundle: b, Path: "/client/task.hcl"})
	require.ErrorAs(t, err, &ae)
	require.Contains(t, ae.Message, "not both")
	res, err := r.c.Submit(r.ctx, api.SubmitRequest{Bundle: b})
	require.NoError(t, err)
	require.True(t, res.Created)
}

// TestBundleReadsNothingOfTheServersDisk: a bundle whose task file is a
// symlink on the server to a secret, or whose plugin, prompt or policy
// names a file of the server's, gets no byte of the server's files back:
// the owner opens no path a client names.
func TestBundleReadsNothingOfTheServersDisk(t *testing.T) {
	t.Parallel()
	r := setupRemote(t)
	var ae *api.Error
	dir := t.TempDir() // on the server's disk
	secret := filepath.Join(dir, "secret.txt")
	require.NoError(t, os.WriteFile(secret, []byte("root:SECRET-LINE\n"), 0o600))
	link := filepath.Join(dir, "task.hcl")
	require.NoError(t, os.Symlink(secret, link))
	testwasm.Copy(t, testwasm.CGuest(t, "pipeline"), filepath.Join(dir, "step.wasm"))
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "policies"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "policies", "p.hcl"), []byte("SECRET-LINE\n"), 0o644))
	noSecret := func(err error) {
		t.Helper()
		require.ErrorAs(t, err, &ae)
		require.NotContains(t, ae.Message+ae.Diagnostics, "SECRET")
		require.NotContains(t, ae.Message+ae.Diagnostics, "root:")
	}

	// The symlink's path, with uploaded content: the upload is read.
	_, err := r.c.Submit(r.ctx, api.SubmitRequest{Bundle: uploadBundle(t, r.c, link, map[string][]byte{link: []byte("task \"x\" {\n  nope = 1\n}\n")})})
	noSecret(err)
	require.Equal(t, api.CodeInvalidTask, ae.Code)
	require.Contains(t, ae.Diagnostics, "nope = 1", "the diagnostics quote the upload")

	// A task file naming the server's files: none is read.
	for name, task := range map[string]string{
		"plugin":        `step "a" { plugin = "step.wasm" }`,
		"absolute":      `step "a" { plugin = "` + secret + `" }`,
		"prompt":        `prompt "p" { file = "secret.txt" }` + "\n" + `step "a" { plugin = "/client/step.wasm" }`,
		"passwd prompt": `prompt "p" { file = "/etc/passwd" }` + "\n" + `step "a" { plugin = "/client/step.wasm" }`,
	} {
		path := filepath.Join(dir, "t.hcl")
		_, err := r.c.Submit(r.ctx, api.SubmitRequest{Bundle: uploadBundle(t, r.c, path, map[string][]byte{
			path: []byte("task \"x\" {\n" + task + "\n}\n"), "/client/step.wasm": r.wasm,
		})})
		noSecret(err)
		require.Equal(t, api.CodeInvalidTask, ae.Code, name)
		require.Contains(t, ae.Diagnostics, "not among the files the client uploaded", name)
	}

	// A policy on the server's search path is not seen: only the folders
	// the bundle lists exist.
	path := filepath.Join(dir, "t.hcl")
	_, err = r.c.Submit(r.ctx, api.SubmitRequest{Policies: []string{"p"}, Bundle: uploadBundle(t, r.c, path, map[string][]byte{
		path: []byte("task \"x\" {\n  step \"a\" { plugin = \"/client/step.wasm\" }\n}\n"), "/client/step.wasm": r.wasm,
	})})
	noSecret(err)
	require.Contains(t, ae.Diagnostics, `No policy "p" was found`)
}
