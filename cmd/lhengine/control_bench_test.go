package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lhengine/lhengine/api"
	"github.com/lhengine/lhengine/cmd/lhengine/internal/home"
	"github.com/lhengine/lhengine/engine"
	"github.com/lhengine/lhengine/internal/testwasm"
)

// BenchmarkStatusThroughSocket: `lhengine status ID` (the whole command:
// flags, finding the owner on the home's socket, the report, printing)
// while another session owns the home, without the process start.
func BenchmarkStatusThroughSocket(b *testing.B) {
	ctx := context.Background()
	dir := testwasm.TaskDir(b, testwasm.CGuest(b, "pipeline"), chainTask)
	homeDir := filepath.Join(dir, "home")
	owner := &app{home: homeDir, logLevel: "off", stdout: io.Discard, stderr: io.Discard}
	s, err := owner.connect(ctx, home.Mode{Create: true, Works: "all", Own: true})
	require.NoError(b, err)
	defer s.Close()
	r, err := s.Client.Submit(ctx, api.SubmitRequest{Path: filepath.Join(dir, "task.hcl")})
	require.NoError(b, err)
	args := []string{"--home", homeDir, "status", r.ID}
	require.Equal(b, exitOK, run(ctx, args, io.Discard, io.Discard))
	timeCommand(b, args, "ms/status")
}

// timeCommand runs the command args b.N times, timed, and reports the
// milliseconds of one run as unit.
func timeCommand(b *testing.B, args []string, unit string) {
	b.Helper()
	b.ResetTimer()
	for range b.N {
		if code := run(context.Background(), args, io.Discard, io.Discard); code != exitOK {
			b.Fatalf("%v exited %d", args, code)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N)/1000, unit)
}

// BenchmarkLs: `lhengine ls` (the whole command, without the process
// start: its newest 20 tasks, text) in a home holding 1 or 2,000 finished
// tasks of three steps, the store opened by the command itself. What a
// stored task costs ls is the difference over 1,999.
func BenchmarkLs(b *testing.B) {
	ctx := context.Background()
	for _, n := range []int{1, 2000} {
		b.Run(fmt.Sprintf("tasks=%d", n), func(b *testing.B) {
			dir := testwasm.TaskDir(b, testwasm.CGuest(b, "pipeline"), chainTask)
			homeDir := filepath.Join(dir, "home")
			e, err := engine.Open(ctx, engine.Config{Home: homeDir, NoSync: true})
			require.NoError(b, err)
			for range n {
				t, _, err := e.Submit(ctx, filepath.Join(dir, "task.hcl"), engine.SubmitOptions{})
				require.NoError(b, err)
				require.NoError(b, e.Work(ctx, engine.WorkOptions{Task: t.ID, Concurrency: 1, ExitWhenIdle: true}))
			}
			require.NoError(b, e.Close(ctx))
			args := []string{"--home", homeDir, "ls"}
			var out bytes.Buffer
			require.Equal(b, exitOK, run(ctx, args, &out, io.Discard))
			require.Contains(b, out.String(), "chain")
			timeCommand(b, args, "ms/ls")
		})
	}
}
