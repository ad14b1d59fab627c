package engine

import (
	"context"
	"fmt"
	"strconv"

	"github.com/lhengine/lhengine/ledger"
)

// Fork starts a new task from a checkpoint of task id (ledger.Workspaces,
// Fork): at names the step it starts at, by name or 1-based number, with
// the outputs of the steps before it and the workspace snapshot taken when
// the step before it completed; "" forks from the task's last checkpoint
// (its end if it succeeded, else the step it is at). The new task pins the
// same manifest and runs like any other; the original is not changed. by
// says who forked it, for its event log.
func (e *Engine) Fork(ctx context.Context, id, at, by string) (*ledger.Task, error) {
	t, err := e.store.Task(ctx, id)
	if err != nil {
		return nil, err
	}
	step := -1
	if at != "" {
		if step = t.StepIndex(at); step < 0 {
			n, err := strconv.Atoi(at)
			if err != nil || n < 1 || n > len(t.Steps) {
				return nil, fmt.Errorf("task %s has no step %q (name a step, or give its number, 1 to %d)", id, at, len(t.Steps))
			}
			step = n - 1
		}
	}
	if err := e.CheckPlugins(id); err != nil {
		return nil, err
	}
	return e.store.Fork(ctx, t.ID, step, by)
}
