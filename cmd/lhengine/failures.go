package main

import (
	"fmt"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/lhengine/lhengine/api"
	"github.com/lhengine/lhengine/cmd/lhengine/internal/render"
)

func (a *app) failuresCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "failures ID",
		Short: "The failed items a fan-out step's allow_failures tolerated: item, input, failure kind and reason",
		Long: `failures lists the items of the task's fan-out steps that failed beyond
their retries and that the step's allow_failures tolerated: the step
completed without them, and later steps did not see them. For each: the
step, the item number, a summary of its input (each.value), the attempt that
failed last, the failure kind and its reason. lhengine retry ID runs only
these items again (and the steps after them).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.withClient(cmd.Context(), func(c *api.Client) error {
				fs, err := c.Failures(cmd.Context(), args[0])
				if err != nil {
					return err
				}
				if fs == nil {
					fs = []api.FailedItem{}
				}
				if a.json() {
					return a.printJSON(fs)
				}
				if len(fs) == 0 {
					fmt.Fprintln(a.stdout, "no failed items")
					return nil
				}
				tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "STEP\tITEM\tINPUT\tATTEMPT\tKIND\tREASON")
				for _, f := range fs {
					kind, reason := "", ""
					if f.Failure != nil {
						kind, reason = string(f.Failure.Kind), f.Failure.Message
					}
					fmt.Fprintf(tw, "%s\t%d\t%s\t%d\t%s\t%s\n", f.Step, f.Item, render.OneLine(string(f.Value), 40), f.Attempt, kind, render.OneLine(reason, 80))
				}
				return tw.Flush()
			})
		},
	}
}
