package plan

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/lhengine/lhengine/fault"
	"github.com/lhengine/lhengine/ledger"
	"github.com/lhengine/lhengine/store"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fanInTask lists items, works each, then gathers every item's output.
const fanInTask = `
task "fan-in" {
  variable "items" { type = list(number) }
  step "list" {
    plugin = "p.wasm"
    input  = { n = length(var.items) }
  }
  step "each" {
    plugin   = "p.wasm"
    for_each = var.items
    input    = { i = each.value }
  }
  step "gather" {
    plugin = "p.wasm"
    input  = { all = step.each.output }
  }
}
`

type bundle struct {
	st    *store.Store
	cache *Cache
	ctx   context.Context
}

func setup(t *testing.T) *bundle {
	t.Helper()
	c := NewCache()
	st, err := store.Open("", store.Options{InMemory: true, Planner: c.Planner()})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, st.Close()) })
	return &bundle{st: st, cache: c, ctx: context.Background()}
}

func (b *bundle) submit(t *testing.T, src string, n int) *ledger.Task {
	t.Helper()
	items := make([]int, n)
	for i := range items {
		items[i] = i
	}
	raw, err := json.Marshal(items)
	require.NoError(t, err)
	m := ledger.Manifest{Filename: "task.hcl", Source: []byte(src),
		Vars: map[string]json.RawMessage{"items": raw}}
	task, _, err := b.st.Submit(b.ctx, ledger.NewTask{Name: "fan-in", Manifest: m, Steps: []ledger.StepState{
		{Name: "list", Limit: 1}, {Name: "each", FanOut: true, Limit: 64}, {Name: "gather", Limit: 1}}})
	require.NoError(t, err)
	return task
}

// work commits every unit of the task's current step with output out(item).
func (b *bundle) work(t *testing.T, id string, out func(item int) string) *ledger.Task {
	t.Helper()
	var task *ledger.Task
	for {
		c, err := b.st.Claim(b.ctx, ledger.ClaimRequest{Owner: b.st.Owner("w"), Max: 64, LeaseFor: time.Minute, Task: id})
		require.NoError(t, err)
		if len(c.Leases) == 0 {
			return task
		}
		for _, l := range c.Leases {
			task, err = b.st.Commit(b.ctx, ledger.Result{Lease: l, Output: json.RawMessage(out(l.Item))})
			require.NoError(t, err)
		}
		if task.Cursor != c.Leases[0].Step {
			return task
		}
	}
}

func (b *bundle) input(t *testing.T, task *ledger.Task, step int) (json.RawMessage, error) {
	t.Helper()
	var in json.RawMessage
	var ierr error
	require.NoError(t, b.st.Read(func(r ledger.Reader) error {
		in, ierr = b.cache.Input(r, task, ledger.Lease{Task: task.ID, Step: step})
		return nil
	}))
	return in, ierr
}

func TestPlannerPlansTheForEachList(t *testing.T) {
	t.Parallel()
	b := setup(t)
	task := b.submit(t, fanInTask, 5)
	task = b.work(t, task.ID, func(int) string { return `"listed"` })
	require.Equal(t, 1, task.Cursor)
	require.True(t, task.Steps[1].Planned)
	require.Equal(t, 5, task.Steps[1].Units)
	task = b.work(t, task.ID, func(i int) string { return fmt.Sprint(i * 10) })
	require.Equal(t, 2, task.Cursor)
	in, err := b.input(t, task, 2)
	require.NoError(t, err)
	require.JSONEq(t, `{"all":[0,10,20,30,40]}`, string(in))
}

func TestFanInOverTheInputLimitIsTooLarge(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.cache.maxInputLen = 10 << 10
	task := b.submit(t, fanInTask, 20)
	task = b.work(t, task.ID, func(int) string { return `"listed"` })
	big, _ := json.Marshal(strings.Repeat("x", 1<<10))
	task = b.work(t, task.ID, func(int) string { return string(big) })
	require.Equal(t, 2, task.Cursor)
	_, err := b.input(t, task, 2)
	require.Error(t, err)
	require.Equal(t, fault.TooLarge, fault.KindOf(err), "20 outputs of 1 KiB exceed a 10 KiB input: %v", err)
	require.Contains(t, err.Error(), "input limit")
}

