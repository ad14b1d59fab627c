package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/lhengine/lhengine/cmd/lhengine/internal/home"
	"github.com/lhengine/lhengine/engine"
)

// A command that works tasks (serve, worker, run, resume) stops in two
// stages, like docker stop. The first SIGTERM or Ctrl-C ends the command's
// context: its workers claim nothing more, the units in flight get up to
// --grace to finish and commit, and those still running then are given
// back without charging their attempt; the API goes on answering until
// then, and its requests in flight get the same grace as it stops. A
// second signal ends halt: everything still running is cut short at once
// (and given back the same way).

// workStop is how a command that works tasks stops.
type workStop struct {
	halt  context.Context // ends at the second signal; nil: never
	grace time.Duration   // --grace
}

// defaultGrace is --grace's default.
const defaultGrace = 30 * time.Second

// registerGrace adds --grace to a command that works tasks.
func (a *app) registerGrace(cmd *cobra.Command) {
	cmd.Flags().DurationVar(&a.stop.grace, "grace", defaultGrace,
		"on SIGTERM or Ctrl-C: how long units in flight may run on to finish; those still running then are given back, "+
			"their attempts not charged (0: at once; a second signal stops at once)")
}

// halted is the context a second signal ends.
func (s workStop) halted() context.Context {
	if s.halt == nil {
		return context.Background()
	}
	return s.halt
}

// work runs o on the engine this process owns until ctx ends (the first
// signal), which stops it gracefully (workStop), or until it runs out of
// work. What the stop does is said on w. A stop is not an error.
func (a *app) work(ctx context.Context, s *home.Session, o engine.WorkOptions, w io.Writer) error {
	grace := a.stop.grace
	o.Stop, o.Grace = ctx.Done(), grace
	o.OnStopping = func(n int) {
		fmt.Fprintf(w, "stopping: claiming no more units; %d in flight may run %s more to finish (SIGTERM or Ctrl-C again stops at once)\n",
			n, grace)
	}
	o.OnStopped = func(r engine.StopReport) {
		fmt.Fprintf(w, "stopped: %d %s finished, %d given back (they run again, their attempts not charged)\n",
			r.Finished, plural(r.Finished, "unit", "units"), r.GivenBack)
	}
	wctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	defer context.AfterFunc(a.stop.halted(), cancel)()
	err := s.Engine.Work(wctx, o)
	if err != nil && ctx.Err() != nil && errors.Is(err, context.Canceled) {
		return nil // halted
	}
	return err
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
