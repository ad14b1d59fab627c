package main

import (
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/lhengine/lhengine/api"
	"github.com/lhengine/lhengine/cmd/lhengine/internal/home"
	"github.com/lhengine/lhengine/cmd/lhengine/internal/render"
)

func (a *app) approvalsCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "approvals [ID]",
		Short: "The approvals waiting for a person (every task's), or all of one task's",
		Long: `approvals lists what waits for a person's decision: without ID, the pending
approvals of every task that has not finished; with ID, every approval of
that task, decided or not. Each has an id: decide with
"lhengine approve ID APPROVAL" or "lhengine reject ID APPROVAL".

A step's approval block asks before each of its units runs (when its "when"
holds); a plugin can ask too (approval.request). The subject is what the
decision is about; a unit runs on an approval only while its subject's
sha256 is the one approved.

-o json prints a list of approval objects: id, task, step, item, prompt,
subject, subject_sha256, created, expires, state (pending, approved,
rejected, expired or voided), decided_by, decided_at, note, void.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ref := ""
			if len(args) == 1 {
				ref = args[0]
			}
			return a.withClient(cmd.Context(), func(c *api.Client) error {
				as, err := c.Approvals(cmd.Context(), ref)
				if err != nil {
					return err
				}
				if as == nil {
					as = []api.Approval{}
				}
				if a.json() {
					return a.printJSON(as)
				}
				if len(as) == 0 {
					fmt.Fprintln(a.stdout, "no approvals waiting")
					if ref != "" {
						fmt.Fprintf(a.stdout, "task %s has asked for none\n", ref)
					}
					return nil
				}
				tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "TASK\tAPPROVAL\tSTEP\tITEM\tSTATE\tPROMPT\tSUBJECT\tEXPIRES\tDECIDED")
				for _, ap := range as {
					expires := "never"
					if !ap.Expires.IsZero() {
						expires = ap.Expires.Local().Format("2006-01-02 15:04")
					}
					decided := ""
					if ap.Decided() {
						decided = ap.DecidedBy
						if ap.Note != "" {
							decided += ": " + ap.Note
						}
					} else if ap.Void != "" {
						decided = ap.Void
					}
					fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\n", ap.Task, ap.ID, ap.Step, ap.Item, ap.State,
						render.OneLine(ap.Prompt, 60), render.OneLine(string(ap.Subject), 40), expires, render.OneLine(decided, 60))
				}
				return tw.Flush()
			})
		},
	}
}

func (a *app) decideCmd(approve bool) *cobra.Command {
	verb, done, effect := "reject", "rejected", "its unit fails with the note as its reason (or goes to its step's repair)"
	if approve {
		verb, done, effect = "approve", "approved", "its unit runs on it"
	}
	var note string
	cmd := &cobra.Command{
		Use:   verb + " ID APPROVAL",
		Short: fmt.Sprintf("%s what a task waits for: %s", titleCase(verb), effect),
		Long: fmt.Sprintf(`%s records your decision on approval APPROVAL of task ID (lhengine approvals
lists them), as you (your OS user; over TCP, the name of your token), with
--note. Then %s. Only a pending approval that has not expired takes a
decision, once.

Whichever process works the home runs the unit next; when none does (the
run that asked has returned with exit code 3), continue with
"lhengine resume ID".`, verb, effect),
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.withSession(cmd.Context(), home.Mode{}, func(s *home.Session) error {
				d, err := s.Client.Decide(cmd.Context(), args[0], args[1], approve, api.DecideRequest{By: who(), Note: note})
				if err != nil {
					return err
				}
				if a.json() {
					return a.printJSON(d)
				}
				ap := d.Approval
				fmt.Fprintf(a.stdout, "approval %s of task %s %s by %s at %s\n", ap.ID, ap.Task, done, ap.DecidedBy, ap.DecidedAt.Local().Format(time.DateTime))
				if s.Local() || !d.Task.Worked {
					fmt.Fprintf(a.stdout, "no process works task %s now; continue with: lhengine resume %s\n", ap.Task, ap.Task)
				}
				return nil
			})
		},
	}
	cmd.Flags().StringVar(&note, "note", "", "why (kept with the decision; a rejection's reason)")
	return cmd
}

// titleCase capitalises the first letter of an ASCII word.
func titleCase(s string) string {
	if s == "" || s[0] < 'a' || s[0] > 'z' {
		return s
	}
	return string(s[0]-'a'+'A') + s[1:]
}