func TestCacheStaysBoundedOverManyTasks(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.cache.MaxSpecs = 50
	b.cache.MaxOutputs = 64 << 10
	out, _ := json.Marshal(strings.Repeat("y", 512))
	for range 300 {
		task := b.submit(t, fanInTask, 2)
		task = b.work(t, task.ID, func(int) string { return string(out) })
		task = b.work(t, task.ID, func(int) string { return string(out) })
		_, err := b.input(t, task, 2)
		require.NoError(t, err)
	}
	specs, outputs, size := b.cache.Len()
	require.LessOrEqual(t, specs, 50)
	require.LessOrEqual(t, size, int64(64<<10))
	require.Positive(t, outputs, "outputs are still cached within the bound")
}

func TestForgetDropsATask(t *testing.T) {
	t.Parallel()
	b := setup(t)
	task := b.submit(t, fanInTask, 2)
	b.work(t, task.ID, func(int) string { return `1` })
	specs, _, _ := b.cache.Len()
	require.Equal(t, 1, specs)
	b.cache.Forget(task.ID)
	specs, outputs, size := b.cache.Len()
	require.Zero(t, specs)
	require.Zero(t, outputs)
	require.Zero(t, size)
}

func TestPlannerStopsWhenCancelled(t *testing.T) {
	t.Parallel()
	b := setup(t)
	task := b.submit(t, fanInTask, 5_000)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	require.NoError(t, b.st.Read(func(r ledger.Reader) error {
		task.Cursor = 1
		_, err := b.cache.Planner()(ctx, r, task, 1)
		require.ErrorIs(t, err, context.Canceled)
		return nil
	}))
}

func TestPrepareHandsItsContextToModuleChecks(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "p.wasm"), []byte("\x00asm\x01\x00\x00\x00"), 0o644))
	path := filepath.Join(dir, "task.hcl")
	require.NoError(t, os.WriteFile(path, []byte(`
task "t" {
  step "a" {
    plugin = "p.wasm"
  }
}
`), 0o644))
	type key struct{}
	ctx := context.WithValue(context.Background(), key{}, "submit's context")
	var seen any
	_, err := Prepare(ctx, path, nil, func(ctx context.Context, _ string) error {
		seen = ctx.Value(key{})
		return nil
	})
	require.NoError(t, err)
	require.Equal(t, "submit's context", seen)
}

func TestForEachListOverThePlanLimitIsTooLarge(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.cache.maxPlanLen = 1 << 10
	task := b.submit(t, fanInTask, 500)
	task = b.work(t, task.ID, func(int) string { return `"listed"` })
	require.Equal(t, ledger.Failed, task.Status)
	require.Equal(t, fault.TooLarge, task.Failure.Kind)
	require.Contains(t, task.Reason, "for_each list")
}

// TestAUnitsInputDoesNotReadItsForEachSource: a fan-out over an earlier
// step's output plans from that output, but a unit's input gets its item
// from the unit: evaluating it must not read (and decode) the whole list
// again, which for a list too big for the cache meant decoding it once per
// unit.
func TestAUnitsInputDoesNotReadItsForEachSource(t *testing.T) {
	t.Parallel()
	const src = `
task "over-output" {
  step "list" {
    plugin = "p.wasm"
  }
  step "each" {
    plugin   = "p.wasm"
    for_each = step.list.output
    input    = { i = each.value }
  }
}
`
	b := setup(t)
	m := ledger.Manifest{Filename: "task.hcl", Source: []byte(src)}
	task, _, err := b.st.Submit(b.ctx, ledger.NewTask{Name: "over-output", Manifest: m, Steps: []ledger.StepState{
		{Name: "list", Limit: 1}, {Name: "each", FanOut: true, Limit: 64}}})
	require.NoError(t, err)
	task = b.work(t, task.ID, func(int) string { return `[5, 6, 7]` })
	require.Equal(t, 1, task.Cursor)
	b.cache.Forget(task.ID) // planning cached the list: start from nothing
	var in json.RawMessage
	require.NoError(t, b.st.Read(func(r ledger.Reader) error {
		units, err := r.Units(task.ID, 1)
		require.NoError(t, err)
		require.Len(t, units, 3)
		in, err = b.cache.Input(r, task, ledger.Lease{Task: task.ID, Step: 1, Item: 1, Unit: *units[1]})
		return err
	}))
	require.JSONEq(t, `{"i":6}`, string(in))
	_, outputs, _ := b.cache.Len()
	require.Zero(t, outputs, "the unit's input read no earlier output")
}
