package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"
	"github.com/vbauerster/mpb/v8"
	"github.com/vbauerster/mpb/v8/decor"

	"github.com/lhengine/lhengine/cmd/lhengine/internal/evalrun"
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
			p := newEvalProgress(a.stderr, set, states)
			a.logs.to(p)
			res, err := evalrun.Run(cmd.Context(), evalrun.Config{
				Set: set, Ablate: ablate, PolicyDirs: absDirs, Workers: workers, Seed: seed,
				Executable: exe, Scratch: keep, KeepHomes: keep != "", Logger: a.logger(), OnRun: p.run,
			})
			a.logs.to(nil)
			p.finish()
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

// evalProgress shows how far an eval is. On a terminal it is a bar per
// state drawn by mpb (runs done of the state's total, how many failed);
// log lines written through it (it is the engine logger's output while
// the eval runs) are printed above the bars, never inside them. Elsewhere
// it prints a line per finished run.
type evalProgress struct {
	statusLine
	name   string
	states []string
	total  map[string]int
	done   map[string]int
	failed map[string]int
	p      *mpb.Progress
	bars   map[string]*mpb.Bar
}

func newEvalProgress(w io.Writer, set *evalrun.Set, states []evalrun.StateResult) *evalProgress {
	var opts []mpb.ContainerOption
	if isTerminal(w) {
		opts = append(opts, mpb.WithOutput(w))
	}
	return newEvalProgressWith(w, opts, set, states)
}

// newEvalProgressWith draws bars with opts when there are any (the output
// a terminal), else plain lines on w.
func newEvalProgressWith(w io.Writer, opts []mpb.ContainerOption, set *evalrun.Set, states []evalrun.StateResult) *evalProgress {
	p := &evalProgress{statusLine: statusLine{w: w, tty: len(opts) > 0}, name: set.Name,
		total: map[string]int{}, done: map[string]int{}, failed: map[string]int{}}
	for _, st := range states {
		p.states = append(p.states, st.Name)
		for _, c := range set.Cases {
			p.total[st.Name] += c.Repeat
		}
	}
	if !p.tty {
		return p
	}
	p.p = mpb.New(append([]mpb.ContainerOption{mpb.WithWidth(30), mpb.WithRefreshRate(100 * time.Millisecond)}, opts...)...)
	p.bars = map[string]*mpb.Bar{}
	for _, st := range p.states {
		p.bars[st] = p.p.New(int64(max(p.total[st], 1)), mpb.BarStyle().Lbound("[").Filler("=").Tip(">").Padding("-").Rbound("]"),
			mpb.PrependDecorators(decor.Any(func(decor.Statistics) string { return "eval " + p.name + " · " + st })),
			mpb.AppendDecorators(decor.Any(func(decor.Statistics) string { return p.count(st) })))
	}
	return p
}

// count is the text right of a state's bar: "3/10 runs · 1 failed".
func (p *evalProgress) count(state string) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return fmt.Sprintf("%d/%d runs · %d failed", p.done[state], p.total[state], p.failed[state])
}

func (p *evalProgress) run(rr *evalrun.RunReport) {
	p.mu.Lock()
	p.done[rr.State]++
	if !rr.Pass || rr.Error != "" || (rr.Crash != nil && !rr.Crash.Recovered) {
		p.failed[rr.State]++
	}
	if p.tty {
		p.mu.Unlock()
		// Told outside mu: the bar draws through count, which takes it.
		if b := p.bars[rr.State]; b != nil {
			b.Increment()
		}
		return
	}
	defer p.mu.Unlock()
	verdict := "pass"
	switch {
	case rr.Error != "":
		verdict = "error: " + rr.Error
	case !rr.Pass:
		verdict = "fail: " + rr.Reason
	}
	if rr.Crash != nil {
		if rr.Crash.Recovered {
			verdict += ", recovered"
		} else if rr.Error == "" {
			verdict += ", recovery failed: " + rr.Crash.Reason
		}
	}
	fmt.Fprintf(p.w, "%s · %s · run %d: %s (%d units, %d repairs, %.2fs) [%d/%d]\n", rr.State, rr.Case, rr.Repeat, verdict,
		rr.Attempts, rr.Repairs, rr.WallSeconds, p.done[rr.State], p.total[rr.State])
}

// Write prints log output: above the bars on a terminal, as is elsewhere.
func (p *evalProgress) Write(b []byte) (int, error) {
	if p.p != nil {
		n, err := p.p.Write(b)
		var done mpb.ErrDone[*mpb.Progress]
		if !errors.As(err, &done) {
			return n, err
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.w.Write(b)
}

// finish draws the last numbers and ends the bars.
func (p *evalProgress) finish() {
	if p.p == nil {
		return
	}
	for _, b := range p.bars {
		b.Abort(false)
	}
	p.p.Wait()
}
