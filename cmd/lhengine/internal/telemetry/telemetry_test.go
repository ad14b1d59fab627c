package telemetry

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"
	collector "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"
)

// TestSpansReachTheOTLPEndpoint: with OTEL_EXPORTER_OTLP_ENDPOINT naming a
// loopback receiver, the spans a tracer makes arrive there over OTLP/HTTP
// as service lhengine; without it, nothing is set up.
func TestSpansReachTheOTLPEndpoint(t *testing.T) {
	got := make(chan *collector.ExportTraceServiceRequest, 10)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/traces" {
			http.NotFound(w, r)
			return
		}
		body, err := io.ReadAll(r.Body)
		require.NoError(t, err)
		req := new(collector.ExportTraceServiceRequest)
		require.NoError(t, proto.Unmarshal(body, req))
		got <- req
		w.Header().Set("Content-Type", "application/x-protobuf")
		out, _ := proto.Marshal(&collector.ExportTraceServiceResponse{})
		_, _ = w.Write(out)
	}))
	defer srv.Close()

	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "")
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "")
	tp, shutdown, err := TracerProvider(context.Background(), "v0")
	require.NoError(t, err)
	require.Nil(t, tp, "no endpoint, no traces")
	require.NoError(t, shutdown(context.Background()))

	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", srv.URL)
	t.Setenv("OTEL_TRACES_EXPORTER", "none")
	require.False(t, Enabled())
	t.Setenv("OTEL_TRACES_EXPORTER", "")
	require.True(t, Enabled())
	tp, shutdown, err = TracerProvider(context.Background(), "v1.2.3")
	require.NoError(t, err)
	_, span := tp.Tracer("test").Start(context.Background(), "lhengine.unit")
	span.End()
	require.NoError(t, shutdown(context.Background()), "shutdown sends what is left")
	req := <-got
	require.Len(t, req.ResourceSpans, 1)
	rs := req.ResourceSpans[0]
	attrs := map[string]string{}
	for _, kv := range rs.Resource.Attributes {
		attrs[kv.Key] = kv.Value.GetStringValue()
	}
	require.Equal(t, "lhengine", attrs["service.name"])
	require.Equal(t, "v1.2.3", attrs["service.version"])
	require.Equal(t, "lhengine.unit", rs.ScopeSpans[0].Spans[0].Name)
}
