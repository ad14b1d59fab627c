package engine_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/lhengine/lhengine/engine"
	"github.com/lhengine/lhengine/fault"
	"github.com/lhengine/lhengine/internal/testwasm"
	"github.com/lhengine/lhengine/ledger"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type testBundle struct {
	dir string
	e   *engine.Engine
	ctx context.Context
}

// setup writes the pipeline guest and the task source into a fresh folder
// and opens an engine whose home is in it.
func setup(t *testing.T, task string) *testBundle {
	t.Helper()
	tb := &testBundle{dir: testwasm.TaskDir(t, testwasm.CGuest(t, "pipeline"), task), ctx: context.Background()}
	tb.open(t)
	return tb
}

// setupGated is setup with the gate guest beside the task, as gate.wasm.
func setupGated(t *testing.T, task string) *testBundle {
	t.Helper()
	b := setup(t, task)
	testwasm.Copy(t, testwasm.CGuest(t, "gate"), filepath.Join(b.dir, "gate.wasm"))
	return b
}

func (b *testBundle) open(t *testing.T) {
	t.Helper()
	e, err := engine.Open(b.ctx, engine.Config{Home: filepath.Join(b.dir, "home")})
	require.NoError(t, err)
	b.e = e
	t.Cleanup(func() {
		if b.e != nil {
			require.NoError(t, b.e.Close(context.Background()))
			b.e = nil
		}
	})
}

func (b *testBundle) reopen(t *testing.T) {
	t.Helper()
	require.NoError(t, b.e.Close(b.ctx))
	b.e = nil
	b.open(t)
}

func (b *testBundle) submit(t *testing.T, vars map[string]string) *ledger.Task {
	t.Helper()
	task, created, err := b.e.Submit(b.ctx, filepath.Join(b.dir, "task.hcl"), engine.SubmitOptions{Vars: vars})
	require.NoError(t, err)
	require.True(t, created)
	return task
}

func (b *testBundle) work(t *testing.T, id string) *ledger.Task {
	t.Helper()
	require.NoError(t, b.e.Work(b.ctx, engine.WorkOptions{Task: id, Concurrency: 4, ExitWhenIdle: true}))
	task, err := b.e.Task(b.ctx, id)
	require.NoError(t, err)
	return task
}

func (b *testBundle) output(t *testing.T, id, step string) string {
	t.Helper()
	var out json.RawMessage
	require.NoError(t, b.e.Read(func(r ledger.Reader) error {
		task, err := r.Task(id)
		require.NoError(t, err)
		for i, s := range task.Steps {
			if s.Name == step {
				out, err = r.StepOutput(id, i)
				return err
			}
		}
		t.Fatalf("no step %q", step)
		return nil
	}))
	return string(out)
}

func TestPipelinePassesOutputsAlong(t *testing.T) {
	t.Parallel()
	b := setup(t, `
task "chain" {
  variable "who" { type = string }
  step "a" {
    plugin = "step.wasm"
    input  = { mode = "echo", greeting = "hello ${var.who}", id = task.id }
  }
  step "b" {
    plugin = "step.wasm"
    input  = { mode = "echo", upper = upper(step.a.output.greeting) }
  }
}`)
	task := b.submit(t, map[string]string{"who": "world"})
	got := b.work(t, task.ID)
	require.Equal(t, ledger.Succeeded, got.Status, got.Reason)
	require.JSONEq(t, `{"mode":"echo","upper":"HELLO WORLD"}`, string(got.Output))
	require.JSONEq(t, `{"mode":"echo","greeting":"hello world","id":"`+task.ID+`"}`, b.output(t, task.ID, "a"))
}

func TestFanOutOutputIsTheListOfItemOutputsInOrder(t *testing.T) {
	t.Parallel()
	b := setup(t, `
task "fan" {
  step "list" {
    plugin = "step.wasm"
    input  = { mode = "echo", pages = [for i in range(25) : "page-${i}"] }
  }
  step "each" {
    plugin      = "step.wasm"
    for_each    = step.list.output.pages
    concurrency = 5
    input       = { mode = "item" }
  }
  step "count" {
    plugin = "step.wasm"
    input  = { mode = "echo", n = length(step.each.output), last = step.each.output[24].item.value }
  }
}`)
	task := b.submit(t, nil)
	got := b.work(t, task.ID)
	require.Equal(t, ledger.Succeeded, got.Status, got.Reason)
	require.JSONEq(t, `{"mode":"echo","n":25,"last":"page-24"}`, string(got.Output))
	var items []struct {
		Item struct {
			Index int    `json:"index"`
			Value string `json:"value"`
		} `json:"item"`
	}
	require.NoError(t, json.Unmarshal([]byte(b.output(t, task.ID, "each")), &items))
	require.Len(t, items, 25)
	for i, it := range items {
		require.Equal(t, i, it.Item.Index)
		require.Equal(t, "page-"+itoa(i), it.Item.Value)
	}
}

func itoa(i int) string { b, _ := json.Marshal(i); return string(b) }

