package main

import (
	"context"
	"io"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lhengine/lhengine/api"
	"github.com/lhengine/lhengine/cmd/lhengine/internal/home"
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
	b.ResetTimer()
	for range b.N {
		if code := run(ctx, args, io.Discard, io.Discard); code != exitOK {
			b.Fatalf("status exited %d", code)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N)/1000, "ms/status")
}
