package main

import (
	"bufio"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	collector "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/lhengine/lhengine/internal/testgate"
)

// TestWorkerServesMetricsAndSendsTraces runs lhengine worker --metrics in a
// process of its own, with OTEL_EXPORTER_OTLP_ENDPOINT naming a loopback
// OTLP receiver: while two units of four hold their leases, its /metrics
// says two are ready and two fetches were made; once it exits, the
// receiver holds one unit span per unit, each with its run, host call and
// commit.
func TestWorkerServesMetricsAndSendsTraces(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	spans := map[string]int{}
	units := map[string]bool{}
	otlp := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil || r.URL.Path != "/v1/traces" {
			http.Error(w, "no", http.StatusBadRequest)
			return
		}
		req := new(collector.ExportTraceServiceRequest)
		if proto.Unmarshal(body, req) != nil {
			http.Error(w, "bad", http.StatusBadRequest)
			return
		}
		mu.Lock()
		for _, rs := range req.ResourceSpans {
			for _, ss := range rs.ScopeSpans {
				for _, s := range ss.Spans {
					spans[s.Name]++
					if s.Name == "lhengine.unit" {
						units[string(s.TraceId)] = true
					}
				}
			}
		}
		mu.Unlock()
		out, _ := proto.Marshal(&collector.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		_, _ = w.Write(out)
	}))
	defer otlp.Close()

	b := setupProcs(t)
	g := testgate.New(t)
	id := submit(t, b, b.task(t, "watched", g, 4, 2))

	c := b.cmd("worker", "--metrics", "127.0.0.1:0", "--exit-when-idle", "--concurrency", "2")
	c.Env = append(os.Environ(), "OTEL_EXPORTER_OTLP_ENDPOINT="+otlp.URL, "OTEL_TRACES_EXPORTER=")
	stderr := newWatchWriter("/metrics\n")
	c.Stderr = stderr
	require.NoError(t, c.Start())
	t.Cleanup(func() {
		if c.ProcessState == nil {
			_ = c.Process.Kill()
			_ = c.Wait()
		}
	})
	<-stderr.seen
	url := regexp.MustCompile(`metrics: (http://\S+/metrics)`).FindStringSubmatch(stderr.String())
	require.NotNil(t, url, stderr.String())
	<-g.Arrived()
	<-g.Arrived()

	got := scrapeMetrics(t, url[1])
	require.Equal(t, 2.0, got[`lhengine_ready_units{task="`+id+`"}`], "four planned, two leased")
	require.Equal(t, 2.0, got[`lhengine_host_calls_total{name="http.fetch"}`])
	require.Equal(t, 0.0, got["lhengine_units_committed_total"])

	g.Open()
	require.NoError(t, c.Wait(), stderr.String())
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, units, 4, "one trace per unit, sent before the worker exited")
	require.Equal(t, 4, spans["lhengine.run"])
	require.Equal(t, 4, spans["lhengine.host_call"])
	require.Equal(t, 4, spans["lhengine.commit"])
}

// scrapeMetrics reads a worker's /metrics: each sample's value by its name
// and labels as the text format writes them (`name{a="b"}`).
func scrapeMetrics(t *testing.T, url string) map[string]float64 {
	t.Helper()
	resp, err := http.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if i := strings.LastIndexByte(line, ' '); i > 0 && !strings.HasPrefix(line, "#") {
			v, err := strconv.ParseFloat(line[i+1:], 64)
			require.NoError(t, err, line)
			out[line[:i]] = v
		}
	}
	require.NoError(t, sc.Err())
	return out
}
