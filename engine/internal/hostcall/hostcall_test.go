package hostcall

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/lhengine/lhengine/engine/internal/guest"
	"github.com/lhengine/lhengine/engine/internal/taskfile"
	"github.com/lhengine/lhengine/ledger"
	"github.com/lhengine/lhengine/store"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// setup returns an Attempt holding a real lease on an in-memory store, for
// a step with the given grants.
func setup(t *testing.T, step *taskfile.Step) *Attempt {
	t.Helper()
	return setupIn(t, step, store.Options{InMemory: true})
}

// setupIn is setup on a store opened with opts (in t.TempDir() unless
// opts.InMemory).
func setupIn(t *testing.T, step *taskfile.Step, opts store.Options) *Attempt {
	t.Helper()
	dir := ""
	if !opts.InMemory {
		dir = t.TempDir()
	}
	s, err := store.Open(dir, opts)
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	ctx := context.Background()
	_, _, err = s.Submit(ctx, ledger.NewTask{Name: "t", Steps: []ledger.StepState{{Name: step.Name}}})
	require.NoError(t, err)
	c, err := s.Claim(ctx, ledger.ClaimRequest{Owner: s.Owner("w"), Max: 1})
	require.NoError(t, err)
	require.Len(t, c.Leases, 1)
	if step.Workspace == "" {
		step.Workspace = "rw"
	}
	return &Attempt{Store: s, Lease: c.Leases[0], Step: step, Workspace: t.TempDir(), Client: &http.Client{Timeout: 5 * time.Second}}
}

func status(t *testing.T, err error) int32 {
	t.Helper()
	var he *guest.HostError
	require.True(t, errors.As(err, &he), "want a *guest.HostError, got %v", err)
	return he.Status
}

func TestFetchAllowsOnlyGrantedHostsOnEveryHop(t *testing.T) {
	t.Parallel()
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("secret")) }))
	defer other.Close()
	var big = strings.Repeat("x", 2048)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/ok":
			w.Write([]byte("hello"))
		case "/hop":
			http.Redirect(w, r, "/ok", http.StatusFound)
		case "/escape":
			http.Redirect(w, r, other.URL+"/", http.StatusFound)
		case "/big":
			w.Write([]byte(big))
		}
	}))
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")
	a := setup(t, &taskfile.Step{Name: "fetch", HTTP: &taskfile.HTTPGrant{Allow: []string{host}, MaxBytes: 1024, Timeout: 5 * time.Second}})
	ctx := context.Background()
	fetch := func(url string) (map[string]any, error) {
		b, err := a.Call(ctx, "http.fetch", []byte(`{"url":"`+url+`"}`))
		if err != nil {
			return nil, err
		}
		var out map[string]any
		require.NoError(t, json.Unmarshal(b, &out))
		return out, nil
	}
	out, err := fetch(srv.URL + "/ok")
	require.NoError(t, err)
	require.Equal(t, "hello", out["body"])
	out, err = fetch(srv.URL + "/hop")
	require.NoError(t, err)
	require.Equal(t, srv.URL+"/ok", out["url"])
	_, err = fetch(srv.URL + "/escape")
	require.Equal(t, guest.StatusDenied, status(t, err), "a redirect to another host is re-checked")
	_, err = fetch(other.URL + "/")
	require.Equal(t, guest.StatusDenied, status(t, err))
	_, err = fetch(srv.URL + "/big")
	require.Equal(t, guest.StatusTooLarge, status(t, err))
	_, err = a.Call(ctx, "http.fetch", []byte(`{"method":"POST","url":"`+srv.URL+`/ok"}`))
	require.Equal(t, guest.StatusDenied, status(t, err), "writes go through effects")

	none := setup(t, &taskfile.Step{Name: "nofetch"})
	_, err = none.Call(ctx, "http.fetch", []byte(`{"url":"`+srv.URL+`/ok"}`))
	require.Equal(t, guest.StatusDenied, status(t, err), "deny by default")
}

