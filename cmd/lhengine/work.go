package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/lhengine/lhengine/engine"
	"github.com/lhengine/lhengine/store"
)

const defaultConcurrency = 16

// minLease is the shortest --lease: it is renewed every third of its
// length, and a renewal must fit a store transaction with room to retry.
const minLease = time.Second

// flagFloors are the least values of the numeric flags that have one
// above zero, by flag name, with why.
var flagFloors = map[string]struct {
	min int64 // an int, or a duration in nanoseconds
	why string
}{
	"concurrency": {1, "at least one attempt must run at a time"},
	"lease":       {int64(minLease), "the lease is renewed every third of it"},
	"poll":        {1, "an idle worker must wait between looks for work"},
}

// checkFlags checks the numeric flags of cmd before it runs: no count or
// duration is negative, and those in flagFloors are at least their floor.
// A value out of range is a usage error (exit status 2) naming the flag,
// the value and what it takes.
func checkFlags(cmd *cobra.Command) error {
	var bad error
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		if bad != nil {
			return
		}
		var v int64
		var show func(int64) string
		switch f.Value.Type() {
		case "int", "int64", "int32":
			n, err := strconv.ParseInt(f.Value.String(), 10, 64)
			if err != nil {
				return
			}
			v, show = n, func(n int64) string { return strconv.FormatInt(n, 10) }
		case "duration":
			d, err := time.ParseDuration(f.Value.String())
			if err != nil {
				return
			}
			v, show = int64(d), func(n int64) string { return time.Duration(n).String() }
		default:
			return
		}
		floor, ok := flagFloors[f.Name]
		switch {
		case ok && v < floor.min && floor.min == 1 && f.Value.Type() == "duration":
			bad = fmt.Errorf("--%s %s: want a positive duration (%s)", f.Name, f.Value.String(), floor.why)
		case ok && v < floor.min:
			bad = fmt.Errorf("--%s %s: want at least %s (%s)", f.Name, f.Value.String(), show(floor.min), floor.why)
		case !ok && v < 0:
			bad = fmt.Errorf("--%s %s: must not be negative", f.Name, f.Value.String())
		}
	})
	if bad != nil {
		return &exitError{code: exitUsage, err: bad}
	}
	return nil
}

func (a *app) validateCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "validate FILE.hcl",
		Short: "Check a task file; errors show file:line:col with a source excerpt",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			diags := engine.Validate(cmd.Context(), args[0])
			if a.json() {
				type diag struct {
					Severity string `json:"severity"`
					Summary  string `json:"summary"`
					Detail   string `json:"detail,omitempty"`
					Range    string `json:"range,omitempty"`
				}
				out := []diag{}
				for _, d := range diags.List() {
					sev := "error"
					if !d.Error {
						sev = "warning"
					}
					out = append(out, diag{sev, d.Summary, d.Detail, d.Range})
				}
				if err := a.printJSON(map[string]any{"valid": !diags.HasErrors(), "diagnostics": out}); err != nil {
					return err
				}
			} else if err := diags.Write(a.stderr, 0, false); err != nil {
				return err
			}
			if diags.HasErrors() {
				return &exitError{code: exitFailed}
			}
			if !a.json() {
				fmt.Fprintf(a.stdout, "%s is valid\n", args[0])
			}
			return nil
		},
	}
}

func (a *app) submitCmd() *cobra.Command {
	var vars []string
	var key string
	cmd := &cobra.Command{
		Use:   "submit FILE.hcl",
		Short: "Queue a task and print its id at once; a worker runs it",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			vs, err := parseVars(vars)
			if err != nil {
				return err
			}
			return a.withEngine(cmd.Context(), func(e *engine.Engine) error {
				t, created, err := e.Submit(cmd.Context(), args[0], engine.SubmitOptions{Vars: vs, IdempotencyKey: key})
				if err != nil {
					return err
				}
				if a.json() {
					return a.printJSON(map[string]any{"id": t.ID, "created": created, "status": t.Status})
				}
				fmt.Fprintln(a.stdout, t.ID)
				return nil
			})
		},
	}
	cmd.Flags().StringArrayVar(&vars, "var", nil, "set a task variable: name=value (repeatable)")
	cmd.Flags().StringVar(&key, "idempotency-key", "", "return the task submitted earlier with this key instead of a new one")
	return cmd
}

