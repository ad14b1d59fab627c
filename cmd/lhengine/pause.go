package main

import (
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/lhengine/lhengine/api"
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
				fmt.Fprintf(a.stdout, "task %s %s at %d/%d units%s\ncontinue with: %s\n", t.ID, t.Status, done, total, reasonSuffix(t), continueCommand(t))
				return nil
			})
		},
	}
	cmd.Flags().StringVar(&reason, "reason", "", "why (kept with the pause)")
	cmd.Flags().DurationVar(&grace, "grace", defaultGrace, "how long units in flight may run on to finish and commit before they are given back")
	return cmd
}

// continueCommand is the command that continues a paused task: a budget
// that paused it is raised by its own limit again (wall_time as a
// duration); a step's repair.max by one repair.
func continueCommand(t *api.Task) string {
	cmd := "lhengine resume " + t.ID
	if t.Status == api.WaitingApproval {
		return fmt.Sprintf("lhengine approvals %s, then lhengine approve %s APPROVAL (or reject), then %s", t.ID, t.ID, cmd)
	}
	p := t.Pause
	if p == nil {
		return cmd
	}
	switch p.Kind {
	case api.PauseBudget:
		delta := strconv.FormatFloat(p.Limit, 'f', -1, 64)
		if p.Name == api.BudgetWallTime {
			delta = (time.Duration(p.Limit * float64(time.Second))).Round(time.Second).String()
		}
		return fmt.Sprintf("%s --budget %s=+%s", cmd, p.Name, delta)
	case api.PauseRepairs:
		return cmd + " --budget repairs=+1"
	}
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
