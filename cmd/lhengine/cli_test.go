package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lhengine/lhengine/engine"
	"github.com/lhengine/lhengine/internal/testwasm"
	"github.com/lhengine/lhengine/ledger"
)

// cliBundle is a folder with the pipeline guest, a task file and a home.
type cliBundle struct {
	dir  string
	home string
}

func setupCLI(t *testing.T, task string) *cliBundle {
	t.Helper()
	dir := testwasm.TaskDir(t, testwasm.CGuest(t, "pipeline"), task)
	return &cliBundle{dir: dir, home: filepath.Join(dir, "home")}
}

// lh runs the CLI in-process and returns exit code, stdout and stderr.
func (b *cliBundle) lh(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(context.Background(), append([]string{"--home", b.home}, args...), &out, &errb)
	return code, out.String(), errb.String()
}

// lhRunner runs a command of the CLI to its end: in-process (cliBundle),
// as a process of its own (procBundle) or outside any home (policyDir).
type lhRunner interface {
	lh(t *testing.T, args ...string) (int, string, string)
}

// taskID is the ID run and resume print on their first line ("task ID").
func taskID(out string) string {
	return strings.TrimSpace(strings.TrimPrefix(strings.SplitN(out, "\n", 2)[0], "task "))
}

// lhOK runs a command that must exit 0 and returns its stdout.
func lhOK(t *testing.T, r lhRunner, args ...string) string {
	t.Helper()
	code, out, errOut := r.lh(t, args...)
	require.Equal(t, 0, code, errOut)
	return out
}

// lhJSON runs a command with -o json that must exit 0 and decodes its
// stdout.
func lhJSON[T any](t *testing.T, r lhRunner, args ...string) T {
	t.Helper()
	out := lhOK(t, r, append([]string{"-o", "json"}, args...)...)
	var v T
	require.NoError(t, json.Unmarshal([]byte(out), &v), out)
	return v
}

// submit submits a task (the arguments of submit) and returns its ID.
func submit(t *testing.T, r lhRunner, args ...string) string {
	t.Helper()
	return strings.TrimSpace(lhOK(t, r, append([]string{"submit"}, args...)...))
}

// withStore opens the home (which must exist) and reads its store with fn.
func withStore(t *testing.T, home string, fn func(r ledger.Reader)) {
	t.Helper()
	e, err := engine.Open(context.Background(), engine.Config{Home: home, MustExist: true})
	require.NoError(t, err)
	defer e.Close(context.Background())
	require.NoError(t, e.Read(func(r ledger.Reader) error {
		fn(r)
		return nil
	}))
}

// succeededTask reads task id, which must have succeeded.
func succeededTask(t *testing.T, r ledger.Reader, id string) *ledger.Task {
	t.Helper()
	task, err := r.Task(id)
	require.NoError(t, err)
	require.Equal(t, ledger.Succeeded, task.Status, task.Reason)
	return task
}

// committedOnce returns the items of a step that committed an output,
// each of which must have committed one only.
func committedOnce(t *testing.T, r ledger.Reader, id string, step int) map[int]bool {
	t.Helper()
	as, err := r.Attempts(id, step)
	require.NoError(t, err)
	committed := map[int]bool{}
	for _, a := range as {
		if a.Output != nil {
			require.False(t, committed[a.Item], "step %d item %d committed twice", step, a.Item)
			committed[a.Item] = true
		}
	}
	return committed
}

const chainTask = `
task "chain" {
  objective   = "pass a greeting along"
  constraints = ["be polite"]
  variable "who" {
    type    = string
    default = "world"
  }
  step "greet" {
    plugin = "step.wasm"
    input  = { mode = "echo", text = "hello ${var.who}" }
  }
  step "shout" {
    plugin = "step.wasm"
    input  = { mode = "echo", text = upper(step.greet.output.text) }
  }
}
`

