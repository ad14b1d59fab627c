package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/lhengine/lhengine/cmd/lhengine/internal/benchrun"
)

func (a *app) benchCmd() *cobra.Command {
	c := benchrun.Config{Rounds: 3, Steps: 50, Items: 3000, Concurrency: defaultConcurrency}
	cmd := &cobra.Command{
		Use:   "bench --plugin X.wasm",
		Short: "Measure this disk side by side: fsync, Badger's commits, wazero, and the engine's own figures",
		Long: `bench measures, in one process and on the disk under --home, the engine's
figures next to the floors beneath them, each in --rounds interleaved rounds
(at least 3 make a median worth reading), and prints the median of the
rounds, their range and, for a latency, the 99th percentile of every op,
with the ratio of each engine figure to its floor:

  fsync                       write 4 KiB + fsync of one file, --steps times
                              a round (ms/op: a round's median op)
  badger-sync-writes-N        N goroutines committing --items small Badger
                              transactions with SyncWrites (Badger syncs each,
                              grouping concurrent ones), for N = --concurrency
                              and twice it (tx/s)
  badger-coalesced-sync-N     N goroutines committing --items small Badger
                              transactions without SyncWrites, each waiting
                              for a DB.Sync begun after its commit, one sync
                              shared by all committed before it: the engine's
                              own commit scheme without the engine (tx/s)
  wazero-instance             a fresh plain-wazero + WASI instance of the
                              plugin, --items times a round (ms/op); not the
                              engine's guest runtime
  serial-steps                a task of --steps serial steps, fsync on; a
                              step is timed from the commit of the one before
                              (ms/step), compared with fsync + wazero-instance
  fan-out-c                   a fan-out of --items items at --concurrency
                              (units/s), compared with
                              badger-coalesced-sync-CONCURRENCY
  fan-out-go                  the same with --go-plugin, if given
  fan-out-go-reuse            the same with --go-reuse-plugin (the plugin
                              declared stateless: its instance is reused)
  fan-out-c-cpu, ...          for each fan-out, this process's CPU time
                              (user + system, all threads) over its round,
                              per unit (cpu-ms/unit; Linux)

Rounds are interleaved: each round runs every figure once, starting from a
different one, so a shared machine's drift reaches every figure alike. The
report gives the machine's load averages before and after, and how many
CPUs other processes kept busy while the rounds ran (Linux); when that is
more than a quarter of a CPU (an eighth of the machine on a larger one) it
warns that the figures mean little. The step plugin must import only WASI
and answer {"mode":"echo"} with an output: testdata/guests/c/pipeline.c
(make bench-compare builds it and runs this command). -o json gives every
sample, range, p99, floor and the load.

Everything is created in a new directory inside --home if --home or
$LHENGINE_HOME is set, else in a new temporary directory, and removed at the
end; the table warns if that directory is in memory (tmpfs). Nothing touches
the network.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) (err error) {
			if err := c.Check(); err != nil {
				return &exitError{code: exitUsage, err: err}
			}
			parent := ""
			if cmd.Flags().Changed("home") || os.Getenv("LHENGINE_HOME") != "" {
				parent = a.home
				if err := os.MkdirAll(parent, 0o755); err != nil {
					return err
				}
			}
			dir, err := os.MkdirTemp(parent, "lhengine-bench-")
			if err != nil {
				return err
			}
			defer func() {
				if rerr := os.RemoveAll(dir); rerr != nil {
					err = errors.Join(err, fmt.Errorf("removing the benchmark's directory (remove it by hand): %w", rerr))
				}
			}()
			c.Dir, c.Logger = dir, a.logger()
			c.Progress = func(round int, figure string) {
				if !a.json() {
					fmt.Fprintf(a.stderr, "round %d/%d: %s\n", round, c.Rounds, figure)
				}
			}
			rep, err := benchrun.Run(cmd.Context(), c)
			if err != nil {
				return err
			}
			if a.json() {
				return a.printJSON(rep)
			}
			return printBench(a, rep)
		},
	}
	cmd.Flags().StringVar(&c.Plugin, "plugin", "", "the step plugin: a WASI-only module answering {\"mode\":\"echo\"} (testdata/guests/c/pipeline.c)")
	cmd.Flags().StringVar(&c.GoPlugin, "go-plugin", "", "also measure a fan-out of this Go-SDK plugin (testdata/guests/go/conformance)")
	cmd.Flags().StringVar(&c.GoReusePlugin, "go-reuse-plugin", "", "also measure a fan-out of this stateless Go-SDK plugin, whose instance is reused (testdata/guests/go/stateless)")
	cmd.Flags().IntVar(&c.Rounds, "rounds", c.Rounds, "rounds of every figure, interleaved; medians are over rounds")
	cmd.Flags().IntVar(&c.Steps, "steps", c.Steps, "steps of the serial task, and fsyncs per round")
	cmd.Flags().IntVar(&c.Items, "items", c.Items, "items of each fan-out, and Badger transactions and wazero instances per round")
	cmd.Flags().IntVar(&c.Concurrency, "concurrency", c.Concurrency, "concurrency of the fan-outs and of the first Badger figure (the second is twice it)")
	return cmd
}

// printBench writes the report as a table.
func printBench(a *app, rep *benchrun.Report) error {
	fmt.Fprintf(a.stdout, "lhengine bench: %d rounds, %d steps, %d items, concurrency %d; %s/%s, %d CPUs, %s\n",
		rep.Rounds, rep.Steps, rep.Items, rep.Concurrency, rep.GOOS, rep.GOARCH, rep.CPUs, rep.GoVersion)
	fmt.Fprintf(a.stdout, "disk: %s\n", filepath.Dir(rep.Dir))
	if l := rep.Load; l.Known {
		fmt.Fprintf(a.stdout, "load: %.2f %.2f %.2f before, %.2f %.2f %.2f after; other processes kept %.2f CPUs busy meanwhile (busiest round %.2f)\n",
			l.Before[0], l.Before[1], l.Before[2], l.After[0], l.After[1], l.After[2], l.OtherCPUs, l.OtherCPUsMax)
	} else {
		fmt.Fprintln(a.stdout, "load: not known on this system")
	}
	if rep.InMemory {
		fmt.Fprintln(a.stdout, "WARNING: that directory is on tmpfs or ramfs: its syncs reach no disk; pass --home DIR on the disk to measure")
	}
	if rep.Load.Busy {
		fmt.Fprintln(a.stdout, "WARNING: "+rep.Load.Warning)
	}
	if rep.Rounds < 3 {
		fmt.Fprintf(a.stdout, "WARNING: %d round(s): the median of fewer than 3 rounds is one sample's word; pass --rounds 3 or more\n", rep.Rounds)
	}
	fmt.Fprintln(a.stdout)
	tw := tabwriter.NewWriter(a.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "figure\tmedian\trounds (min-max)\tp99\tcompared with (median)\tratio\twhat")
	for _, f := range rep.Figures {
		value := num(f.Median) + " " + f.Unit
		spread := num(f.Min) + "-" + num(f.Max)
		p99, floor, ratio := "-", "-", "-"
		if f.Ops > 0 {
			p99 = num(f.P99)
		}
		if f.Floor != "" {
			floor = f.Floor + " " + num(f.FloorMedian) + " " + f.FloorUnit
			ratio = strconv.FormatFloat(f.Ratio, 'f', 2, 64) + "x"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", f.Name, value, spread, p99, floor, ratio, f.What)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintln(a.stdout, "\nmedians over rounds (a latency's round: its median op); p99: of every op of every round; ratio = figure / what it is compared with, in the figure's unit (ms: lower is better, /s: higher is better)")
	return err
}

// num formats a figure with three significant digits or more.
func num(v float64) string {
	switch {
	case v >= 100:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case v >= 1:
		return strconv.FormatFloat(v, 'f', 2, 64)
	default:
		return strconv.FormatFloat(v, 'f', 3, 64)
	}
}
