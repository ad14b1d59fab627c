package main

import (
	"errors"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/lhengine/lhengine/ledger"
	"github.com/lhengine/lhengine/store"
)

// The processes that share a PostgreSQL store, and its schema.

func (a *app) workersCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "workers",
		Short: "The processes registered in the PostgreSQL store (--store): host, pid, version, last seen, alive or not",
		Long: `workers lists every process that has the PostgreSQL store of --store (or
$LHENGINE_STORE) open, or had it in the last day: its session (the prefix of
its lease owners), host, pid, lhengine version, when it started and when it
was last seen. A process records that it is alive every 5 seconds; one that
stopped, or was not seen for 15 seconds, or whose pid is gone from this host,
is not alive, and the others take its leases back at their next claim.

It reads the database itself and registers nothing. The embedded store has
one process at a time: lhengine home and lhengine status name it.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if a.storeURL == "" {
				return &exitError{code: exitUsage, err: errors.New("workers lists the processes of a PostgreSQL store: give it with --store postgres://… or LHENGINE_STORE")}
			}
			ws, err := store.PostgresWorkers(cmd.Context(), a.storeURL)
			if err != nil {
				return err
			}
			if a.json() {
				if ws == nil {
					ws = []ledger.Worker{}
				}
				return a.printJSON(ws)
			}
			if len(ws) == 0 {
				fmt.Fprintln(a.stdout, "no process has this store open, or had it in the last day")
				return nil
			}
			tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "SESSION\tHOST\tPID\tVERSION\tSTARTED\tLAST SEEN\tSTATE")
			now := time.Now()
			for _, w := range ws {
				state := "alive"
				switch {
				case !w.Stopped.IsZero():
					state = "stopped"
				case !w.Alive:
					state = "gone (its leases are taken back)"
				}
				fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s ago\t%s\n", w.Session, w.Host, w.PID, w.Version,
					w.Started.Local().Format(time.DateTime), now.Sub(w.LastSeen).Round(time.Second), state)
			}
			return tw.Flush()
		},
	}
}

func (a *app) storeMigrateCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "migrate",
		Short: "Bring the PostgreSQL store's schema (--store) up to this lhengine's",
		Long: `migrate applies to the PostgreSQL database of --store (or $LHENGINE_STORE)
the schema versions it lacks, each in a transaction of its own, and prints
the versions before and after. Running it again changes nothing; processes
running it at once apply each version once. A store whose schema is behind
is refused by every other command until it is migrated (or --migrate is
given). The embedded store needs no migration.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if a.storeURL == "" {
				return &exitError{code: exitUsage, err: errors.New("migrate is for a PostgreSQL store: give it with --store postgres://… or LHENGINE_STORE")}
			}
			from, to, err := store.MigratePostgres(cmd.Context(), a.storeURL)
			if err != nil {
				return err
			}
			if a.json() {
				return a.printJSON(struct {
					From int `json:"from"`
					To   int `json:"to"`
				}{from, to})
			}
			if from == to {
				fmt.Fprintf(a.stdout, "schema version %d: up to date\n", to)
			} else {
				fmt.Fprintf(a.stdout, "schema version %d → %d\n", from, to)
			}
			return nil
		},
	}
}
