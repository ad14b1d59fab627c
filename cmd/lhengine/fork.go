package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/lhengine/lhengine/cmd/lhengine/internal/home"
)

func (a *app) forkCmd() *cobra.Command {
	var at string
	cmd := &cobra.Command{
		Use:   "fork ID",
		Short: "Start a new task from a checkpoint of another, with its outputs and workspace (--at STEP)",
		Long: `fork starts a new task, with a new id, from a checkpoint of task ID: time
travel for debugging an agent. The original is not changed.

--at STEP (a step name or its 1-based number: the step the task is at or
an earlier one, or any step of a succeeded task) copies the outputs of the
steps before STEP, as committed, with the artifacts they put, and the
workspace as it was when the step before STEP completed (its snapshot);
the new task starts at STEP. Without --at the fork starts at the task's
last checkpoint: the end of a succeeded task (the fork has succeeded at
once, its outputs and workspace those of the end), else the step it is at.

The new task pins the same manifest (plugins, policies, task source),
environment facts and limits, and runs like any other: work it with
lhengine resume NEW_ID, or a worker or serve. Its first event and
lhengine status -o json (forked_from) say where it came from.

fork opens the home itself: stop the process that owns it (serve, a
worker) first.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.withSession(cmd.Context(), home.Mode{Own: true}, func(s *home.Session) error {
				if !s.Local() {
					return fmt.Errorf("home %s is owned by %s: fork opens the home itself; stop that process first", a.home, s.Owner)
				}
				t, err := s.Engine.Fork(cmd.Context(), args[0], at, who())
				if err != nil {
					return err
				}
				if a.json() {
					return a.printJSON(t)
				}
				where := "at its end"
				if f := t.ForkedFrom; f != nil && f.Step != "" {
					where = fmt.Sprintf("at step %d %q", f.StepIndex+1, f.Step)
				}
				fmt.Fprintf(a.stdout, "task %s\nforked from %s %s", t.ID, t.ForkedFrom.Task, where)
				if t.ForkedFrom.Workspace > 0 {
					fmt.Fprintf(a.stdout, " with its workspace snapshot %d", t.ForkedFrom.Workspace)
				}
				fmt.Fprintf(a.stdout, "; %s (lhengine resume %s works it)\n", t.Status, t.ID)
				return nil
			})
		},
	}
	cmd.Flags().StringVar(&at, "at", "", "the step the new task starts at, by name or 1-based number (default: the task's last checkpoint)")
	return cmd
}
