package main

import (
	"errors"
	"fmt"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/lhengine/lhengine/cmd/lhengine/internal/home"
	"github.com/lhengine/lhengine/ledger"
	"github.com/lhengine/lhengine/store"
)

func (a *app) storeCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "store",
		Short: "Check the ledger store, or migrate a PostgreSQL store's schema",
		Args:  cobra.NoArgs,
	}
	cmd.AddCommand(a.storeVerifyCmd(), a.storeMigrateCmd())
	return cmd
}

func (a *app) storeVerifyCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "verify",
		Short: "Scrub the store: checksums of every table and record, the high-water mark, the ledger's references; exit 1 if damaged",
		Long: `verify checks the store under --home: the MANIFEST against the table files,
the checksum of every table, block and value, the store's sync sequence
against its high-water mark (rollback or lost writes), that every record
decodes, and that every runnable task, unit and effect journal entry belongs
to a task record. A store that was closed is opened read-only; one that was
not is opened as any command opens it (taking its lock, and replaying its
write-ahead log). It reads the store alone: with an owner serving the home
(run, worker, serve) it says so and stops.

Exit codes: 0 the store is whole; 1 damage found (each finding is listed) or
the store could not be read.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			rep, err := store.Verify(filepath.Join(a.home, "store"), a.logger())
			if errors.Is(err, ledger.ErrInUse) {
				if s := home.DialOwner(cmd.Context(), a.home); s != nil {
					s.Client.Close()
					return fmt.Errorf("home %s is owned by %s: verify reads the store alone; stop that process first", a.home, s.Owner)
				}
				return home.Busy(a.home, err)
			}
			if err != nil {
				return err
			}
			if a.json() {
				if rep.Findings == nil {
					rep.Findings = []store.Finding{}
				}
				if err := a.printJSON(rep); err != nil {
					return err
				}
			} else {
				fmt.Fprintf(a.stdout, "store %s: %d tables, %d records (%d bytes), %d tasks, sync %d, high-water mark %d\n",
					rep.Dir, rep.Tables, rep.Keys, rep.Bytes, rep.Tasks, rep.Sync, rep.Mark)
				for _, f := range rep.Findings {
					fmt.Fprintln(a.stdout, "DAMAGED:", f)
				}
				if !rep.Damaged() {
					fmt.Fprintln(a.stdout, "ok: no damage found")
				}
			}
			if rep.Damaged() {
				return &exitError{code: exitFailed, err: fmt.Errorf("store %s is damaged: %d findings", rep.Dir, len(rep.Findings))}
			}
			return nil
		},
	}
}
