package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/lhengine/lhengine/engine"
	"github.com/lhengine/lhengine/store"
)

func (a *app) lsCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "ls",
		Short: "List tasks, oldest first",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.read(cmd.Context(), func(r *store.Reader) error {
				tasks, err := r.Tasks()
				if err != nil {
					return err
				}
				if a.json() {
					if tasks == nil {
						tasks = []*store.Task{}
					}
					return a.printJSON(tasks)
				}
				tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "ID\tNAME\tSTATUS\tPROGRESS\tSTEP\tUPDATED")
				for _, t := range tasks {
					done, total := t.Progress()
					fmt.Fprintf(tw, "%s\t%s\t%s\t%d/%d\t%s\t%s\n", t.ID, t.Name, shownStatus(t), done, total,
						t.Steps[min(t.Cursor, len(t.Steps)-1)].Name, t.UpdatedAt.Local().Format(time.DateTime))
				}
				return tw.Flush()
			})
		},
	}
}

func (a *app) statusCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "status ID",
		Short: "One task's progress report: where it is, what it did, why it stopped",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.readTask(cmd.Context(), args[0], func(r *store.Reader, t *store.Task) error {
				m, err := r.Manifest(t.ID)
				if err != nil {
					return err
				}
				notes, err := r.Notes(t.ID)
				if err != nil {
					return err
				}
				if a.json() {
					return a.printJSON(map[string]any{"task": t, "manifest": manifestSummary(m), "notes": notes, "shown_status": shownStatus(t)})
				}
				a.report(t, m, notes)
				return nil
			})
		},
	}
}

func manifestSummary(m *store.Manifest) map[string]any {
	return map[string]any{
		"objective": m.Objective, "constraints": m.Constraints, "filename": m.Filename,
		"vars": m.Vars, "plugins": m.Plugins, "engine_version": m.EngineVersion, "abi": m.ABI,
		"source_sha256": sha(m.Source),
	}
}

func sha(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// interrupted is how a running task shows when nothing works on it.
const interrupted = "interrupted"

// shownStatus is the status a reader of the store shows for a task. A
// command that reads the store holds it alone (one process per home), so a
// task recorded as running has no live worker: the process that ran it is
// gone, and the task is shown as interrupted until it is resumed.
func shownStatus(t *store.Task) string {
	if t.Status == store.Running {
		return interrupted
	}
	return string(t.Status)
}

// report prints the human progress report of a task.
func (a *app) report(t *store.Task, m *store.Manifest, notes []store.Note) {
	w := a.stdout
	done, total := t.Progress()
	pct := 0
	if total > 0 {
		pct = done * 100 / total
	}
	fmt.Fprintf(w, "task %s %q: %s\n", t.ID, t.Name, shownStatus(t))
	if shownStatus(t) == interrupted {
		fmt.Fprintf(w, "  note:        no process is working on it (last change %s ago); resume it with: lhengine resume %s\n",
			time.Since(t.UpdatedAt).Round(time.Second), t.ID)
	}
	if m.Objective != "" {
		fmt.Fprintf(w, "  objective:   %s\n", m.Objective)
	}
	for _, c := range m.Constraints {
		fmt.Fprintf(w, "  constraint:  %s\n", c)
	}
	fmt.Fprintf(w, "  progress:    %d/%d units (%d%%) · step %d/%d %s\n", done, total, pct, t.Cursor+1, len(t.Steps), t.Steps[min(t.Cursor, len(t.Steps)-1)].Name)
	fmt.Fprintf(w, "  attempts:    %d started · %d failed · %d consecutive failures · %d leases taken over\n",
		t.Attempts, t.Failures, t.ConsecutiveFailures, t.Reclaims)
	if t.Repairs > 0 {
		fmt.Fprintf(w, "  repairs:     %d (last: %s)\n", t.Repairs, t.RepairReason)
	}
	fmt.Fprintf(w, "  lease:       epoch %d", t.Epoch)
	if t.Leases > 0 {
		fmt.Fprintf(w, " · %d units leased · last owner %s until %s", t.Leases, t.LeaseOwner, t.LeaseUntil.Local().Format(time.TimeOnly))
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "  created:     %s\n", t.CreatedAt.Local().Format(time.DateTime))
	if !t.FinishedAt.IsZero() {
		fmt.Fprintf(w, "  finished:    %s (%s after start)\n", t.FinishedAt.Local().Format(time.DateTime), t.FinishedAt.Sub(t.CreatedAt).Round(time.Millisecond))
	}
	if t.Reason != "" {
		fmt.Fprintf(w, "  reason:      %s\n", t.Reason)
	}
	if t.Failure != nil {
		fmt.Fprintf(w, "  failure:     %s\n", t.Failure)
	}
	if len(t.Counters) > 0 {
		names := make([]string, 0, len(t.Counters))
		for n := range t.Counters {
			names = append(names, n)
		}
		sort.Strings(names)
		parts := make([]string, len(names))
		for i, n := range names {
			parts[i] = fmt.Sprintf("%s %d", n, t.Counters[n])
		}
		fmt.Fprintf(w, "  counts:      %s\n", strings.Join(parts, " · "))
	}
	for _, n := range notes {
		fmt.Fprintf(w, "  %-12s %s (%s[%d])\n", n.Kind+":", n.Text, n.Step, n.Item)
	}
	fmt.Fprintln(w, "  steps:")
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "    #\tSTEP\tUNITS\tDONE\tLEASED\tPASS\t")
	for i, s := range t.Steps {
		units := "-"
		if s.Planned {
			units = fmt.Sprint(s.Units)
		}
		mark := " "
		if i == t.Cursor && !t.Status.Terminal() {
			mark = ">"
		}
		fan := ""
		if s.FanOut {
			fan = fmt.Sprintf(" (fan-out ≤%d)", s.Limit)
		}
		fmt.Fprintf(tw, "  %s %d\t%s%s\t%s\t%d\t%d\t%d\t\n", mark, i+1, s.Name, fan, units, s.Done, s.Leased, s.Pass)
	}
	tw.Flush()
}