func TestHTTPEffectIsJournaledAndReplayed(t *testing.T) {
	t.Parallel()
	var hits atomic.Int32
	var keys []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		keys = append(keys, r.Header.Get("Idempotency-Key"))
		w.Write([]byte(`{"ok":true}`))
	}))
	defer srv.Close()
	a := setup(t, &taskfile.Step{Name: "send", Effects: map[string]*taskfile.EffectGrant{"http": {Kind: "http", Hosts: []string{"127.0.0.1:*"}, Mode: "resend"}}})
	ctx := context.Background()
	req := `{"key":"mail-1","kind":"http","request":{"method":"POST","url":"` + srv.URL + `/mail","body":"hi"}}`
	first, err := a.Call(ctx, "effect.do", []byte(req))
	require.NoError(t, err)
	second, err := a.Call(ctx, "effect.do", []byte(req))
	require.NoError(t, err)
	require.Equal(t, int32(1), hits.Load(), "a recorded outcome is returned, not performed again")
	require.Contains(t, string(first), `"replayed":false`)
	require.Contains(t, string(second), `"replayed":true`)
	require.Equal(t, ledger.IdempotencyKey(a.Lease.Task, "send", 0, "mail-1"), keys[0])

	_, err = a.Call(ctx, "effect.do", []byte(`{"key":"mail-1","kind":"http","request":{"method":"POST","url":"`+srv.URL+`/other"}}`))
	require.Equal(t, guest.StatusInvalid, status(t, err), "one key names one effect")
	_, err = a.Call(ctx, "effect.do", []byte(`{"key":"x","kind":"http","request":{"url":"http://example.org/"}}`))
	require.Equal(t, guest.StatusDenied, status(t, err))
	_, err = a.Call(ctx, "effect.do", []byte(`{"key":"x","kind":"file","request":{"path":"a","content":"b"}}`))
	require.Equal(t, guest.StatusDenied, status(t, err), "file effects were not granted")
}

func TestFileEffectStaysInsideTheWorkspace(t *testing.T) {
	t.Parallel()
	a := setup(t, &taskfile.Step{Name: "write", Effects: map[string]*taskfile.EffectGrant{"file": {Kind: "file", Mode: "resend"}}})
	ctx := context.Background()
	outside := t.TempDir()
	require.NoError(t, os.Symlink(outside, filepath.Join(a.Workspace, "out")))
	do := func(key, path string) error {
		_, err := a.Call(ctx, "effect.do", []byte(`{"key":"`+key+`","kind":"file","request":{"path":"`+path+`","content":"data"}}`))
		return err
	}
	require.NoError(t, do("ok", "reports/r.txt"))
	b, err := os.ReadFile(filepath.Join(a.Workspace, "reports/r.txt"))
	require.NoError(t, err)
	require.Equal(t, "data", string(b))
	for _, p := range []string{"../escape.txt", "/etc/passwd", "out/x.txt", "reports/../../x"} {
		require.Equal(t, guest.StatusDenied, status(t, do("k"+p, p)), p)
	}
	entries, err := os.ReadDir(outside)
	require.NoError(t, err)
	require.Empty(t, entries, "nothing was written through the symlink")
	_, err = a.Call(ctx, "effect.do", []byte(`{"key":"ap","kind":"file","request":{"path":"a.txt","content":"x","append":true}}`))
	require.Equal(t, guest.StatusInvalid, status(t, err))
}

func TestProgressAndKV(t *testing.T) {
	t.Parallel()
	a := setup(t, &taskfile.Step{Name: "p"})
	ctx := context.Background()
	for range 3 {
		_, err := a.Call(ctx, "progress.count", []byte(`{"name":"pages","delta":2}`))
		require.NoError(t, err)
	}
	_, err := a.Call(ctx, "progress.note", []byte(`{"kind":"blocker","text":"login wall"}`))
	require.NoError(t, err)
	_, err = a.Call(ctx, "progress.note", []byte(`{"kind":"gossip","text":"x"}`))
	require.Equal(t, guest.StatusInvalid, status(t, err))
	counts, notes := a.Progress()
	require.Equal(t, map[string]int64{"pages": 6}, counts)
	require.Len(t, notes, 1)

	out, err := a.Call(ctx, "kv.get", []byte(`{"key":"cursor"}`))
	require.NoError(t, err)
	require.JSONEq(t, `{"found":false,"value":null}`, string(out))
	_, err = a.Call(ctx, "kv.put", []byte(`{"key":"cursor","value":{"page":42}}`))
	require.NoError(t, err)
	out, err = a.Call(ctx, "kv.get", []byte(`{"key":"cursor"}`))
	require.NoError(t, err)
	require.JSONEq(t, `{"found":true,"value":{"page":42}}`, string(out))
	_, err = a.Call(ctx, "nope", []byte(`{}`))
	require.Equal(t, guest.StatusUnavailable, status(t, err))
}

func TestArtifactsRoundTrip(t *testing.T) {
	t.Parallel()
	a := setup(t, &taskfile.Step{Name: "art"})
	ctx := context.Background()
	out, err := a.PutArtifact(ctx, []byte(`{"name":"r.md","media_type":"text/markdown"}`), []byte("# report"))
	require.NoError(t, err)
	var ref struct{ Ref string }
	require.NoError(t, json.Unmarshal(out, &ref))
	buf := make([]byte, 100)
	n, err := a.ReadArtifact(ctx, ref.Ref, 2, buf)
	require.NoError(t, err)
	require.Equal(t, "report", string(buf[:n]))
	_, err = a.ReadArtifact(ctx, "sha256:"+strings.Repeat("0", 64), 0, buf)
	require.Equal(t, guest.StatusNotFound, status(t, err))
	_, err = a.PutArtifact(ctx, []byte(`not json`), nil)
	require.Equal(t, guest.StatusInvalid, status(t, err))
}
