package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lhengine/lhengine/internal/testwasm"
)

// plugtest runs `lhengine plugin test` in-process and returns the exit
// code, stdout and stderr.
func plugtest(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(context.Background(), append([]string{"plugin", "test"}, args...), &out, &errb)
	return code, out.String(), errb.String()
}

// pluginTestJSONOut is the -o json object of plugin test.
type pluginTestJSONOut struct {
	Plugin string `json:"plugin"`
	SHA256 string `json:"sha256"`
	Result struct {
		Status  string          `json:"status"`
		Output  json.RawMessage `json:"output"`
		Kind    string          `json:"kind"`
		Message string          `json:"message"`
		Reason  string          `json:"reason"`
	} `json:"result"`
	Log       string `json:"log"`
	HostCalls []struct {
		Name       string          `json:"name"`
		Request    json.RawMessage `json:"request"`
		Response   json.RawMessage `json:"response"`
		Status     int32           `json:"status"`
		StatusName string          `json:"status_name"`
		Message    string          `json:"message"`
	} `json:"host_calls"`
	HostCallsMade int      `json:"host_calls_made"`
	DurationMS    *float64 `json:"duration_ms"`
	MemoryBytes   uint64   `json:"memory_bytes"`
}

func plugtestJSON(t *testing.T, wantCode int, args ...string) pluginTestJSONOut {
	t.Helper()
	code, out, errOut := plugtest(t, append([]string{"-o", "json"}, args...)...)
	require.Equal(t, wantCode, code, "stdout:\n%s\nstderr:\n%s", out, errOut)
	var got pluginTestJSONOut
	require.NoError(t, json.Unmarshal([]byte(out), &got), out)
	return got
}

// TestPluginTestResults: each kind of result of the C pipeline guest, its
// exit status, and the -o json object.
func TestPluginTestResults(t *testing.T) {
	t.Parallel()
	wasm := testwasm.CGuest(t, "pipeline")

	code, out, errOut := plugtest(t, wasm, "--input", `{"mode":"echo","text":"hi"}`)
	require.Equal(t, exitOK, code, errOut)
	require.Contains(t, out, "result:   succeeded")
	require.Contains(t, out, `"text": "hi"`)
	require.Contains(t, out, "memory:")

	got := plugtestJSON(t, exitOK, wasm, "--input", `{"mode":"echo","n":7}`)
	require.Equal(t, "succeeded", got.Result.Status)
	require.JSONEq(t, `{"mode":"echo","n":7}`, string(got.Result.Output))
	require.Equal(t, wasm, got.Plugin)
	require.Len(t, got.SHA256, 64)
	require.NotNil(t, got.DurationMS)
	require.Positive(t, *got.DurationMS)
	require.Positive(t, got.MemoryBytes)
	require.NotNil(t, got.HostCalls)
	require.Empty(t, got.HostCalls)

	// No --input: the input is null, which the guest echoes.
	got = plugtestJSON(t, exitOK, wasm)
	require.Equal(t, "null", string(got.Result.Output))

	code, out, errOut = plugtest(t, wasm, "--input", `{"mode":"trap"}`)
	require.Equal(t, exitFailed, code)
	require.Contains(t, out, "result:   failed (trap)")
	require.Contains(t, errOut, "the plugin failed (trap)")

	got = plugtestJSON(t, exitFailed, wasm, "--input", `{"mode":"fail_until","ok_at":2}`)
	require.Equal(t, "failed", got.Result.Status)
	require.Equal(t, "plugin_error", got.Result.Kind)
	require.Contains(t, got.Result.Message, "attempt 1 fails on purpose")

	got = plugtestJSON(t, exitOK, wasm, "--input", `{"mode":"repair"}`)
	require.Equal(t, "needs_repair", got.Result.Status)
	require.NotEmpty(t, got.Result.Reason)

	// A whole envelope: attempt 2 passes fail_until.
	req := filepath.Join(t.TempDir(), "req.json")
	require.NoError(t, os.WriteFile(req, []byte(`{"abi":1,"task_id":"t1","task_name":"n","step":"s","item":null,"attempt":2,"input":{"mode":"fail_until","ok_at":2},"policy":{}}`), 0o644))
	got = plugtestJSON(t, exitOK, wasm, "--request", req)
	require.JSONEq(t, `{"mode":"fail_until","ok_at":2}`, string(got.Result.Output))

	// An envelope of another ABI is refused.
	other := filepath.Join(t.TempDir(), "abi2.json")
	require.NoError(t, os.WriteFile(other, []byte(`{"abi":2,"input":null}`), 0o644))
	code, _, errOut = plugtest(t, wasm, "--request", other)
	require.Equal(t, exitFailed, code)
	require.Contains(t, errOut, "abi 2")

	// A module that is not Wasm is a failure of the plugin.
	notWasm := filepath.Join(t.TempDir(), "x.wasm")
	require.NoError(t, os.WriteFile(notWasm, []byte("not wasm"), 0o644))
	got = plugtestJSON(t, exitFailed, notWasm)
	require.Equal(t, "bad_module", got.Result.Kind)

	// Bad command lines.
	for _, args := range [][]string{
		{wasm, "--input", "{bad"},
		{wasm, "--input", "1", "--request", req},
		{wasm, "--policy", "novalue"},
		{wasm, "--request", filepath.Join(t.TempDir(), "missing.json")},
		{wasm, "--request", notWasm},
		{wasm, "--allow-http", "http://127.0.0.1/"},
		{},
	} {
		code, _, errOut := plugtest(t, args...)
		require.Equal(t, exitUsage, code, "%q: %s", args, errOut)
	}
}