func TestRetriesFollowTheRetryBlock(t *testing.T) {
	t.Parallel()
	b := setup(t, `
task "flaky" {
  step "a" {
    plugin = "step.wasm"
    input  = { mode = "fail_until", ok_at = 3 }
    retry {
      attempts    = 3
      backoff     = "1ms"
      max_backoff = "2ms"
    }
  }
  step "b" {
    plugin = "step.wasm"
    input  = { mode = "fail_until", ok_at = 9 }
    retry {
      attempts = 2
      backoff  = "1ms"
    }
  }
}`)
	task := b.submit(t, nil)
	got := b.work(t, task.ID)
	require.Equal(t, ledger.Failed, got.Status)
	require.Equal(t, fault.PluginError, got.Failure.Kind)
	require.Equal(t, "b", got.Failure.Step)
	require.Equal(t, 2, got.Failure.Attempt)
	require.Equal(t, 5, got.Attempts, "a: 3 attempts, b: 2")
	require.Equal(t, 4, got.Failures)
}

func TestRepairSendsTheTaskBackAndLaterStepsSeeNewOutputs(t *testing.T) {
	t.Parallel()
	// verify asks for a repair on the first pass only.
	b := setup(t, `
task "draft-verify" {
  step "draft" {
    plugin = "step.wasm"
    input  = { mode = "echo", v = 1 }
  }
  step "verify" {
    plugin = "step.wasm"
    input  = { mode = "repair_once", draft = step.draft.output }
    repair {
      restart_from = "draft"
      max          = 2
    }
  }
  step "finalize" {
    plugin = "step.wasm"
    input  = { mode = "echo", verdict = step.verify.output }
  }
}`)
	task := b.submit(t, nil)
	got := b.work(t, task.ID)
	require.Equal(t, ledger.Succeeded, got.Status, got.Reason)
	require.Equal(t, 1, got.Repairs)
	require.Equal(t, 2, got.Steps[0].Pass, "draft ran twice")
	require.JSONEq(t, `{"mode":"echo","verdict":{"repaired":{"count":1,"reason":"first pass is never good enough"}}}`, string(got.Output))
}

func TestRepairBudgetEndsAnEndlessVerifyFailure(t *testing.T) {
	t.Parallel()
	b := setup(t, `
task "never" {
  step "draft" {
    plugin = "step.wasm"
    input  = { mode = "echo" }
  }
  step "verify" {
    plugin = "step.wasm"
    input  = { mode = "repair" }
    repair {
      restart_from = "draft"
      max          = 2
    }
  }
}`)
	task := b.submit(t, nil)
	got := b.work(t, task.ID)
	require.Equal(t, ledger.Paused, got.Status, "repair.max reached pauses the task, never fails it")
	require.Equal(t, ledger.PauseRepairs, got.Pause.Kind)
	require.Equal(t, "verify", got.Pause.Name)
	require.Equal(t, 3, got.Steps[0].Pass)
}

func TestGuestFaultIsAClassifiedFailure(t *testing.T) {
	t.Parallel()
	b := setup(t, `
task "trap" {
  step "a" {
    plugin = "step.wasm"
    input  = { mode = "trap" }
    retry {
      attempts = 2
      backoff  = "1ms"
    }
  }
}`)
	task := b.submit(t, nil)
	got := b.work(t, task.ID)
	require.Equal(t, ledger.Failed, got.Status)
	require.Equal(t, fault.Trap, got.Failure.Kind)
	require.Equal(t, 2, got.Attempts)
}

func TestProgressSurvivesRebuildingTheEngine(t *testing.T) {
	t.Parallel()
	b := setup(t, `
task "long" {
  step "a" {
    plugin = "step.wasm"
    input  = { mode = "echo", n = 1 }
  }
  step "each" {
    plugin      = "step.wasm"
    for_each    = range(12)
    concurrency = 1
    input       = { mode = "item" }
  }
  step "c" {
    plugin = "step.wasm"
    input  = { mode = "echo", n = length(step.each.output) }
  }
}`)
	task := b.submit(t, nil)
	// Stop the engine after its fifth commit, as a deploy would.
	ctx, cancel := context.WithCancel(b.ctx)
	var commits atomic.Int32
	err := b.e.Work(ctx, engine.WorkOptions{Task: task.ID, Concurrency: 1, OnCommit: func(*ledger.Task) {
		if commits.Add(1) == 5 {
			cancel()
		}
	}})
	require.ErrorIs(t, err, context.Canceled)
	before, err := b.e.Task(b.ctx, task.ID)
	require.NoError(t, err)
	done, _ := before.Progress()
	require.Equal(t, 5, done)

	b.reopen(t)
	got := b.work(t, task.ID)
	require.Equal(t, ledger.Succeeded, got.Status, got.Reason)
	require.JSONEq(t, `{"mode":"echo","n":12}`, string(got.Output))
	// Every unit committed exactly once: 1 + 12 + 1 attempts that succeeded,
	// and no committed unit ran again.
	require.NoError(t, b.e.Read(func(r ledger.Reader) error {
		for step := range 3 {
			as, err := r.Attempts(task.ID, step)
			require.NoError(t, err)
			seen := map[int]int{}
			for _, a := range as {
				if a.Output != nil {
					seen[a.Item]++
				}
			}
			for item, n := range seen {
				require.Equal(t, 1, n, "step %d item %d committed %d times", step, item, n)
			}
		}
		return nil
	}))
	require.LessOrEqual(t, got.Attempts, 15, "at most the one abandoned attempt runs twice")
}

