package main

import (
	"encoding/json"
	"net/http"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lhengine/lhengine/fault"
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
	sink := mailsink.New()
	var cut atomic.Int32
	base := serveLoopback(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
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
	}))
	task := strings.Replace(notifyTask("resend", base), `default = ["ana@example.org", "bo@example.org", "cy@example.org"]`, `default = ["ana@example.org"]`, 1)
	task = strings.Replace(task, "    effect \"http\" {", "    retry {\n      attempts = 2\n      backoff  = \"0s\"\n    }\n    effect \"http\" {", 1)
	b := setupNotify(t, task)

	code, out, errOut := b.lh(t, "run", filepath.Join(b.dir, "task.hcl"))
	require.Equal(t, 0, code, out+errOut)
	id := taskID(out)

	out = lhOK(t, b, "-o", "json", "outputs", id, "send", "--attempts")
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
