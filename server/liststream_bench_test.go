package server

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lhengine/lhengine/api"
	"github.com/lhengine/lhengine/engine"
	"github.com/lhengine/lhengine/internal/testwasm"
)

// BenchmarkTaskList: a home holds 200 finished tasks of 20 steps, and each
// op submits one more task, then reads the list as the task list stream
// does after a change. "every" reads every task (and so 4,000 step
// records) each time, as the stream did; "changed" reads again only the
// task that changed.
func BenchmarkTaskList(b *testing.B) {
	ctx := context.Background()
	dir := b.TempDir()
	testwasm.Copy(b, testwasm.CGuest(b, "pipeline"), filepath.Join(dir, "step.wasm"))
	steps := ""
	for i := range 20 {
		steps += fmt.Sprintf("  step \"s%d\" {\n    plugin = \"step.wasm\"\n    input  = { mode = \"echo\" }\n  }\n", i)
	}
	path := filepath.Join(dir, "task.hcl")
	require.NoError(b, os.WriteFile(path, []byte("task \"long\" {\n"+steps+"}\n"), 0o644))
	e, err := engine.Open(ctx, engine.Config{Home: filepath.Join(dir, "home")})
	require.NoError(b, err)
	b.Cleanup(func() { require.NoError(b, e.Close(ctx)) })
	for range 200 {
		t, _, err := e.Submit(ctx, path, engine.SubmitOptions{})
		require.NoError(b, err)
		require.NoError(b, e.Work(ctx, engine.WorkOptions{Task: t.ID, Concurrency: 1, ExitWhenIdle: true}))
	}
	s := New(e, Options{Owner: api.Owner{PID: os.Getpid(), Works: "all"}})
	for _, cached := range []bool{false, true} {
		name := "every"
		if cached {
			name = "changed"
		}
		b.Run(name, func(b *testing.B) {
			var c taskCache
			_, err := s.taskListFrom(&c)
			require.NoError(b, err)
			b.ResetTimer()
			for range b.N {
				b.StopTimer()
				_, _, err := e.Submit(ctx, path, engine.SubmitOptions{})
				require.NoError(b, err)
				b.StartTimer()
				if !cached {
					c = taskCache{}
				}
				list, err := s.taskListFrom(&c)
				require.NoError(b, err)
				require.Greater(b, len(list), 200)
			}
		})
	}
}
