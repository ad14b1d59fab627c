package main

import (
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/lhengine/lhengine/api"
	"github.com/lhengine/lhengine/cmd/lhengine/internal/home"
)

func (a *app) rmCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "rm ID [ID...]",
		Short: "Remove finished tasks: their records, outputs, events and workspaces (gc frees their artifacts)",
		Long: `rm removes finished (succeeded, failed or cancelled) tasks completely: the task
record, manifest, units, attempts, events, notes, effect journal, key/value
entries, artifact provenance and idempotency key, then the task's workspace.
A task that may still run is refused: cancel it first. Artifacts and modules
the tasks referred to are freed by "lhengine gc" once no task refers to them.
An rm that was interrupted can be run again.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			type removed struct {
				ID    string `json:"id"`
				Error string `json:"error,omitempty"`
			}
			var out []removed
			failed := false
			err := a.withClient(cmd.Context(), func(c *api.Client) error {
				for _, ref := range args {
					r, err := c.Remove(cmd.Context(), ref)
					if err != nil {
						if cmd.Context().Err() != nil {
							return err
						}
						failed = true
						out = append(out, removed{ID: ref, Error: err.Error()})
						if !a.json() {
							fmt.Fprintln(a.stderr, "error:", err)
						}
						continue
					}
					out = append(out, removed{ID: r.ID})
					if !a.json() {
						fmt.Fprintf(a.stdout, "task %s removed\n", r.ID)
					}
				}
				return nil
			})
			if err != nil {
				return err
			}
			if a.json() {
				if err := a.printJSON(out); err != nil {
					return err
				}
			}
			if failed {
				return &exitError{code: exitFailed}
			}
			return nil
		},
	}
}

func (a *app) gcCmd() *cobra.Command {
	var o api.GCRequest
	var olderThan time.Duration
	cmd := &cobra.Command{
		Use:   "gc",
		Short: "Free space: workspaces of removed tasks, unreferenced artifacts and modules, value-log space",
		Long: `gc frees what no task needs any more:
  - workspaces of tasks that were removed (with --workspaces, also those of
    finished tasks that are kept);
  - artifact and module blobs no task refers to, and the chunks of artifact
    puts a crash cut short;
  - the value-log space of deleted records.
--older-than spares workspaces of tasks finished (or folders changed) more
recently. gc runs in the process that owns the home (a running serve or
worker does it while it works); the value-log space of what it deletes comes
back once the store is next opened without an owner (run gc again then).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if olderThan < 0 {
				return errors.New("invalid argument --older-than: must not be negative")
			}
			if olderThan > 0 {
				o.OlderThan = olderThan.String()
			}
			var rep *api.GCReport
			local := false
			if err := a.withSession(cmd.Context(), home.Mode{Create: true}, func(s *home.Session) error {
				var err error
				rep, err = s.Client.GC(cmd.Context(), o)
				local = s.Local()
				return err
			}); err != nil {
				return err
			}
			if local && rep.Blobs+rep.Orphans > 0 {
				// What gc deleted was in Badger's in-memory table until the
				// close above: only now can its value-log space come back.
				if err := a.withSession(cmd.Context(), home.Mode{Create: true}, func(s *home.Session) error {
					n, err := s.Client.ReclaimSpace(cmd.Context())
					rep.VlogFiles += n
					return err
				}); err != nil {
					return err
				}
			}
			if a.json() {
				return a.printJSON(rep)
			}
			fmt.Fprintf(a.stdout, "blobs removed:      %d (%s)\n", rep.Blobs, byteSize(rep.BlobBytes))
			fmt.Fprintf(a.stdout, "orphaned chunks:    %d blob(s) (%s)\n", rep.Orphans, byteSize(rep.OrphanBytes))
			fmt.Fprintf(a.stdout, "workspaces removed: %d (%s)\n", rep.Workspaces, byteSize(rep.WorkspaceBytes))
			fmt.Fprintf(a.stdout, "value-log files rewritten: %d\n", rep.VlogFiles)
			return nil
		},
	}
	cmd.Flags().BoolVar(&o.Workspaces, "workspaces", false, "also remove the workspaces of finished tasks that are kept")
	cmd.Flags().DurationVar(&olderThan, "older-than", 0, "spare workspaces of tasks finished less than this long ago (e.g. 72h)")
	return cmd
}

// byteSize renders n bytes for people.
func byteSize(n int64) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}
