package guest

import (
	"context"
	"encoding/json"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
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
	p := loadAs(b, sharedRuntime(b), "envelope", buildC(b, "envelope"))
	benchRun(b, p, Request{Step: "s", Attempt: 1, Input: json.RawMessage(`{"x":1}`)})
}

// BenchmarkRunGo is BenchmarkRunC for a Go plugin using the SDK; most of it
// is the Go runtime starting up.
func BenchmarkRunGo(b *testing.B) {
	p := loadAs(b, sharedRuntime(b), "conformance", buildGo(b, "conformance"))
	benchRun(b, p, Request{Step: "s", Attempt: 1, Input: json.RawMessage(`{"mode":"echo"}`)})
}

// BenchmarkHostCallNoop measures one call of lhengine_v1.version from a C
// guest: the fixed cost every host capability pays.
func BenchmarkHostCallNoop(b *testing.B) {
	const calls = 1_000_000
	p := loadAs(b, sharedRuntime(b), "hostcalls", buildC(b, "hostcalls"))
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
			p := loadAs(b, r, "envelope", buildC(b, "envelope"))
			benchRun(b, p, Request{Input: json.RawMessage(`{"x":1}`)})
		})
		b.Run("spin1e7/"+name, func(b *testing.B) {
			p := loadAs(b, r, "spin", buildC(b, "spin"))
			benchRun(b, p, Request{Input: json.RawMessage(`{"n":10000000}`)})
		})
		b.Run("hostcalls1e6/"+name, func(b *testing.B) {
			p := loadAs(b, r, "hostcalls", buildC(b, "hostcalls"))
			benchRun(b, p, Request{Input: json.RawMessage(`{"n":1000000}`)})
		})
	}
}
