package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/lhengine/lhengine/cmd/lhengine/internal/evalrun"
	"github.com/lhengine/lhengine/cmd/lhengine/internal/live"
)

func (a *app) evalCmd() *cobra.Command {
	var (
		ablate, dirs []string
		workers      int
		results      string
		seed         uint64
		keep         string
	)
	cmd := &cobra.Command{
		Use:   "eval SET.hcl",
		Short: "Run an eval set in every policy state an ablation asks for and report what each run's store records",
		Long: `Run an eval set (specs/policies.md, "Ablation evals"): every case, a task file
with variables and a verifier, in the baseline policy state (the set's policies
added to each task's own) and in one state per ablation: --ablate NAME runs
without policy NAME, --ablate NAME@VERSION with that version instead. The set
may declare its ablations itself.

Every run gets a fresh home of its own; --workers runs go at once, in an order
the seed decides (the seed is also the value of a task's "seed" variable). A
case with a crash point runs in a child lhengine process that SIGKILLs itself
there, is resumed in this process, and must finish with the output of the
same case run without a crash, no committed unit run again. A case with
model_replay = "DIR" is submitted as run --model-replay DIR would be: its
model calls are answered from those recordings, nothing is sent, and a call
they do not hold makes the run an error naming the request's sha256.

The figures (success rate, units run, repeated units, repairs, wall time,
cost, crash recovery) are read from each run's store. The result is written
as NAME.json and NAME.md to --results (default: results/ beside the set
file); -o json prints the JSON. Progress goes to stderr. Exit status 1 when
the set is invalid or a run could not be made; a case that fails its
verifier is a finding, not an error. --home is not used: every run gets a
home of its own (--keep-homes keeps them). Engine log lines below error are
not shown unless --log-level asks for them: a plugin's warning is what many
cases are about, and the table reports it.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if workers < 1 {
				return &exitError{code: exitUsage, err: fmt.Errorf("--workers %d: want at least 1", workers)}
			}
			if at := os.Getenv("LHENGINE_CRASH_AT"); at != "" {
				// It would kill this process, which runs cases in-process;
				// a set's crash cases set it for their own children.
				return &exitError{code: exitUsage, err: fmt.Errorf("LHENGINE_CRASH_AT=%s is set: eval would crash itself at that point; unset it and give the case a crash point instead", at)}
			}
			set, files, diags := evalrun.LoadSet(args[0])
			if diags.HasErrors() {
				if err := evalrun.WriteDiagnostics(a.stderr, files, diags); err != nil {
					return err
				}
				return &exitError{code: exitFailed}
			}
			states, err := evalrun.States(set, ablate)
			if err != nil {
				return &exitError{code: exitUsage, err: err}
			}
			var absDirs []string
			for _, d := range dirs {
				abs, err := filepath.Abs(d)
				if err != nil {
					return err
				}
				if fi, err := os.Stat(abs); err != nil || !fi.IsDir() {
					return &exitError{code: exitUsage, err: fmt.Errorf("--policies %s: not a directory", d)}
				}
				absDirs = append(absDirs, abs)
			}
			exe, err := os.Executable()
			if err != nil {
				return fmt.Errorf("finding the lhengine executable for crash cases: %w", err)
			}
			if results == "" {
				results = filepath.Join(filepath.Dir(args[0]), "results")
			}
			if f := cmd.Flag("log-level"); f != nil && !f.Changed {
				// Plugins' warnings are what the cases are about
				// (a critic finding a placeholder); the table says it.
				a.logLevel = "error"
			}
			p := live.NewEval(a.stderr, set, states)
			a.logs.to(p)
			res, err := evalrun.Run(cmd.Context(), evalrun.Config{
				Set: set, Ablate: ablate, PolicyDirs: absDirs, Workers: workers, Seed: seed,
				Executable: exe, Scratch: keep, KeepHomes: keep != "", Logger: a.logger(), OnRun: p.Run,
			})
			a.logs.to(nil)
			p.Finish()
			if err != nil {
				return err
			}
			jsonPath, mdPath, err := res.Save(results)
			if err != nil {
				return err
			}
			if a.json() {
				if err := res.WriteJSON(a.stdout); err != nil {
					return err
				}
			} else {
				if err := res.WriteText(a.stdout); err != nil {
					return err
				}
				fmt.Fprintf(a.stdout, "\nresults: %s, %s\n", jsonPath, mdPath)
				if res.Homes != "" {
					fmt.Fprintf(a.stdout, "homes: %s\n", res.Homes)
				}
			}
			for _, st := range res.States {
				if st.Figures.Errors > 0 {
					return &exitError{code: exitFailed, err: fmt.Errorf("%d run(s) in state %q could not be made; see the table", st.Figures.Errors, st.Name)}
				}
			}
			return nil
		},
	}
	cmd.Flags().StringArrayVar(&ablate, "ablate", nil, "add a state: NAME runs without policy NAME, NAME@VERSION with that version (repeatable)")
	cmd.Flags().IntVar(&workers, "workers", evalrun.DefaultWorkers, "runs at once, each on its own home (at least 1)")
	cmd.Flags().StringVar(&results, "results", "", "directory of the result files NAME.json and NAME.md (default: results/ beside the set file)")
	cmd.Flags().StringArrayVar(&dirs, "policies", nil, "look for policies in DIR too, after the set's policy_dirs (repeatable)")
	cmd.Flags().Uint64Var(&seed, "seed", evalrun.DefaultSeed, "decides the order of the runs; a task's \"seed\" variable gets it (plus the repeat, from 0)")
	cmd.Flags().StringVar(&keep, "keep-homes", "", "keep every run's home under DIR (lhengine --home DIR/run-NNN status ID) instead of removing them")
	return cmd
}
