package engine_test

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestProgressStepChosenAtSubmit: the progress block's step is pinned with
// the task; without one the largest fan-out known at submit is counted
// (here the one over var.pages, not the smaller one before it nor the one
// over an output); a task without fan-out counts every step's units.
func TestProgressStepChosenAtSubmit(t *testing.T) {
	t.Parallel()
	const steps = `
  variable "pages" {
    default = 12
  }
  step "small" {
    plugin   = "step.wasm"
    for_each = range(3)
    input    = { mode = "item" }
  }
  step "big" {
    plugin   = "step.wasm"
    for_each = range(var.pages)
    input    = { mode = "item" }
  }
  step "later" {
    plugin   = "step.wasm"
    for_each = step.big.output
    input    = { mode = "item" }
  }
`
	b := setup(t, `task "audit" {`+steps+`}`)
	task := b.submit(t, nil)
	require.Equal(t, "big", task.Meter.Step)
	require.Equal(t, 1, task.Meter.StepIndex)
	require.Equal(t, "units", task.Meter.Unit)
	task = b.submit(t, map[string]string{"pages": "2"})
	require.Equal(t, "small", task.Meter.Step, "with 2 pages the first fan-out is the largest")

	b = setup(t, `task "audit" {
  progress {
    unit   = "pages"
    step   = "later"
    labels = { missing_title = "pages without a title" }
  }`+steps+`}`)
	task = b.submit(t, nil)
	require.Equal(t, "later", task.Meter.Step)
	require.Equal(t, 2, task.Meter.StepIndex)
	require.Equal(t, "pages", task.Meter.Unit)
	require.Equal(t, map[string]string{"missing_title": "pages without a title"}, task.Meter.Labels)

	b = setup(t, `task "one" {
  step "a" {
    plugin = "step.wasm"
  }
}`)
	task = b.submit(t, nil)
	require.Equal(t, -1, task.Meter.StepIndex, "no fan-out: every step's units")
}