func (a *app) outputsCmd() *cobra.Command {
	var attempts bool
	cmd := &cobra.Command{
		Use:   "outputs ID [STEP]",
		Short: "Recorded step outputs (current pass); --attempts lists every attempt with its failure and log",
		Args:  cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.readTask(cmd.Context(), args[0], func(r *store.Reader, t *store.Task) error {
				steps := []int{}
				for i, s := range t.Steps {
					if len(args) == 1 || s.Name == args[1] {
						steps = append(steps, i)
					}
				}
				if len(steps) == 0 {
					return fmt.Errorf("task %s has no step %q", t.ID, args[1])
				}
				if attempts {
					return a.printAttempts(r, t, steps)
				}
				outs := map[string]json.RawMessage{}
				for _, i := range steps {
					out, err := r.StepOutput(t.ID, i)
					if err != nil {
						continue // not completed in its current pass
					}
					outs[t.Steps[i].Name] = out
				}
				if a.json() {
					if len(args) == 2 {
						if out, ok := outs[args[1]]; ok {
							return a.printJSON(out)
						}
						return fmt.Errorf("step %q of task %s has no output yet", args[1], t.ID)
					}
					return a.printJSON(outs)
				}
				for _, i := range steps {
					name := t.Steps[i].Name
					out, ok := outs[name]
					if !ok {
						fmt.Fprintf(a.stdout, "== %s: no output yet\n", name)
						continue
					}
					fmt.Fprintf(a.stdout, "== %s (pass %d)\n%s\n", name, t.Steps[i].Pass, indentJSON(out))
				}
				return nil
			})
		},
	}
	cmd.Flags().BoolVar(&attempts, "attempts", false, "list every recorded attempt, including failed ones and earlier passes")
	return cmd
}

func (a *app) printAttempts(r *store.Reader, t *store.Task, steps []int) error {
	var all []*store.Attempt
	for _, i := range steps {
		as, err := r.Attempts(t.ID, i)
		if err != nil {
			return err
		}
		all = append(all, as...)
	}
	if a.json() {
		if all == nil {
			all = []*store.Attempt{}
		}
		return a.printJSON(all)
	}
	for _, at := range all {
		state := "ok"
		switch {
		case at.Failure != nil:
			state = string(at.Failure.Kind)
		case at.Repair != "":
			state = "needs repair: " + at.Repair
		}
		fmt.Fprintf(a.stdout, "== %s item %d attempt %d (epoch %d, %s): %s\n", t.Steps[at.Step].Name, at.Item, at.Attempt, at.Epoch,
			at.Finished.Sub(at.Started).Round(time.Microsecond), state)
		if at.Failure != nil {
			fmt.Fprintf(a.stdout, "   %s\n", at.Failure.Message)
		}
		if len(at.Output) > 0 {
			fmt.Fprintf(a.stdout, "%s\n", indentJSON(at.Output))
		}
		if len(at.Log) > 0 {
			fmt.Fprintf(a.stdout, "   log:\n%s\n", indent(string(at.Log), "     "))
		}
	}
	return nil
}

