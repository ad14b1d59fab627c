package worker

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/hashicorp/go-hclog"

	"github.com/lhengine/lhengine/engine/internal/plan"
	"github.com/lhengine/lhengine/engine/internal/taskfile"
	"github.com/lhengine/lhengine/fault"
	"github.com/lhengine/lhengine/ledger"
)

// driftedError: the task's environment changed and its on_drift pauses
// the task or sends it back to an earlier step, so the unit does not run
// now; its lease was given back uncharged (store.CheckFacts). Task is the
// task as that left it.
type driftedError struct{ task *ledger.Task }

func (e *driftedError) Error() string { return "environment drift: " + string(e.task.Status) }

// checkFacts reads the task's environment facts before the unit of lease
// l runs, and has the store compare them with the recorded ones and apply
// the task's on_drift when one changed. It returns the values the unit
// runs under (nil for a task without an environment block), a
// *driftedError when the unit must not run, or a failure of kind input
// when a fact cannot be read.
func (w *Worker) checkFacts(ctx context.Context, l ledger.Lease, sp *plan.Spec, log hclog.Logger) (map[string]string, error) {
	env := sp.Task.Environment
	if env == nil {
		return nil, nil
	}
	values, err := env.ReadFacts(func(f *taskfile.Fact) (string, error) {
		pin, ok := sp.Manifest.Plugins[plan.FactPluginKey(f.Name)]
		if !ok {
			return "", fault.New(fault.PluginMissing, "the run manifest pins no plugin for fact %q", f.Name)
		}
		p, err := w.plugin(ctx, pin)
		if err != nil {
			return "", err
		}
		return plan.RunFact(ctx, p, sp.Task.Name, f)
	})
	if err != nil {
		return nil, fault.Wrap(fault.Input, err, "reading the task's environment: "+err.Error())
	}
	on := ledger.OnDrift{Name: env.OnDrift}
	switch env.OnDrift {
	case taskfile.OnDriftPause:
		on.Pause = true
	case taskfile.OnDriftRestart:
		on.Name += ":" + env.RestartFrom
		on.Restart = true
		on.RestartFrom = slices.IndexFunc(sp.Task.Steps, func(s *taskfile.Step) bool { return s.Name == env.RestartFrom })
		if on.RestartFrom < 0 {
			return nil, fault.New(fault.Internal, "on_drift names step %q, which the task does not have", env.RestartFrom)
		}
	}
	changes, run, task, err := w.cfg.Store.CheckFacts(ctx, l, values, on)
	if errors.Is(err, ledger.ErrLeaseLost) {
		return nil, fmt.Errorf("%w: %v", errLeaseRanOut, err)
	}
	if err != nil {
		return nil, fault.Wrap(fault.Internal, err, "recording the task's environment: "+err.Error())
	}
	for _, c := range changes {
		log.Warn("environment drift", "fact", c.Name, "old", c.Old, "new", c.New, "on_drift", c.Action)
	}
	if !run {
		return nil, &driftedError{task: task}
	}
	return values, nil
}