// TestPluginTestHostCalls: kv calls are served by the throwaway store and
// listed with their answers; a Go SDK guest's notes are listed too.
func TestPluginTestHostCalls(t *testing.T) {
	t.Parallel()
	got := plugtestJSON(t, exitOK, testwasm.CGuest(t, "caps"), "--input", `{"mode":"kv"}`)
	require.JSONEq(t, `{"found":true,"value":{"page":3},"missing":false}`, string(got.Result.Output))
	require.Len(t, got.HostCalls, 3)
	require.Equal(t, "kv.put", got.HostCalls[0].Name)
	require.JSONEq(t, `{"key":"cursor","value":{"page":3}}`, string(got.HostCalls[0].Request))
	require.Equal(t, "kv.get", got.HostCalls[1].Name)
	require.JSONEq(t, `{"found":true,"value":{"page":3}}`, string(got.HostCalls[1].Response))
	require.JSONEq(t, `{"found":false,"value":null}`, string(got.HostCalls[2].Response))

	handoff := testwasm.GoGuest(t, "handoff")
	got = plugtestJSON(t, exitOK, handoff, "--input", `{"mode":"decide","text":"use the cache"}`)
	var names []string
	for _, c := range got.HostCalls {
		names = append(names, c.Name)
		require.Zero(t, c.Status, "%s: %s", c.Name, c.Message)
	}
	require.Contains(t, names, "progress.note")
	require.Contains(t, string(got.HostCalls[0].Request), "use the cache")
}

