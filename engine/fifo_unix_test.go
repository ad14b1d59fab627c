//go:build unix

package engine_test

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lhengine/lhengine/engine"
)

// TestSubmitNeverWaitsOnAFIFO: a task file, prompt file, plugin or policy
// file that is a FIFO (a name anyone who can write the folder can plant) is
// refused at once; the submit does not wait for a writer that never comes.
func TestSubmitNeverWaitsOnAFIFO(t *testing.T) {
	t.Parallel()
	b := setup(t, `
task "fifo" {
  prompt "system" {
    file = "prompt.md"
  }
  step "a" {
    plugin = "step.wasm"
    input  = { mode = "echo", system = prompt.system }
  }
}`)
	submit := func(path string, o engine.SubmitOptions) error {
		_, _, err := b.e.Submit(b.ctx, path, o)
		return err
	}
	fifo := func(path string) {
		require.NoError(t, os.RemoveAll(path))
		require.NoError(t, syscall.Mkfifo(path, 0o644))
	}

	fifo(filepath.Join(b.dir, "prompt.md"))
	err := submit(filepath.Join(b.dir, "task.hcl"), engine.SubmitOptions{})
	require.ErrorContains(t, err, "not a regular file")

	require.NoError(t, os.Remove(filepath.Join(b.dir, "prompt.md")))
	require.NoError(t, os.WriteFile(filepath.Join(b.dir, "prompt.md"), []byte("be brief"), 0o644))
	step := filepath.Join(b.dir, "step.wasm")
	wasm, err := os.ReadFile(step)
	require.NoError(t, err)
	fifo(step)
	require.ErrorContains(t, submit(filepath.Join(b.dir, "task.hcl"), engine.SubmitOptions{}), "not a regular file")
	require.NoError(t, os.Remove(step))
	require.NoError(t, os.WriteFile(step, wasm, 0o644))

	require.NoError(t, os.MkdirAll(filepath.Join(b.dir, "policies"), 0o755))
	fifo(filepath.Join(b.dir, "policies", "p.hcl"))
	require.ErrorContains(t, submit(filepath.Join(b.dir, "task.hcl"), engine.SubmitOptions{Policies: []string{"p"}}), "not a regular file")
	require.NoError(t, os.Remove(filepath.Join(b.dir, "policies", "p.hcl")))

	task := filepath.Join(b.dir, "fifo.hcl")
	fifo(task)
	require.ErrorContains(t, submit(task, engine.SubmitOptions{}), "not a regular file")

	_, _, err = b.e.Submit(b.ctx, filepath.Join(b.dir, "task.hcl"), engine.SubmitOptions{})
	require.NoError(t, err, "with regular files again, the task is accepted")
}
