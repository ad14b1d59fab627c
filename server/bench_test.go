package server_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lhengine/lhengine/api"
	"github.com/lhengine/lhengine/engine"
	"github.com/lhengine/lhengine/internal/homefiles"
	"github.com/lhengine/lhengine/internal/testwasm"
	"github.com/lhengine/lhengine/server"
)

// benchServed opens an engine on disk with its server on the home's Unix
// socket, and returns a client of that socket.
func benchServed(b *testing.B, guest, task string) (*engine.Engine, *api.Client, string) {
	b.Helper()
	ctx := context.Background()
	dir := b.TempDir()
	testwasm.Copy(b, testwasm.BuildC(b, filepath.Join(testwasm.ModuleRoot(b), "testdata/guests/c", guest)), filepath.Join(dir, guest+".wasm"))
	path := filepath.Join(dir, "task.hcl")
	require.NoError(b, os.WriteFile(path, []byte(task), 0o644))
	home := filepath.Join(dir, "home")
	e, err := engine.Open(ctx, engine.Config{Home: home})
	require.NoError(b, err)
	srv := server.New(e, server.Options{Owner: api.Owner{PID: os.Getpid(), Works: "all"}})
	l, err := homefiles.Listen(home)
	require.NoError(b, err)
	sctx, stop := context.WithCancel(ctx)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(sctx, l, nil, 0) }()
	b.Cleanup(func() {
		stop()
		require.NoError(b, <-served)
		require.NoError(b, e.Close(ctx))
	})
	return e, api.NewSocketClient(api.SocketPath(home)), path
}

// BenchmarkEventLatency: how long after a unit's commit (the time in its
// unit_done event) a follower of the task's event stream has the event,
// over the home's socket, one unit at a time; durable commits.
func BenchmarkEventLatency(b *testing.B) {
	ctx := context.Background()
	b.StopTimer()
	n := b.N
	task := fmt.Sprintf(`task "serial" {
  step "each" {
    plugin      = "pipeline.c.wasm"
    for_each    = range(%d)
    concurrency = 1
    input       = { mode = "item" }
  }
}`, n)
	e, c, path := benchServed(b, "pipeline.c", task)
	t, _, err := e.Submit(ctx, path, engine.SubmitOptions{})
	require.NoError(b, err)
	var lat []time.Duration
	followed := make(chan error, 1)
	go func() {
		followed <- c.Follow(ctx, t.ID, 0, func(it api.StreamItem) error {
			if it.Type == api.StreamEvent && it.Event.Type == api.EvUnitDone {
				lat = append(lat, time.Since(it.Event.Time))
			}
			return nil
		})
	}()
	b.StartTimer()
	require.NoError(b, e.Work(ctx, engine.WorkOptions{Task: t.ID, Concurrency: 1, ExitWhenIdle: true}))
	require.NoError(b, <-followed)
	b.StopTimer()
	require.Len(b, lat, n)
	slices.Sort(lat)
	b.ReportMetric(float64(lat[n/2].Microseconds())/1000, "ms-p50")
	b.ReportMetric(float64(lat[n*99/100].Microseconds())/1000, "ms-p99")
	b.ReportMetric(0, "ns/op")
}

// BenchmarkFanOutServed: a 3,000-item fan-out of a C guest, concurrency
// 16, durable, in an engine that serves its API: "alone" with nobody
// connected, "followed" with a client following the task's event stream
// and another the task list (what the dashboard does).
func BenchmarkFanOutServed(b *testing.B) {
	const items = 3000
	task := fmt.Sprintf(`task "fan" {
  step "each" {
    plugin      = "pipeline.c.wasm"
    for_each    = flatten([for i in range(%d) : range(1000)])
    concurrency = 16
    input       = { mode = "item" }
  }
}`, items/1000)
	for _, followed := range []bool{false, true} {
		name := "alone"
		if followed {
			name = "followed"
		}
		b.Run(name, func(b *testing.B) {
			ctx := context.Background()
			e, c, path := benchServed(b, "pipeline.c", task)
			b.ResetTimer()
			for range b.N {
				b.StopTimer()
				t, _, err := e.Submit(ctx, path, engine.SubmitOptions{})
				require.NoError(b, err)
				fctx, stop := context.WithCancel(ctx)
				done := make(chan error, 2)
				if followed {
					go func() { done <- c.Follow(fctx, t.ID, 0, func(api.StreamItem) error { return nil }) }()
					go func() { done <- c.FollowTasks(fctx, func([]api.Task) error { return nil }) }()
				}
				b.StartTimer()
				require.NoError(b, e.Work(ctx, engine.WorkOptions{Task: t.ID, Concurrency: 16, ExitWhenIdle: true}))
				b.StopTimer()
				if followed {
					require.NoError(b, <-done)
					stop()
					<-done
				}
				stop()
				b.StartTimer()
			}
			b.StopTimer()
			b.ReportMetric(float64(b.N*items)/b.Elapsed().Seconds(), "units/s")
			b.ReportMetric(0, "ns/op")
		})
	}
}
