package main

import (
	"errors"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/lhengine/lhengine/api"
	"github.com/lhengine/lhengine/engine"
)

// replayFlag is --model-replay of run and submit: part of the submission.
type replayFlag struct{ dir string }

func (f *replayFlag) register(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.dir, "model-replay", "", "answer the task's model calls from the responses recorded in `DIR` and send nothing: "+
		"they are copied into the store with the task at submit, so the folder may change or go afterwards; a call with no recording fails, naming its request's sha256")
}

// apply sets req's replay folder, made absolute: the owner may run
// elsewhere.
func (f *replayFlag) apply(req *api.SubmitRequest) error {
	if f.dir == "" {
		return nil
	}
	abs, err := filepath.Abs(f.dir)
	if err != nil {
		return err
	}
	req.ModelReplay = abs
	return nil
}

// recordFlag is --model-record of the commands that work tasks in this
// process (run, resume, worker, serve).
type recordFlag struct{ dir string }

func (f *recordFlag) register(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.dir, "model-record", "", "record every live model response of the tasks this process works in `DIR`, for a later --model-replay")
}

// apply puts the flag into o. Recording in a session whose owner is
// another process is an error: that process works the task with its own
// options.
func (f *recordFlag) apply(o *engine.WorkOptions, local bool) error {
	if f.dir == "" {
		return nil
	}
	if !local {
		return errors.New("--model-record applies to the tasks this process works; another process owns the home and works them with its own options (start it with --model-record)")
	}
	o.ModelRecord = f.dir
	return nil
}
