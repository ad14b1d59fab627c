package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lhengine/lhengine/internal/crashpoint"
	"github.com/lhengine/lhengine/internal/testwasm"
	"github.com/lhengine/lhengine/ledger"
)

// travelTask writes two files to the workspace, one step each, then reads
// them back in two later steps.
const travelTask = `
task "travel" {
  step "write_a" {
    plugin = "step.wasm"
    input  = { mode = "write", path = "/workspace/a.txt", content = "written by step one" }
  }
  step "write_b" {
    plugin = "step.wasm"
    input  = { mode = "write", path = "/workspace/b.txt", content = "written by step two" }
  }
  step "read_a" {
    plugin = "step.wasm"
    input  = { mode = "read", path = "/workspace/a.txt" }
  }
  step "read_b" {
    plugin = "step.wasm"
    input  = { mode = "read", path = "/workspace/b.txt" }
  }
}
`

// TestWorkspaceTravelsToAnotherHost is the two-hosts test as it can
// be on one machine: a worker process runs the steps that write files to
// /workspace and is SIGKILLed right after committing the second; its
// workspaces folder is deleted (the other host has no local copy); a new
// process resumes the task, and the steps that read the files see them,
// restored from the snapshot the commit recorded.
func TestWorkspaceTravelsToAnotherHost(t *testing.T) {
	t.Parallel()
	bin := buildBinary(t)
	dir := testwasm.TaskDir(t, testwasm.CGuest(t, "files"), travelTask)
	home := filepath.Join(dir, "home")

	out, killed := runCrashing(t, bin, home, crashpoint.UnitAfterCommit+"@2", nil, "run", filepath.Join(dir, "task.hcl"))
	require.True(t, killed, "the run must die after its second commit:\n%s", out)
	id := taskID(out)
	require.Len(t, id, 26, out)
	withStore(t, home, func(r ledger.Reader) {
		task, err := r.Task(id)
		require.NoError(t, err)
		require.Equal(t, 2, task.Cursor, "both writes committed before the kill")
		require.Equal(t, uint64(2), task.WorkspaceSeq, "each write recorded a snapshot")
	})

	// The other host: no workspace of the task at all.
	require.NoError(t, os.RemoveAll(filepath.Join(home, "workspaces")))

	out, killed = runCrashing(t, bin, home, "", nil, "resume", id)
	require.False(t, killed)
	require.Contains(t, out, "succeeded")
	withStore(t, home, func(r ledger.Reader) {
		for step, want := range map[int]string{2: "written by step one", 3: "written by step two"} {
			raw, err := r.StepOutput(id, step)
			require.NoError(t, err)
			var got struct {
				OK   bool   `json:"ok"`
				Data string `json:"data"`
			}
			require.NoError(t, json.Unmarshal(raw, &got), string(raw))
			require.True(t, got.OK, "step %d could not read its file: %s", step+1, raw)
			require.Equal(t, want, got.Data)
		}
	})
	b, err := os.ReadFile(filepath.Join(home, "workspaces", id, "a.txt"))
	require.NoError(t, err)
	require.Equal(t, "written by step one", string(b), "the workspace was restored on disk")
}

// TestForkAtAStepAndAtTheEnd forks a finished task at a step and at its
// end: each fork holds the outputs and the workspace of that checkpoint,
// runs like any other task, and leaves the original unchanged.
func TestForkAtAStepAndAtTheEnd(t *testing.T) {
	t.Parallel()
	dir := testwasm.TaskDir(t, testwasm.CGuest(t, "files"), travelTask)
	b := &cliBundle{dir: dir, home: filepath.Join(dir, "home")}
	id := taskID(lhOK(t, b, "run", filepath.Join(dir, "task.hcl")))

	// At write_b: write_a's output and the workspace it left (a.txt only).
	f := lhJSON[ledger.Task](t, b, "fork", id, "--at", "write_b")
	require.NotEqual(t, id, f.ID)
	require.Equal(t, ledger.Queued, f.Status)
	require.Equal(t, &ledger.ForkOrigin{Task: id, Step: "write_b", StepIndex: 1, Workspace: 1, By: who()}, f.ForkedFrom)
	// Something the original's folder holds now but its checkpoint did not.
	require.NoError(t, os.WriteFile(filepath.Join(b.home, "workspaces", id, "later.txt"), []byte("x"), 0o644))
	lhOK(t, b, "resume", f.ID)
	got, err := os.ReadDir(filepath.Join(b.home, "workspaces", f.ID))
	require.NoError(t, err)
	var names []string
	for _, e := range got {
		names = append(names, e.Name())
	}
	require.Equal(t, []string{"a.txt", "b.txt"}, names, "the fork started from snapshot 1 and wrote b.txt itself")

	// At the end, by number: every output and the last workspace.
	end := lhJSON[ledger.Task](t, b, "fork", id, "--at", "3")
	require.Equal(t, 2, end.ForkedFrom.StepIndex)
	require.Equal(t, uint64(2), end.ForkedFrom.Workspace)
	lhOK(t, b, "resume", end.ID)
	last := lhJSON[ledger.Task](t, b, "fork", id)
	require.Equal(t, ledger.Succeeded, last.Status, "a succeeded task forked at its end has succeeded")
	require.Equal(t, 4, last.ForkedFrom.StepIndex)
	require.Equal(t, uint64(4), last.ForkedFrom.Workspace)

	withStore(t, b.home, func(r ledger.Reader) {
		for _, fid := range []string{f.ID, end.ID, last.ID} {
			task, err := r.Task(fid)
			require.NoError(t, err)
			require.Equal(t, ledger.Succeeded, task.Status, fid)
			for step, want := range map[int]string{2: "written by step one", 3: "written by step two"} {
				raw, err := r.StepOutput(fid, step)
				require.NoError(t, err)
				var out struct{ Data string }
				require.NoError(t, json.Unmarshal(raw, &out))
				require.Equal(t, want, out.Data, "fork %s step %d", fid, step+1)
			}
		}
		orig, err := r.Task(id)
		require.NoError(t, err)
		require.Equal(t, ledger.Succeeded, orig.Status)
		require.Equal(t, uint64(4), orig.WorkspaceSeq, "the original is unchanged: a snapshot per step")
		require.Nil(t, orig.ForkedFrom)
		evs, err := r.Events(f.ID, 0, 1)
		require.NoError(t, err)
		require.Equal(t, ledger.EvForked, evs[0].Type)
		require.Contains(t, evs[0].Message, "forked from task "+id+` at step 2 "write_b"`)
	})
}
