package main

import (
	"errors"

	"github.com/spf13/cobra"

	"github.com/lhengine/lhengine/engine"
)

// modelFlags are --model-replay and --model-record of the commands that
// work a task in this process (run, resume, worker).
type modelFlags struct {
	replay, record string
}

func (f *modelFlags) register(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.replay, "model-replay", "", "answer model calls from the responses recorded in `DIR` and send nothing; a call with no recording fails, naming its request's sha256")
	cmd.Flags().StringVar(&f.record, "model-record", "", "record every live model response in `DIR`, for --model-replay")
}

// apply puts the flags into o. Replaying and recording at once is an
// error, and so is either in a session whose owner is another process,
// which works the task with its own options.
func (f *modelFlags) apply(o *engine.WorkOptions, local bool) error {
	if f.replay == "" && f.record == "" {
		return nil
	}
	if f.replay != "" && f.record != "" {
		return errors.New("--model-replay and --model-record exclude each other: a replayed call sends nothing to record")
	}
	if !local {
		return errors.New("--model-replay and --model-record apply to a task this process works; another process owns the home and works it with its own options")
	}
	o.ModelReplay, o.ModelRecord = f.replay, f.record
	return nil
}
