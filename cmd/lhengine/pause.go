package main

import (
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/lhengine/lhengine/api"
	"github.com/lhengine/lhengine/cmd/lhengine/internal/render"
)

func (a *app) pauseCmd() *cobra.Command {
	var reason string
	var grace time.Duration
	cmd := &cobra.Command{
		Use:   "pause ID",
		Short: "Pause a task: claim nothing more of it, let units in flight finish, then paused",
		Long: `pause stops claiming new units of the task at once; other tasks of the home go
on. Units in flight get --grace to finish and commit; those still running
then are given back uncharged and run again after the resume. pause returns
once nothing of the task runs, with the task paused (reason: paused by you,
and --reason). "lhengine resume ID" continues it.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if grace < 0 {
				return &exitError{code: exitUsage, err: fmt.Errorf("--grace %s: want 0 or more", grace)}
			}
			return a.withClient(cmd.Context(), func(c *api.Client) error {
				t, err := c.Pause(cmd.Context(), args[0], api.PauseRequest{Reason: reason, By: who(), Grace: grace.String()})
				if err != nil {
					return err
				}
				if a.json() {
					return a.printJSON(t)
				}
				done, total := t.Progress()
				fmt.Fprintf(a.stdout, "task %s %s at %d/%d units%s\ncontinue with: %s\n", t.ID, t.Status, done, total, reasonSuffix(t), render.Continue(t))
				return nil
			})
		},
	}
	cmd.Flags().StringVar(&reason, "reason", "", "why (kept with the pause)")
	cmd.Flags().DurationVar(&grace, "grace", defaultGrace, "how long units in flight may run on to finish and commit before they are given back")
	return cmd
}

// errStopped ends the following of a task that paused or waits for a
// person: the command returns and says how to continue.
var errStopped = errors.New("the task paused")

// stopsFollowing reports whether run or resume returns on a task in
// status st: it finished, or it waits for a person.
func stopsFollowing(st api.Status) bool {
	return st == api.Paused || st == api.WaitingApproval
}