func (a *app) eventsCmd() *cobra.Command {
	var follow bool
	cmd := &cobra.Command{
		Use:   "events ID",
		Short: "The task's durable event log",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.withHome(cmd.Context(), func(e *engine.Engine) error {
				return a.events(e, args[0], follow)
			})
		},
	}
	cmd.Flags().BoolVarP(&follow, "follow", "f", false,
		"exit 0 only if the task succeeded: 1 if it failed or was cancelled, and 1 with a hint if it is unfinished (no worker can run while this command holds the home)")
	return cmd
}

func (a *app) events(s *engine.Engine, ref string, follow bool) error {
	var evs []store.Event
	var t *store.Task
	if err := s.Read(func(r *store.Reader) error {
		var err error
		if t, err = r.FindTask(ref); err != nil {
			return err
		}
		evs, err = r.Events(t.ID, 0, 0)
		return err
	}); err != nil {
		return err
	}
	enc := json.NewEncoder(a.stdout)
	for _, e := range evs {
		if a.json() {
			if err := enc.Encode(e); err != nil {
				return err
			}
			continue
		}
		where := e.Step
		if e.Item != nil && where != "" {
			where = fmt.Sprintf("%s[%d]", e.Step, *e.Item)
		}
		extra := ""
		if e.Attempt > 0 {
			extra += fmt.Sprintf(" attempt=%d", e.Attempt)
		}
		if e.Epoch > 0 {
			extra += fmt.Sprintf(" epoch=%d", e.Epoch)
		}
		if e.Kind != "" {
			extra += " kind=" + string(e.Kind)
		}
		msg := ""
		if e.Message != "" {
			msg = " · " + e.Message
		}
		fmt.Fprintf(a.stdout, "%5d %s %-13s %s%s%s\n", e.Seq, e.Time.Local().Format("15:04:05.000"), e.Type, where, extra, msg)
	}
	switch {
	case !follow, t.Status == store.Succeeded:
		return nil
	case t.Status.Terminal():
		return &exitError{code: exitFailed, err: fmt.Errorf("task %s %s%s", t.ID, t.Status, reasonSuffix(t))}
	}
	// This command holds the home (one process per home), so no worker can
	// add an event while it waits: say so instead of waiting forever.
	return &exitError{code: exitFailed, err: fmt.Errorf("task %s is %s and no process is working on it; "+
		"nothing more can arrive while this command holds the home: resume it with `lhengine resume %s`, whose progress line follows it",
		t.ID, shownStatus(t), t.ID)}
}

func (a *app) pluginCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "plugin", Short: "Plugin tools"}
	cmd.AddCommand(&cobra.Command{
		Use:   "inspect X.wasm",
		Short: "Show a plugin's ABI version, imports, exports and size",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			b, err := os.ReadFile(args[0])
			if err != nil {
				return err
			}
			info, err := engine.InspectPlugin(cmd.Context(), b)
			if err != nil {
				return fmt.Errorf("%s: %w", args[0], err)
			}
			if a.json() {
				return a.printJSON(map[string]any{"file": args[0], "size": len(b), "sha256": sha(b), "info": info})
			}
			fmt.Fprintf(a.stdout, "file:    %s\nsize:    %d bytes\nsha256:  %s\nabi:     %s\n", args[0], len(b), sha(b), info.ABI)
			fmt.Fprintln(a.stdout, "imports:")
			for _, f := range info.Imports {
				fmt.Fprintf(a.stdout, "  %s\n", f)
			}
			fmt.Fprintln(a.stdout, "exports:")
			for _, f := range info.Exports {
				fmt.Fprintf(a.stdout, "  %s\n", f)
			}
			return nil
		},
	})
	return cmd
}

func indentJSON(b []byte) string {
	var buf bytes.Buffer
	if err := json.Indent(&buf, b, "", "  "); err != nil {
		return string(b)
	}
	return buf.String()
}

func indent(s, prefix string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	for i, l := range lines {
		lines[i] = prefix + l
	}
	return strings.Join(lines, "\n")
}