// TestTaskRunsFromPinnedModuleAfterTheFileChanges deletes, or overwrites,
// the plugin file of a queued task: the task still runs, from the module
// bytes kept in the store at submit, and a resume check does not object.
func TestTaskRunsFromPinnedModuleAfterTheFileChanges(t *testing.T) {
	t.Parallel()
	for _, change := range []string{"delete", "overwrite"} {
		t.Run(change, func(t *testing.T) {
			t.Parallel()
			b := setup(t, `
task "pinned" {
  step "a" {
    plugin = "step.wasm"
    input  = { mode = "echo", n = 1 }
  }
  step "b" {
    plugin = "step.wasm"
    input  = { mode = "echo", n = step.a.output.n + 1 }
  }
}`)
			task := b.submit(t, nil)
			path := filepath.Join(b.dir, "step.wasm")
			if change == "delete" {
				require.NoError(t, os.Remove(path))
			} else {
				require.NoError(t, os.WriteFile(path, []byte("\x00asm not the same module"), 0o644))
			}
			require.NoError(t, b.e.CheckPlugins(task.ID))
			b.reopen(t) // a fresh process: nothing compiled yet
			got := b.work(t, task.ID)
			require.Equal(t, ledger.Succeeded, got.Status, got.Reason)
			require.JSONEq(t, `{"mode":"echo","n":2}`, string(got.Output))
			require.NoError(t, b.e.Read(func(r ledger.Reader) error {
				m, err := r.Manifest(task.ID)
				require.NoError(t, err)
				require.Equal(t, path, m.Plugins["a"].Path, "the manifest keeps the path for display")
				return nil
			}))
		})
	}
}

func TestInvalidTaskIsRejectedWithDiagnostics(t *testing.T) {
	t.Parallel()
	b := setup(t, `
task "bad" {
  step "a" {
    plugin = "step.wasm"
    input  = step.b.output
  }
}`)
	_, _, err := b.e.Submit(b.ctx, filepath.Join(b.dir, "task.hcl"), engine.SubmitOptions{})
	var inv *engine.InvalidTaskError
	require.ErrorAs(t, err, &inv)
	list := inv.Diagnostics.List()
	require.NotEmpty(t, list)
	require.True(t, list[0].Error)
	require.Contains(t, list[0].Range, "task.hcl:5,")
	var out strings.Builder
	require.NoError(t, inv.Diagnostics.Write(&out, 0, false))
	require.Contains(t, out.String(), "input  = step.b.output", "the rendering quotes the source")
}

func TestStepsShareTheTaskWorkspaceAndReadOnlyMounts(t *testing.T) {
	t.Parallel()
	b := setup(t, "")
	files := testwasm.CGuest(t, "files")
	testwasm.Copy(t, files, filepath.Join(b.dir, "files.wasm"))
	require.NoError(t, os.MkdirAll(filepath.Join(b.dir, "data"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(b.dir, "data", "pages.txt"), []byte("a b c"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(b.dir, "task.hcl"), []byte(`
task "files" {
  step "write" {
    plugin = "files.wasm"
    input  = { mode = "write", path = "/workspace/notes.txt", content = "kept" }
  }
  step "read" {
    plugin    = "files.wasm"
    workspace = "ro"
    input     = { mode = "read", path = "/workspace/notes.txt" }
  }
  step "readonly" {
    plugin    = "files.wasm"
    workspace = "ro"
    input     = { mode = "write", path = "/workspace/other.txt", content = "no" }
  }
  step "mount" {
    plugin = "files.wasm"
    input  = { mode = "read", path = "/mnt/data/pages.txt" }
    mount "data" {
      source = "data"
    }
  }
  step "isolated" {
    plugin    = "files.wasm"
    workspace = "none"
    input     = { mode = "read", path = "/workspace/notes.txt" }
  }
}`), 0o644))
	task := b.submit(t, nil)
	got := b.work(t, task.ID)
	require.Equal(t, ledger.Succeeded, got.Status, got.Reason)
	require.JSONEq(t, `{"ok":true,"data":"kept"}`, b.output(t, task.ID, "read"), "a later step sees an earlier step's files")
	require.Contains(t, b.output(t, task.ID, "readonly"), `"ok":false`)
	require.JSONEq(t, `{"ok":true,"data":"a b c"}`, b.output(t, task.ID, "mount"))
	require.Contains(t, b.output(t, task.ID, "isolated"), `"ok":false`)
	kept, err := os.ReadFile(filepath.Join(b.dir, "home", "workspaces", task.ID, "notes.txt"))
	require.NoError(t, err)
	require.Equal(t, "kept", string(kept))
	_, err = os.Stat(filepath.Join(b.dir, "home", "workspaces", task.ID, "other.txt"))
	require.ErrorIs(t, err, os.ErrNotExist)
}
