package main

import (
	"encoding/json"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lhengine/lhengine/fault"
	"github.com/lhengine/lhengine/internal/testwasm"
	"github.com/lhengine/lhengine/ledger"
	"github.com/lhengine/lhengine/plugins/examples/notify/sink/mailsink"
)

// TestEffectTransportFailureHasItsOwnKind: a receiver that closes the
// connection in the middle of its first answer fails that attempt as
// effect_transport, not plugin_error; the kind is retryable, so the next
// attempt sends the effect again and the task succeeds with one applied
// email.
func TestEffectTransportFailureHasItsOwnKind(t *testing.T) {
	t.Parallel()
	plugin := testwasm.BuildGo(t, filepath.Join(testwasm.ModuleRoot(t), "plugins/examples/notify/send"))
	wasm, err := os.ReadFile(plugin)
	require.NoError(t, err)

	sink := mailsink.New()
	var cut atomic.Int32
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if cut.Add(1) == 1 {
			// Half an answer, then the connection closes.
			conn, buf, err := w.(http.Hijacker).Hijack()
			if err != nil {
				return
			}
			_, _ = buf.WriteString("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 200\r\n\r\n{\"queued\":")
			_ = buf.Flush()
			_ = conn.Close()
			return
		}
		sink.ServeHTTP(w, r)
	})}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(ln)
	}()
	t.Cleanup(func() {
		require.NoError(t, srv.Close())
		<-done
	})
	base := "http://" + ln.Addr().String()
	task := strings.Replace(notifyTask("resend", base), `default = ["ana@example.org", "bo@example.org", "cy@example.org"]`, `default = ["ana@example.org"]`, 1)
	task = strings.Replace(task, "    effect \"http\" {", "    retry {\n      attempts = 2\n      backoff  = \"0s\"\n    }\n    effect \"http\" {", 1)
	b := setupCLI(t, task)
	require.NoError(t, os.WriteFile(filepath.Join(b.dir, "send.wasm"), wasm, 0o644))

	code, out, errOut := b.lh(t, "run", filepath.Join(b.dir, "task.hcl"))
	require.Equal(t, 0, code, out+errOut)
	id := strings.TrimSpace(strings.TrimPrefix(strings.SplitN(out, "\n", 2)[0], "task "))

	code, out, errOut = b.lh(t, "-o", "json", "outputs", id, "send", "--attempts")
	require.Equal(t, 0, code, errOut)
	var as []*ledger.Attempt
	require.NoError(t, json.Unmarshal([]byte(out), &as))
	require.Len(t, as, 2, out)
	require.NotNil(t, as[0].Failure, out)
	require.Equal(t, fault.EffectTransport, as[0].Failure.Kind, as[0].Failure.Message)
	require.Contains(t, as[0].Failure.Message, "reading the response")
	require.True(t, fault.EffectTransport.Retryable())
	require.Nil(t, as[1].Failure)
	require.Len(t, sink.Stats().Applied, 1, "the second attempt sent it again and it was applied once")
}
