package main

import (
	"fmt"
	"os"
	"os/user"

	"github.com/spf13/cobra"

	"github.com/lhengine/lhengine/api"
)

func (a *app) retryCmd() *cobra.Command {
	var (
		conc int
		from string
	)
	cmd := &cobra.Command{
		Use:   "retry ID",
		Short: "Re-open a failed or cancelled task at the step it stopped at (or --from an earlier one) and work it to the end",
		Long: `retry re-opens a failed or cancelled task and works it to the end, like resume.
It starts again at the step where the task stopped, or at the earlier step named
by --from; every output committed before that step is kept and not run again.
Counters, notes and the totals of attempts, failures and repairs are kept;
consecutive failures start from zero. The event log records who retried it.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.withWorker(cmd.Context(), false, func(s *session) error {
				t, err := s.c.Retry(cmd.Context(), args[0], api.RetryRequest{From: from, By: who()})
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
	cmd.Flags().StringVar(&from, "from", "", "the step to start again from (default: the step the task stopped at)")
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
