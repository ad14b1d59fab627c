package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/lhengine/lhengine/api"
	"github.com/lhengine/lhengine/cmd/lhengine/internal/render"
)

func (a *app) notesCmd() *cobra.Command {
	var q api.NotesQuery
	cmd := &cobra.Command{
		Use:   "notes ID",
		Short: "Page through a task's findings, decisions and blockers",
		Long: `Page through the notes a task's units recorded (findings, decisions,
blockers, a compaction's summaries), oldest first, one a line:

  SEQ  TIME  KIND  STEP[ITEM]  TEXT

--kind, --step and --grep (text contained, ignoring case) select notes;
--limit is the most notes a page shows (default 100, at most 1,000) and
--from the seq a page starts at. A page that does not reach the last note
ends with the command that shows the next one. -o json gives the page:
{"task", "notes", "next", "total"} (next 0: no page after it).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.withClient(cmd.Context(), func(c *api.Client) error {
				page, err := c.Notes(cmd.Context(), args[0], q)
				if err != nil {
					return err
				}
				if a.json() {
					return a.printJSON(page)
				}
				for _, n := range page.Notes {
					fmt.Fprintf(a.stdout, "%5d %s %-8s %s[%d] %s\n", n.Seq, n.Time.Local().Format(time.DateTime), n.Kind, n.Step, n.Item, render.OneLine(n.Text, 400))
				}
				if len(page.Notes) == 0 {
					fmt.Fprintln(a.stdout, "no note matches")
				}
				if page.Next > 0 {
					next := fmt.Sprintf("lhengine notes %s --from %d", page.Task, page.Next)
					for _, f := range [][2]string{{"--kind", q.Kind}, {"--step", q.Step}, {"--grep", q.Grep}} {
						if f[1] != "" {
							next += fmt.Sprintf(" %s %q", f[0], f[1])
						}
					}
					if q.Limit > 0 {
						next += fmt.Sprintf(" --limit %d", q.Limit)
					}
					fmt.Fprintf(a.stdout, "more: %s\n", next)
				}
				return nil
			})
		},
	}
	cmd.Flags().StringVar(&q.Kind, "kind", "", "only notes of this kind (finding, decision, blocker, summary, ...)")
	cmd.Flags().StringVar(&q.Step, "step", "", "only notes of this step")
	cmd.Flags().StringVar(&q.Grep, "grep", "", "only notes whose text contains this, ignoring case")
	cmd.Flags().Uint64Var(&q.From, "from", 0, "the seq the page starts at")
	cmd.Flags().IntVar(&q.Limit, "limit", 0, "the most notes the page shows (0: 100)")
	return cmd
}
