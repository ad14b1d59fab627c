package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/lhengine/lhengine/cmd/lhengine/internal/benchrun"
)

func (a *app) benchCmd() *cobra.Command {
	c := benchrun.Config{Rounds: 3, Steps: 50, Items: 3000, Concurrency: defaultConcurrency}
	cmd := &cobra.Command{
		Use:   "bench --plugin X.wasm",
		Short: "Measure this disk side by side: fsync, Badger group commit, wazero, and the engine's own figures",
		Long: `bench measures, in one process and on the disk under --home, the engine's
figures next to the floors beneath them, and prints the median of each over
--rounds with its ratio to its floor:

  fsync                     write 4 KiB + fsync of one file (ms/op)
  badger-group-commit-N     N goroutines committing small durable Badger
                            transactions (SyncWrites), for N = concurrency
                            and twice it (tx/s)
  wazero-instance           a fresh plain-wazero + WASI instance of the plugin
                            per run (ms/op); not the engine's guest runtime
  serial-steps              a task of --steps serial steps, fsync on (ms/step),
                            compared with fsync + wazero-instance
  fan-out-c                 a fan-out of --items items at --concurrency
                            (units/s), compared with Badger at that concurrency
  fan-out-go                the same with --go-plugin, if given
  fan-out-go-reuse          the same with --go-reuse-plugin (the plugin
                            declared stateless: its instance is reused)

Rounds are interleaved: each round runs every figure once, so a shared
machine's drift reaches every figure alike. The step plugin must import only
WASI and answer {"mode":"echo"} with an output: testdata/guests/c/pipeline.c
(make bench-compare builds it and runs this command).

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
	if rep.InMemory {
		fmt.Fprintln(a.stdout, "WARNING: that directory is on tmpfs or ramfs: its syncs reach no disk; pass --home DIR on the disk to measure")
	}
	fmt.Fprintln(a.stdout)
	tw := tabwriter.NewWriter(a.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "figure\tmedian\trounds (min-max)\tcompared with (median)\tratio\twhat")
	for _, f := range rep.Figures {
		value := num(f.Median) + " " + f.Unit
		spread := num(slices.Min(f.Samples)) + "-" + num(slices.Max(f.Samples))
		floor, ratio := "-", "-"
		if f.Floor != "" {
			floor = f.Floor + " " + num(f.FloorMedian) + " " + f.FloorUnit
			ratio = strconv.FormatFloat(f.Ratio, 'f', 2, 64) + "x"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", f.Name, value, spread, floor, ratio, f.What)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintln(a.stdout, "\nmedians over rounds; ratio = figure / what it is compared with, in the figure's unit (ms: lower is better, /s: higher is better)")
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
