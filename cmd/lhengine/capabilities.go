package main

import (
	"fmt"
	"io"
	"os"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/lhengine/lhengine/api"
)

func (a *app) artifactsCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "artifacts ID",
		Short: "A task's artifacts with their provenance",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.withClient(cmd.Context(), func(c *api.Client) error {
				ps, err := c.Artifacts(cmd.Context(), args[0])
				if err != nil {
					return err
				}
				if a.json() {
					if ps == nil {
						ps = []api.Provenance{}
					}
					return a.printJSON(ps)
				}
				tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "REF\tNAME\tTYPE\tSIZE\tSTEP[ITEM]\tATTEMPT\tPLUGIN\tINPUT\tTIME")
				for _, p := range ps {
					fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s[%d]\t%d\t%.12s\t%.12s\t%s\n", p.Ref, p.Name, p.MediaType, p.Size,
						p.Step, p.Item, p.Attempt, p.PluginSHA256, p.InputSHA256, p.Time.Local().Format(time.DateTime))
				}
				return tw.Flush()
			})
		},
	}
}

func (a *app) artifactCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "artifact", Short: "Read one artifact"}
	var out string
	get := &cobra.Command{
		Use:   "get REF",
		Short: "Write an artifact's bytes to stdout or --out FILE",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.withClient(cmd.Context(), func(c *api.Client) error {
				body, size, err := c.Artifact(cmd.Context(), args[0])
				if err != nil {
					return err
				}
				defer body.Close()
				var w io.Writer = a.stdout
				if out != "" {
					f, err := os.Create(out)
					if err != nil {
						return err
					}
					defer f.Close()
					w = f
				}
				n, err := io.Copy(w, body)
				if err == nil && size >= 0 && n != size {
					err = fmt.Errorf("artifact %s: got %d of its %d bytes", args[0], n, size)
				}
				return err
			})
		},
	}
	get.Flags().StringVar(&out, "out", "", "write to this file instead of stdout")
	cmd.AddCommand(get)
	return cmd
}

func (a *app) effectsCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "effects ID",
		Short: "A task's effect journal: intents, outcomes, and effects waiting for a human",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.withClient(cmd.Context(), func(c *api.Client) error {
				es, err := c.Effects(cmd.Context(), args[0])
				if err != nil {
					return err
				}
				if a.json() {
					if es == nil {
						es = []api.Effect{}
					}
					return a.printJSON(es)
				}
				tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "STEP[ITEM]\tKEY\tKIND\tMODE\tSTATE\tPERFORMED\tIDEMPOTENCY KEY\tNOTE")
				for _, e := range es {
					fmt.Fprintf(tw, "%s[%d]\t%s\t%s\t%s\t%s\t%d\t%s\t%s\n", e.StepName, e.Item, e.Key, e.Kind, e.Mode, e.State, e.Performs, e.IdempotencyKey, e.Note)
				}
				return tw.Flush()
			})
		},
	}
}

func (a *app) effectCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "effect", Short: "Settle an effect whose outcome is unknown (mode manual)"}
	for _, confirm := range []bool{true, false} {
		var item int
		var note string
		use, short := "retry ID STEP KEY", "The effect did not happen: the next attempt performs it again, under the same idempotency key"
		if confirm {
			use, short = "confirm ID STEP KEY", "The effect happened: record it as done so it is never performed again"
		}
		c := &cobra.Command{
			Use:   use,
			Short: short,
			Args:  cobra.ExactArgs(3),
			RunE: func(cmd *cobra.Command, args []string) error {
				return a.withClient(cmd.Context(), func(c *api.Client) error {
					t, err := c.Task(cmd.Context(), args[0])
					if err != nil {
						return err
					}
					eff, err := c.Settle(cmd.Context(), t.ID, confirm, api.SettleRequest{Step: args[1], Item: item, Key: args[2], Note: note})
					if err != nil {
						return err
					}
					if a.json() {
						return a.printJSON(eff)
					}
					next := fmt.Sprintf("continue with: lhengine resume %s", t.ID)
					if t.Worked {
						next = "the worker that runs the task goes on with it"
					}
					fmt.Fprintf(a.stdout, "effect %q of task %s settled; %s\n", args[2], t.ID, next)
					return nil
				})
			},
		}
		c.Flags().IntVar(&item, "item", 0, "fan-out item index")
		c.Flags().StringVar(&note, "note", "", "why (kept in the journal)")
		cmd.AddCommand(c)
	}
	return cmd
}