func TestRunPrintsIDProgressAndOutput(t *testing.T) {
	t.Parallel()
	b := setupCLI(t, chainTask)
	code, out, errOut := b.lh(t, "run", filepath.Join(b.dir, "task.hcl"), "--var", "who=lhengine")
	require.Equal(t, 0, code, errOut)
	lines := strings.Split(out, "\n")
	require.True(t, strings.HasPrefix(lines[0], "task "), out)
	id := strings.TrimPrefix(lines[0], "task ")
	require.Len(t, id, 26)
	require.Contains(t, out, "succeeded: 2/2 units")
	require.Contains(t, out, `"text": "HELLO LHENGINE"`)
	require.Regexp(t, `(?m)^chain · succeeded \d+s · 2 / 2 units \(100%\) · step 2/2 shout$`, errOut, "the last progress line")

	code, out, _ = b.lh(t, "status", id)
	require.Equal(t, 0, code)
	require.Contains(t, out, "objective:   pass a greeting along")
	require.Contains(t, out, "2/2 units (100%)")

	code, out, _ = b.lh(t, "-o", "json", "outputs", id, "greet")
	require.Equal(t, 0, code)
	require.JSONEq(t, `{"mode":"echo","text":"hello lhengine"}`, out)

	code, out, _ = b.lh(t, "-o", "json", "ls")
	require.Equal(t, 0, code)
	var tasks []map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &tasks))
	require.Len(t, tasks, 1)
	require.Equal(t, "succeeded", tasks[0]["status"])

	code, out, _ = b.lh(t, "events", id)
	require.Equal(t, 0, code)
	for _, ev := range []string{"submitted", "started", "unit_done", "step_done", "succeeded"} {
		require.Contains(t, out, ev)
	}
}

func TestSubmitThenWorkerRunsQueuedTasks(t *testing.T) {
	t.Parallel()
	b := setupCLI(t, chainTask)
	var ids []string
	for range 3 {
		ids = append(ids, submit(t, b, filepath.Join(b.dir, "task.hcl")))
	}
	code, out, _ := b.lh(t, "-o", "json", "status", ids[0])
	require.Equal(t, 0, code)
	require.Contains(t, out, `"status": "queued"`)

	lhOK(t, b, "worker", "--concurrency", "4", "--exit-when-idle")
	for _, id := range ids {
		code, out, _ := b.lh(t, "-o", "json", "status", id)
		require.Equal(t, 0, code)
		require.Contains(t, out, `"status": "succeeded"`)
	}
}

func TestSubmitDedupesByIdempotencyKey(t *testing.T) {
	t.Parallel()
	b := setupCLI(t, chainTask)
	_, first, _ := b.lh(t, "submit", filepath.Join(b.dir, "task.hcl"), "--idempotency-key", "nightly-1")
	code, second, _ := b.lh(t, "-o", "json", "submit", filepath.Join(b.dir, "task.hcl"), "--idempotency-key", "nightly-1")
	require.Equal(t, 0, code)
	require.Contains(t, second, strings.TrimSpace(first))
	require.Contains(t, second, `"created": false`)
}

func TestValidateReportsFileLineColumn(t *testing.T) {
	t.Parallel()
	b := setupCLI(t, `
task "bad" {
  step "a" {
    plugin = "step.wasm"
    input  = var.missing
  }
}
`)
	code, _, errOut := b.lh(t, "validate", filepath.Join(b.dir, "task.hcl"))
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "task.hcl:5:")
	require.Contains(t, errOut, "var.missing")

	code, out, _ := b.lh(t, "-o", "json", "validate", filepath.Join(b.dir, "task.hcl"))
	require.Equal(t, 1, code)
	require.Contains(t, out, `"valid": false`)

	code, _, errOut = b.lh(t, "run", filepath.Join(b.dir, "task.hcl"))
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "task.hcl:5:")
}

func TestFailedTaskExitsOneAndSaysWhy(t *testing.T) {
	t.Parallel()
	b := setupCLI(t, `
task "boom" {
  step "a" {
    plugin = "step.wasm"
    input  = { mode = "trap" }
  }
}
`)
	code, out, _ := b.lh(t, "run", filepath.Join(b.dir, "task.hcl"))
	require.Equal(t, 1, code)
	require.Contains(t, out, "failed")
	require.Contains(t, out, "trap")
	id := strings.TrimPrefix(strings.Split(out, "\n")[0], "task ")
	code, _, errOut := b.lh(t, "resume", id)
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "nothing to resume")
	code, out, _ = b.lh(t, "outputs", id, "--attempts")
	require.Equal(t, 0, code)
	require.Contains(t, out, "attempt 1")
	require.Contains(t, out, "trap")
}