// TestPluginTestHTTP: http.fetch is denied without --allow-http and reaches
// the allowed host with it; progress.count is served.
func TestPluginTestHTTP(t *testing.T) {
	t.Parallel()
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.Write([]byte("hello"))
	}))
	t.Cleanup(srv.Close)
	host := strings.TrimPrefix(srv.URL, "http://")
	wasm := testwasm.CGuest(t, "gate")
	in := `{"url":"` + srv.URL + `/page","count":"pages"}`

	got := plugtestJSON(t, exitFailed, wasm, "--input", in)
	require.Equal(t, "plugin_error", got.Result.Kind)
	require.Len(t, got.HostCalls, 1)
	require.Equal(t, "http.fetch", got.HostCalls[0].Name)
	require.Equal(t, "denied", got.HostCalls[0].StatusName)
	require.Contains(t, got.HostCalls[0].Message, "may not fetch over http")
	require.Zero(t, hits.Load())

	got = plugtestJSON(t, exitFailed, wasm, "--input", in, "--allow-http", "127.0.0.2")
	require.Equal(t, "denied", got.HostCalls[0].StatusName)
	require.Contains(t, got.HostCalls[0].Message, "is not allowed")
	require.Zero(t, hits.Load())

	got = plugtestJSON(t, exitOK, wasm, "--input", in, "--allow-http", host)
	require.JSONEq(t, `{"item":0,"status":200}`, string(got.Result.Output))
	require.Len(t, got.HostCalls, 2)
	require.Equal(t, "http.fetch", got.HostCalls[0].Name)
	require.Contains(t, string(got.HostCalls[0].Response), `"status": 200`)
	require.Equal(t, "progress.count", got.HostCalls[1].Name)
	require.JSONEq(t, `{"name":"pages","delta":1}`, string(got.HostCalls[1].Request))
	require.EqualValues(t, 1, hits.Load())
}

// TestPluginTestPolicy: --policy parameters reach the plugin, JSON where
// they parse, strings otherwise, set over those of --request.
func TestPluginTestPolicy(t *testing.T) {
	t.Parallel()
	wasm := testwasm.CGuest(t, "policy")
	got := plugtestJSON(t, exitOK, wasm, "--policy", "single_tool=true", "--policy", "few_shot=two shots", "--policy", "markers=[1,2]")
	require.JSONEq(t, `{"single_tool":true,"few_shot":"two shots","reset_every":-1,"markers":[1,2]}`, string(got.Result.Output))

	req := filepath.Join(t.TempDir(), "req.json")
	require.NoError(t, os.WriteFile(req, []byte(`{"policy":{"context_reset_every":5,"few_shot":"from file"}}`), 0o644))
	got = plugtestJSON(t, exitOK, wasm, "--request", req, "--policy", "few_shot=flag")
	require.JSONEq(t, `{"single_tool":false,"few_shot":"flag","reset_every":5,"markers":null}`, string(got.Result.Output))
}

// TestPluginTestMakesNoHome: plugin test, with calls served by its
// throwaway store, leaves the working folder, $HOME and the data and cache
// folders as they were. Not parallel: it sets the environment and the
// working folder.
func TestPluginTestMakesNoHome(t *testing.T) {
	wasm := testwasm.CGuest(t, "caps")
	root := t.TempDir()
	dirs := map[string]string{}
	for _, d := range []string{"home", "data", "cache", "cwd"} {
		dirs[d] = filepath.Join(root, d)
		require.NoError(t, os.Mkdir(dirs[d], 0o755))
	}
	t.Setenv("HOME", dirs["home"])
	t.Setenv("XDG_DATA_HOME", dirs["data"])
	t.Setenv("XDG_CACHE_HOME", dirs["cache"])
	t.Setenv("LHENGINE_HOME", "")
	t.Setenv("LHENGINE_CACHE", "")
	t.Chdir(dirs["cwd"])

	got := plugtestJSON(t, exitOK, wasm, "--input", `{"mode":"kv"}`)
	require.Len(t, got.HostCalls, 3)
	got = plugtestJSON(t, exitOK, wasm, "--input", `{"mode":"artifact"}`)
	require.Equal(t, "artifact_put", got.HostCalls[0].Name)
	require.Contains(t, string(got.HostCalls[0].Request), `"bytes": 2097152`)
	require.Equal(t, "artifact_read", got.HostCalls[1].Name)

	for name, d := range dirs {
		entries, err := os.ReadDir(d)
		require.NoError(t, err)
		require.Empty(t, entries, "%s folder %s", name, d)
	}
}
