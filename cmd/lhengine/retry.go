package main

import (
	"fmt"
	"os"
	"os/user"

	"github.com/spf13/cobra"

	"github.com/lhengine/lhengine/api"
	"github.com/lhengine/lhengine/cmd/lhengine/internal/home"
)

func (a *app) retryCmd() *cobra.Command {
	var (
		conc int
		from string
	)
	cmd := &cobra.Command{
		Use:   "retry ID",
		Short: "Re-open a failed or cancelled task where it stopped, or one with failed items (or --from a step, run again) and work it to the end",
		Long: `retry re-opens a failed or cancelled task, or one with failed items, and works
it to the end, like resume.

Without --from it goes on at the step where the task stopped: every unit
committed is kept and not run again (a fan-out cancelled at 433 of 600 items
runs the other 167), and the units that did not commit run: the one that
failed, those cut short by the stop, those not started. A task with failed
items (a fan-out step's allow_failures tolerated them, lhengine failures ID
lists them; it may have succeeded) goes back to the first step with failed
items: only those items run again, the step's committed items are kept, and
the steps after it run again with the completed list.

--from STEP (the step where it stopped, or an earlier one) runs that step
and every step after it again from the start, committed units included;
outputs committed before STEP are kept. The progress counts the steps run
again had reported are withdrawn, and their units count again as they
commit: counts never add up twice.

Either way every unit gets its step's whole retry budget (retry.attempts)
again; attempt numbers go on. Notes and the totals of attempts, failures and
repairs are kept; consecutive failures start from zero. The event log
records who retried it.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.withWorker(cmd.Context(), false, func(s *home.Session) error {
				t, err := s.Client.Retry(cmd.Context(), args[0], api.RetryRequest{From: from, By: who()})
				if err != nil {
					return err
				}
				if !a.json() {
					fmt.Fprintf(a.stdout, "task %s retried from step %q\n", t.ID, t.Steps[t.Cursor].Name)
				}
				return a.workTask(cmd.Context(), s, t.ID, conc, recordFlag{})
			})
		},
	}
	cmd.Flags().StringVar(&from, "from", "", "run this step (where the task stopped, or an earlier one) and the ones after it again, committed units included (default: go on where it stopped, keeping its committed units)")
	cmd.Flags().IntVar(&conc, "concurrency", defaultConcurrency, "attempts run at once")
	return cmd
}

// who names the person running the command, for the event log.
func who() string {
	name := "unknown"
	if u, err := user.Current(); err == nil {
		name = u.Username
	}
	if h, err := os.Hostname(); err == nil {
		name += "@" + h
	}
	return name
}