func (a *app) runCmd() *cobra.Command {
	var vars []string
	var conc int
	cmd := &cobra.Command{
		Use:   "run FILE.hcl",
		Short: "Submit a task and work it to the end on the embedded store, with live progress",
		Long: `Submit a task and work it to the end on the embedded store.

The task id is printed at once; a progress line shows done/total work units; at
the end the final status and the last step's output are printed. If the process
dies, "lhengine resume ID" continues from the last committed work unit.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			vs, err := parseVars(vars)
			if err != nil {
				return err
			}
			return a.withEngine(cmd.Context(), func(e *engine.Engine) error {
				t, _, err := e.Submit(cmd.Context(), args[0], engine.SubmitOptions{Vars: vs})
				if err != nil {
					return err
				}
				if !a.json() {
					fmt.Fprintf(a.stdout, "task %s\n", t.ID)
				}
				return a.workTask(cmd.Context(), e, t.ID, conc)
			})
		},
	}
	cmd.Flags().StringArrayVar(&vars, "var", nil, "set a task variable: name=value (repeatable)")
	cmd.Flags().IntVar(&conc, "concurrency", defaultConcurrency, "attempts run at once (fan-out steps also obey their own concurrency)")
	return cmd
}

func (a *app) resumeCmd() *cobra.Command {
	var conc int
	cmd := &cobra.Command{
		Use:   "resume ID",
		Short: "Continue a task from its last committed work unit (after a crash, kill or stop)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.withTask(cmd.Context(), args[0], func(e *engine.Engine, t *store.Task) error {
				if t.Status.Terminal() {
					hint := ""
					if t.Status != store.Succeeded {
						hint = fmt.Sprintf("; to run it again from where it stopped: lhengine retry %s", t.ID)
					}
					return fmt.Errorf("task %s is %s; nothing to resume%s%s", t.ID, t.Status, reasonSuffix(t), hint)
				}
				if err := e.CheckPlugins(t.ID); err != nil {
					return fmt.Errorf("cannot resume task %s: %w\na task submitted before modules were kept in the store runs from its plugin files: restore the file(s) it was submitted with and resume again", t.ID, err)
				}
				if t.Status == store.Paused {
					var err error
					if t, err = e.Resume(cmd.Context(), t.ID); err != nil {
						return err
					}
				}
				if !a.json() {
					done, total := t.Progress()
					fmt.Fprintf(a.stdout, "task %s resuming at %d/%d units\n", t.ID, done, total)
				}
				return a.workTask(cmd.Context(), e, t.ID, conc)
			})
		},
	}
	cmd.Flags().IntVar(&conc, "concurrency", defaultConcurrency, "attempts run at once")
	return cmd
}

func reasonSuffix(t *store.Task) string {
	if t.Reason == "" {
		return ""
	}
	return " (" + t.Reason + ")"
}

// workTask works one task to its end with a progress line on stderr, then
// prints the outcome. A task that did not succeed is exit status 1.
func (a *app) workTask(ctx context.Context, e *engine.Engine, id string, conc int) error {
	p := newProgress(a.stderr)
	a.logs.to(p)
	err := e.Work(ctx, engine.WorkOptions{Concurrency: conc, Task: id, ExitWhenIdle: true, OnCommit: p.update})
	a.logs.to(nil)
	p.finish()
	if err != nil {
		if ctx.Err() != nil {
			fmt.Fprintf(a.stderr, "interrupted; continue with: lhengine resume %s\n", id)
			return &exitError{code: exitInterrupted}
		}
		return err
	}
	t, err := e.Task(ctx, id)
	if err != nil {
		return err
	}
	if a.json() {
		if err := a.printJSON(t); err != nil {
			return err
		}
	} else {
		done, total := t.Progress()
		fmt.Fprintf(a.stdout, "task %s %s: %d/%d units%s\n", t.ID, t.Status, done, total, reasonSuffix(t))
		if t.Status == store.Succeeded {
			fmt.Fprintf(a.stdout, "output of step %q:\n%s\n", t.Steps[len(t.Steps)-1].Name, indentJSON(t.Output))
		}
	}
	if t.Status != store.Succeeded {
		return &exitError{code: exitFailed}
	}
	return nil
}

// progress draws the live "done/total" line. On a terminal it redraws one
// line; elsewhere it prints a line when the step changes and at most once a
// second otherwise.
type progress struct {
	w     io.Writer
	tty   bool
	mu    sync.Mutex
	last  time.Time
	step  int
	line  string
	drawn string // on a terminal: the line on screen, not ended by a newline
}

// Write writes log output (p is the engine logger's output while a task
// runs): on a terminal it clears the progress line first and draws it again
// after, so a log line never lands in the middle of it.
func (p *progress) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.tty || p.drawn == "" {
		return p.w.Write(b)
	}
	if _, err := io.WriteString(p.w, "\r\033[K"); err != nil {
		return 0, err
	}
	n, err := p.w.Write(b)
	if err != nil {
		return n, err
	}
	if len(b) > 0 && b[len(b)-1] != '\n' {
		_, _ = io.WriteString(p.w, "\n")
	}
	_, err = io.WriteString(p.w, p.drawn)
	return n, err
}

func newProgress(w io.Writer) *progress {
	tty := false
	if f, ok := w.(*os.File); ok {
		if fi, err := f.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
			tty = true
		}
	}
	return &progress{w: w, tty: tty, step: -1}
}

func (p *progress) update(t *store.Task) {
	done, total := t.Progress()
	step := t.Steps[min(t.Cursor, len(t.Steps)-1)]
	line := fmt.Sprintf("%d/%d units · step %d/%d %s · %s", done, total, t.Cursor+1, len(t.Steps), step.Name, t.Status)
	if t.Repairs > 0 {
		line += fmt.Sprintf(" · repairs %d", t.Repairs)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	now := time.Now()
	switch {
	case p.tty:
		fmt.Fprintf(p.w, "\r\033[K%s", line)
		p.drawn = line
	case t.Cursor != p.step || t.Status.Terminal() || now.Sub(p.last) >= time.Second:
		fmt.Fprintln(p.w, line)
		p.last = now
	default:
		p.line = line
		return
	}
	p.step, p.line = t.Cursor, ""
}

func (p *progress) finish() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.tty {
		fmt.Fprintln(p.w)
		p.drawn = ""
	} else if p.line != "" {
		fmt.Fprintln(p.w, p.line)
	}
}

func (a *app) workerCmd() *cobra.Command {
	var o engine.WorkOptions
	cmd := &cobra.Command{
		Use:   "worker",
		Short: "Claim and run queued work units until stopped",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.withEngine(cmd.Context(), func(e *engine.Engine) error {
				err := e.Work(cmd.Context(), o)
				if err != nil && cmd.Context().Err() != nil && errors.Is(err, context.Canceled) {
					return nil // stopped by signal: leases are taken back by the next worker
				}
				return err
			})
		},
	}
	cmd.Flags().IntVar(&o.Concurrency, "concurrency", defaultConcurrency, "attempts run at once (at least 1)")
	cmd.Flags().BoolVar(&o.ExitWhenIdle, "exit-when-idle", false, "exit once no queued or running task is left")
	cmd.Flags().StringVar(&o.Name, "name", "", "worker name in lease owners (default worker-PID)")
	cmd.Flags().DurationVar(&o.LeaseFor, "lease", 30*time.Second, "lease length, at least 1s; renewed at a third of it while a step runs")
	cmd.Flags().DurationVar(&o.PollEvery, "poll", time.Second, "longest wait of an idle worker before it looks for new work; positive")
	return cmd
}

func (a *app) cancelCmd() *cobra.Command {
	var reason string
	cmd := &cobra.Command{
		Use:   "cancel ID",
		Short: "Cancel a task; attempts in flight lose their leases",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.withTask(cmd.Context(), args[0], func(e *engine.Engine, t *store.Task) error {
				t, err := e.Cancel(cmd.Context(), t.ID, reason)
				if err != nil {
					return err
				}
				if a.json() {
					return a.printJSON(t)
				}
				fmt.Fprintf(a.stdout, "task %s cancelled\n", t.ID)
				return nil
			})
		},
	}
	cmd.Flags().StringVar(&reason, "reason", "", "why (kept in the task record)")
	return cmd
}