func TestUsageErrorsExitTwo(t *testing.T) {
	t.Parallel()
	b := setupCLI(t, chainTask)
	code, _, _ := b.lh(t, "frobnicate")
	require.Equal(t, 2, code)
	code, _, _ = b.lh(t, "run")
	require.Equal(t, 2, code)
	code, _, _ = b.lh(t, "-o", "yaml", "ls")
	require.Equal(t, 2, code)
}

func TestPluginInspect(t *testing.T) {
	t.Parallel()
	b := setupCLI(t, chainTask)
	out := lhOK(t, b, "plugin", "inspect", filepath.Join(b.dir, "step.wasm"))
	require.Contains(t, out, "abi:")
	require.Contains(t, out, "wasi_snapshot_preview1")
	require.Contains(t, out, "_start")

	require.NoError(t, os.WriteFile(filepath.Join(b.dir, "junk.wasm"), []byte("not wasm at all"), 0o644))
	code, _, errOut := b.lh(t, "plugin", "inspect", filepath.Join(b.dir, "junk.wasm"))
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "junk.wasm")
}

func TestValidateReportsABIMismatchOnTheStep(t *testing.T) {
	t.Parallel()
	b := setupCLI(t, `
task "v2" {
  step "a" {
    plugin = "v2.wasm"
  }
}
`)
	v2 := testwasm.CGuest(t, "abi_v2")
	testwasm.Copy(t, v2, filepath.Join(b.dir, "v2.wasm"))
	code, _, errOut := b.lh(t, "validate", filepath.Join(b.dir, "task.hcl"))
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "task.hcl:4:14: error: Plugin ABI mismatch")
	require.Contains(t, errOut, "lhengine_v2")
}

// watchWriter collects what is written to it and closes seen once it has
// received want: a test waits on seen instead of sleeping.
type watchWriter struct {
	mu   sync.Mutex
	buf  bytes.Buffer
	want string
	seen chan struct{}
	once sync.Once
}

func newWatchWriter(want string) *watchWriter {
	return &watchWriter{want: want, seen: make(chan struct{})}
}

func (w *watchWriter) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	n, err := w.buf.Write(b)
	if strings.Contains(w.buf.String(), w.want) {
		w.once.Do(func() { close(w.seen) })
	}
	return n, err
}

func (w *watchWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

// TestFailureTextsSayItOnce: the failure of a step without items names no
// item, status says it once, and cancelling a finished task says so in
// plain words; a fan-out item's failure still names its item.
func TestFailureTextsSayItOnce(t *testing.T) {
	t.Parallel()
	b := setupCLI(t, `
task "fails" {
  step "a" {
    plugin = "step.wasm"
    input  = { mode = "fail_until", ok_at = 9 }
    retry { attempts = 1 }
  }
}
`)
	code, out, _ := b.lh(t, "run", filepath.Join(b.dir, "task.hcl"))
	require.Equal(t, 1, code)
	id := strings.TrimPrefix(strings.Split(out, "\n")[0], "task ")
	want := `step "a" attempt 1: plugin_error: plugin step.wasm: attempt 1 fails on purpose`
	require.Contains(t, out, "task "+id+" failed: 0/1 units ("+want+")\n")

	code, out, _ = b.lh(t, "status", id)
	require.Equal(t, 0, code)
	require.Contains(t, out, "\n  reason:      "+want+"\n")
	require.NotContains(t, out, "failure:", "the reason already says it")
	require.NotContains(t, out, "item 0")

	code, out, errOut := b.lh(t, "cancel", id)
	require.Equal(t, 1, code, out)
	require.Equal(t, "error: task "+id+" has already failed: there is nothing to cancel\n", errOut)

	fan := setupCLI(t, `
task "fanfail" {
  step "each" {
    plugin   = "step.wasm"
    for_each = range(1)
    input    = { mode = "fail_until", ok_at = 9 }
    retry { attempts = 1 }
  }
}
`)
	code, out, _ = fan.lh(t, "run", filepath.Join(fan.dir, "task.hcl"))
	require.Equal(t, 1, code)
	require.Contains(t, out, `(step "each" item 0 attempt 1: plugin_error: plugin step.wasm: attempt 1 fails on purpose)`)
}
