package guest

import (
	"context"
	"encoding/json"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lhengine/lhengine/internal/testwasm"
)

// benchRun runs p b.N times with a fresh instance each time.
func benchRun(b *testing.B, p *Plugin, req Request) {
	b.Helper()
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if _, err := p.Run(ctx, req, Limits{}, nil); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRunC is one attempt of a trivial C plugin: instantiate, read the
// envelope, echo the input, parse the result.
func BenchmarkRunC(b *testing.B) {
	p := loadAs(b, sharedRuntime(b), "envelope", testwasm.CGuest(b, "envelope"))
	benchRun(b, p, Request{Step: "s", Attempt: 1, Input: json.RawMessage(`{"x":1}`)})
}

// BenchmarkRunGo is BenchmarkRunC for a Go plugin using the SDK; most of it
// is the Go runtime starting up.
func BenchmarkRunGo(b *testing.B) {
	p := loadAs(b, sharedRuntime(b), "conformance", testwasm.GoGuest(b, "conformance"))
	benchRun(b, p, Request{Step: "s", Attempt: 1, Input: json.RawMessage(`{"mode":"echo"}`)})
}

// BenchmarkRunGoStateless is BenchmarkRunGo for the same plugin declared
// stateless (testdata/guests/go/stateless), its attempts served by one
// instance put back to its image each time ("reuse"), and, for
// comparison, with reuse turned off ("fresh").
func BenchmarkRunGoStateless(b *testing.B) {
	for _, noReuse := range []bool{false, true} {
		name := "reuse"
		if noReuse {
			name = "fresh"
		}
		b.Run(name, func(b *testing.B) {
			r := ownRuntime(b, Config{CacheDir: sharedCacheDir(b), NoInstanceReuse: noReuse})
			p := loadAs(b, r, "stateless", testwasm.GoGuest(b, "stateless"))
			benchRun(b, p, Request{TaskID: "t", Step: "s", Attempt: 1, Input: json.RawMessage(`{"mode":"echo"}`)})
		})
	}
}

// BenchmarkHostCallNoop measures one call of lhengine_v1.version from a C
// guest: the fixed cost every host capability pays.
func BenchmarkHostCallNoop(b *testing.B) {
	const calls = 1_000_000
	p := loadAs(b, sharedRuntime(b), "hostcalls", testwasm.CGuest(b, "hostcalls"))
	req := Request{Input: json.RawMessage(`{"n":` + strconv.Itoa(calls) + `}`)}
	ctx := context.Background()
	b.ResetTimer()
	for b.Loop() {
		res, err := p.Run(ctx, req, Limits{}, nil)
		if err != nil {
			b.Fatal(err)
		}
		if string(res.Output) != strconv.Itoa(calls) {
			b.Fatalf("output %s", res.Output)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/calls, "ns/call")
}

// BenchmarkCloseOnContextDone compares runtimes with and without
// WithCloseOnContextDone, for a trivial plugin and for a tight loop of 10^7
// iterations (where the periodic checks it inserts cost the most).
func BenchmarkCloseOnContextDone(b *testing.B) {
	ctx := context.Background()
	for _, on := range []bool{true, false} {
		name := "off"
		if on {
			name = "on"
		}
		r, err := newRuntime(ctx, Config{}, on)
		require.NoError(b, err)
		b.Cleanup(func() { r.Close(ctx) })
		b.Run("envelope/"+name, func(b *testing.B) {
			p := loadAs(b, r, "envelope", testwasm.CGuest(b, "envelope"))
			benchRun(b, p, Request{Input: json.RawMessage(`{"x":1}`)})
		})
		b.Run("spin1e7/"+name, func(b *testing.B) {
			p := loadAs(b, r, "spin", testwasm.CGuest(b, "spin"))
			benchRun(b, p, Request{Input: json.RawMessage(`{"n":10000000}`)})
		})
		b.Run("hostcalls1e6/"+name, func(b *testing.B) {
			p := loadAs(b, r, "hostcalls", testwasm.CGuest(b, "hostcalls"))
			benchRun(b, p, Request{Input: json.RawMessage(`{"n":1000000}`)})
		})
	}
}

// kvHost answers every call with the same small kv.get response.
type kvHost struct{ nopHost }

var kvResponse = []byte(`{"found":true,"value":{"page":3}}`)

func (kvHost) Call(context.Context, string, []byte) ([]byte, error) { return kvResponse, nil }

// BenchmarkHostCallJSON measures one call("kv.get", {"key":"cursor"}) from
// a guest against a host answering {"found":true,"value":{"page":3}}: the
// checks, the request copy, the JSON validation and the response write.
// The Go guest also encodes and decodes the JSON with the SDK.
func BenchmarkHostCallJSON(b *testing.B) {
	for _, g := range []struct {
		name  string
		calls int
		build func(testing.TB, string) string
	}{
		{"c", 1_000_000, func(t testing.TB, n string) string { return testwasm.CGuest(t, n) }},
		{"go", 100_000, testwasm.GoGuest},
	} {
		b.Run(g.name, func(b *testing.B) {
			p := loadAs(b, sharedRuntime(b), "caps", g.build(b, "caps"))
			req := Request{Input: json.RawMessage(`{"mode":"bench","n":` + strconv.Itoa(g.calls) + `}`)}
			ctx := context.Background()
			b.ResetTimer()
			for b.Loop() {
				res, err := p.Run(ctx, req, Limits{}, kvHost{})
				if err != nil {
					b.Fatal(err)
				}
				if string(res.Output) != strconv.Itoa(g.calls) {
					b.Fatalf("output %s", res.Output)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(g.calls), "ns/call")
		})
	}
}
