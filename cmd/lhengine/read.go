package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/lhengine/lhengine/api"
	"github.com/lhengine/lhengine/cmd/lhengine/internal/home"
	"github.com/lhengine/lhengine/cmd/lhengine/internal/render"
	"github.com/lhengine/lhengine/engine"
)

// lsDefaultLimit is how many tasks ls prints as text unless --limit says.
const lsDefaultLimit = 20

func (a *app) lsCmd() *cobra.Command {
	var (
		status []string
		name   string
		order  string
		limit  int
	)
	cmd := &cobra.Command{
		Use:   "ls",
		Short: "List tasks, newest first (the newest 20; --limit 0 for all)",
		Long: `ls lists tasks, newest first (--order oldest for oldest first).

Text shows the first 20 unless --limit says otherwise (0: all) and then says
how many more there are; -o json gives every task unless --limit is given.
--status keeps the tasks shown with one of the statuses (queued, running,
interrupted, waiting_approval, paused, succeeded, failed, cancelled; repeat
it or list them comma-separated) and --name the tasks of that name. The owner filters: the
list that crosses the socket is the one printed.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if order != "newest" && order != "oldest" {
				return &exitError{code: exitUsage, err: fmt.Errorf("invalid argument --order %q: want newest or oldest", order)}
			}
			if limit < 0 {
				return &exitError{code: exitUsage, err: fmt.Errorf("invalid argument --limit %d: want a count, or 0 for all", limit)}
			}
			if !cmd.Flags().Changed("limit") && a.json() {
				limit = 0
			}
			return a.withClient(cmd.Context(), func(c *api.Client) error {
				tasks, total, err := c.TaskList(cmd.Context(), api.TaskQuery{Status: splitList(status), Name: name, Newest: order == "newest", Limit: limit})
				if err != nil {
					return err
				}
				if a.json() {
					if tasks == nil {
						tasks = []api.Task{}
					}
					return a.printJSON(tasks)
				}
				return render.Tasks(a.stdout, tasks, total)
			})
		},
	}
	cmd.Flags().StringSliceVar(&status, "status", nil, "only tasks shown with this status: queued, running, interrupted, waiting_approval, paused, succeeded, failed, cancelled (repeat or comma-separate)")
	cmd.Flags().StringVar(&name, "name", "", "only tasks of this name")
	cmd.Flags().StringVar(&order, "order", "newest", "newest or oldest first, by submission")
	cmd.Flags().IntVar(&limit, "limit", lsDefaultLimit, "at most this many tasks (0: all; default for -o json: all)")
	_ = cmd.RegisterFlagCompletionFunc("status", cobra.FixedCompletions([]string{"queued", "running", "interrupted", "waiting_approval", "paused", "succeeded", "failed", "cancelled"}, cobra.ShellCompDirectiveNoFileComp))
	_ = cmd.RegisterFlagCompletionFunc("order", cobra.FixedCompletions([]string{"newest", "oldest"}, cobra.ShellCompDirectiveNoFileComp))
	return cmd
}

// splitList splits repeated, comma-separated flag values into one list.
func splitList(vs []string) []string {
	var out []string
	for _, v := range vs {
		for _, p := range strings.Split(v, ",") {
			if p = strings.TrimSpace(p); p != "" {
				out = append(out, p)
			}
		}
	}
	return out
}

func (a *app) statusCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "status ID",
		Short: "One task's progress report: where it is, what it did, why it stopped",
		Long: `One task's progress report. It starts with one line a person reads at a glance:

  site-audit · running 1h12m · 1,840 / 3,000 pages (61%) · 24 pages/s · about 48 min left · budget 58% used

the task, its status and how long it has worked (not paused nor waiting),
the committed units of the progress step of its pass (the progress block's
step, else its largest fan-out; "pass 2" after a repair entered it again),
the rate over the last half minute or so and the time left at that rate
("time left unknown" when it cannot be told: too few commits yet, none for
a minute, the task not running, or the total not known yet), and the budget
used most. Then the counters (with the progress block's labels), the notes
by kind with the newest 3 of each ("lhengine notes ID" pages through the
rest), what waits for a person (approvals, effects, a pause) with the
command that continues, and the details: objective, attempts, lease,
budget, steps. -o json gives the report with the same numbers in
"progress".`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.withClient(cmd.Context(), func(c *api.Client) error {
				rep, err := c.Report(cmd.Context(), args[0])
				if err != nil {
					return err
				}
				if a.json() {
					return a.printJSON(rep)
				}
				render.Report(a.stdout, rep)
				return nil
			})
		},
	}
}

func sha(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// outputsDefaultLimit is how many items of a fan-out step's output, or
// attempts, outputs prints as text unless --limit says.
const outputsDefaultLimit = 20

func (a *app) outputsCmd() *cobra.Command {
	var (
		attempts bool
		item     int
		limit    int
	)
	cmd := &cobra.Command{
		Use:   "outputs ID [STEP]",
		Short: "Recorded step outputs (current pass); --attempts lists every attempt with its failure and log",
		Long: `outputs prints the outputs of a task's steps in their current pass, or of
STEP alone.

A fan-out step's output is one item per unit: text shows the first 20 items
(--limit N for more, 0 for all) and says how many more there are; --item N
shows item N's output alone, as its unit committed it. --attempts lists the
recorded attempts instead (every pass and retry, failed ones with their
failure and log), the first 20 as text, with --item and --limit too.
-o json prints whole outputs unless --limit or --item is given: with --limit,
the committed items of STEP ({"items": [{"item", "attempt", "output"}], ...});
with --item, that item's output.`,
		Args: cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			step := ""
			if len(args) == 2 {
				step = args[1]
			}
			itemSet, limitSet := cmd.Flags().Changed("item"), cmd.Flags().Changed("limit")
			if itemSet && step == "" {
				return &exitError{code: exitUsage, err: errors.New("--item needs STEP: lhengine outputs ID STEP --item N")}
			}
			if itemSet && item < 0 {
				return &exitError{code: exitUsage, err: fmt.Errorf("invalid argument --item %d: items are numbered from 0", item)}
			}
			if limit < 0 {
				return &exitError{code: exitUsage, err: fmt.Errorf("invalid argument --limit %d: want a count, or 0 for all", limit)}
			}
			if !itemSet {
				item = -1
			}
			if a.json() && !limitSet {
				limit = 0
			}
			return a.withClient(ctx, func(c *api.Client) error {
				t, err := c.Task(ctx, args[0])
				if err != nil {
					return err
				}
				if step != "" && t.StepIndex(step) < 0 {
					return fmt.Errorf("task %s has no step %q (its steps: %s)", t.ID, step, strings.Join(stepNames(t), ", "))
				}
				if attempts {
					all, total, err := c.AttemptPage(ctx, t.ID, api.AttemptQuery{Step: step, Item: item, Limit: limit})
					if err != nil {
						return err
					}
					if err := a.printAttempts(t, all); err != nil || a.json() {
						return err
					}
					render.More(a.stdout, total-len(all), "attempts")
					return nil
				}
				if itemSet {
					it, err := c.CommittedItem(ctx, t.ID, step, item)
					if err != nil {
						return err
					}
					if a.json() {
						return a.printJSON(it.Output)
					}
					fmt.Fprintf(a.stdout, "== %s item %d (pass %d, attempt %d)\n%s\n", step, it.Item, t.Steps[t.StepIndex(step)].Pass, it.Attempt, render.IndentJSON(it.Output))
					return nil
				}
				if a.json() && step != "" && limitSet {
					part, err := c.Committed(ctx, t.ID, step, allIfZero(limit))
					if err != nil {
						return err
					}
					return a.printJSON(part)
				}
				outs, err := c.Outputs(ctx, t.ID, step)
				if err != nil {
					return err
				}
				if a.json() {
					if step != "" {
						if out, ok := outs[step]; ok {
							return a.printJSON(out)
						}
						if st := t.StepIndex(step); st >= 0 && t.Steps[st].Done > 0 {
							// A step still running: what its units committed so far.
							part, err := c.Committed(ctx, t.ID, step, 0)
							if err != nil {
								return err
							}
							return a.printJSON(part)
						}
						return fmt.Errorf("step %q of task %s has no output yet", step, t.ID)
					}
					return a.printJSON(outs)
				}
				for _, s := range t.Steps {
					if step != "" && s.Name != step {
						continue
					}
					out, ok := outs[s.Name]
					if (s.FanOut && s.Done > 0) || (!ok && step != "" && s.Done > 0) {
						// One line per committed item, the first limit of
						// them: a fan-out's output, or what a step still
						// running committed so far.
						part, err := c.Committed(ctx, t.ID, s.Name, allIfZero(limit))
						if err != nil {
							return err
						}
						render.Items(a.stdout, s.Name, ok, part)
						continue
					}
					if !ok {
						fmt.Fprintf(a.stdout, "== %s: no output yet\n", s.Name)
						continue
					}
					fmt.Fprintf(a.stdout, "== %s (pass %d)\n%s\n", s.Name, s.Pass, render.IndentJSON(out))
				}
				return nil
			})
		},
	}
	cmd.Flags().BoolVar(&attempts, "attempts", false, "list every recorded attempt, including failed ones and earlier passes")
	cmd.Flags().IntVar(&item, "item", 0, "only this item of STEP (numbered from 0): its committed output, or with --attempts its attempts")
	cmd.Flags().IntVar(&limit, "limit", outputsDefaultLimit, "at most this many items of a fan-out step's output, or attempts (0: all; default for -o json: all)")
	return cmd
}

// allIfZero maps a --limit to Client.Committed's: 0 (all) is -1.
func allIfZero(limit int) int {
	if limit == 0 {
		return -1
	}
	return limit
}

// stepNames lists the names of t's steps.
func stepNames(t *api.Task) []string {
	names := make([]string, len(t.Steps))
	for i, s := range t.Steps {
		names[i] = s.Name
	}
	return names
}

func (a *app) printAttempts(t *api.Task, all []*api.Attempt) error {
	if a.json() {
		if all == nil {
			all = []*api.Attempt{}
		}
		return a.printJSON(all)
	}
	render.Attempts(a.stdout, t, all)
	return nil
}

func (a *app) eventsCmd() *cobra.Command {
	var (
		follow bool
		since  string
		f      eventFilter
	)
	cmd := &cobra.Command{
		Use:   "events ID",
		Short: "The task's durable event log; --follow streams it live until the task finishes",
		Long: `events prints a task's durable event log.

With --follow it then streams new events from the process that owns the home
(run, resume, worker, serve) as they commit, and ends when the task finishes:
exit 0 if it succeeded, 1 if it failed or was cancelled. When no process works
on the task, it says so and waits for one (start "lhengine resume ID" or
"lhengine serve" in another terminal); it never holds the home while it waits.
Ctrl-C stops following (exit 130); the task is not affected.

--type keeps the events of the types named (repeat it or comma-separate:
--type unit_failed,item_failed), --since those at or after a time (a
duration back from now, 10m or 2h, or an RFC 3339 time), both while
following too. --limit N prints the first N that match and says how many
more there are (not with --follow). The owner filters: only the events
printed cross the socket.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if since != "" {
				at, err := parseSince(since, time.Now())
				if err != nil {
					return &exitError{code: exitUsage, err: err}
				}
				f.since = at
			}
			if f.limit < 0 {
				return &exitError{code: exitUsage, err: fmt.Errorf("invalid argument --limit %d: want a count, or 0 for all", f.limit)}
			}
			if follow && f.limit > 0 {
				return &exitError{code: exitUsage, err: errors.New("--limit does not go with --follow: a followed log has no end to count to")}
			}
			return a.events(cmd.Context(), args[0], follow, f)
		},
	}
	cmd.Flags().BoolVarP(&follow, "follow", "f", false, "stream new events until the task finishes; exit 0 if it succeeded, 1 if not")
	cmd.Flags().StringSliceVar(&f.types, "type", nil, "only events of this type, such as unit_failed (repeat or comma-separate)")
	cmd.Flags().StringVar(&since, "since", "", "only events at or after this time: a duration back from now (10m, 2h) or an RFC 3339 time")
	cmd.Flags().IntVar(&f.limit, "limit", 0, "at most this many events, the first that match (0: all)")
	_ = cmd.RegisterFlagCompletionFunc("type", cobra.FixedCompletions(eventTypes, cobra.ShellCompDirectiveNoFileComp))
	return cmd
}

// eventTypes are the types of events --type completes.
var eventTypes = []string{
	string(api.EvSubmitted), string(api.EvStarted), string(api.EvStepStarted), string(api.EvUnitDone),
	string(api.EvUnitFailed), string(api.EvUnitRetry), string(api.EvLeaseExpired), string(api.EvStepDone),
	string(api.EvRepair), string(api.EvSucceeded), string(api.EvFailed), string(api.EvCancelled),
	string(api.EvPaused), string(api.EvResumed), string(api.EvEffectResolved), string(api.EvRetried),
	string(api.EvModelCall), string(api.EvReleased), string(api.EvItemFailed), string(api.EvBudgetWarning),
	string(api.EvBudgetRaised), string(api.EvDrift), string(api.EvApprovalRequested), string(api.EvApprovalDecided),
	string(api.EvApprovalExpired), string(api.EvApprovalVoided), string(api.EvWaitingApproval),
	string(api.EvEffectUnknown), string(api.EvNotesCompacted),
}

// eventFilter is what events --type, --since and --limit select.
type eventFilter struct {
	types []string
	since time.Time
	limit int
}

func (f eventFilter) set() bool { return len(f.types) > 0 || !f.since.IsZero() || f.limit > 0 }

// match says whether e passes the type and time filters.
func (f eventFilter) match(e *api.Event) bool {
	return (len(f.types) == 0 || slices.Contains(f.types, string(e.Type))) && !e.Time.Before(f.since)
}

// parseSince reads --since: a duration back from now, or an RFC 3339 time.
func parseSince(v string, now time.Time) (time.Time, error) {
	if d, err := time.ParseDuration(v); err == nil {
		if d < 0 {
			return time.Time{}, fmt.Errorf("invalid argument --since %q: a duration back from now is not negative", v)
		}
		return now.Add(-d), nil
	}
	if at, err := time.Parse(time.RFC3339Nano, v); err == nil {
		return at, nil
	}
	return time.Time{}, fmt.Errorf("invalid argument --since %q: want a duration back from now (10m, 2h) or an RFC 3339 time (2026-03-04T12:00:00Z)", v)
}

// events prints the task's events and, following, streams new ones from
// the home's owner. Between owners it waits, holding nothing: it looks
// at the home only to read what is there. On a PostgreSQL store it
// streams them from the store itself, whoever works the task.
func (a *app) events(ctx context.Context, ref string, follow bool, f eventFilter) error {
	var from uint64
	waiting, cut := false, false
	deadline := time.Now().Add(home.OwnWait)
	for {
		s, err := a.connect(ctx, home.Mode{})
		if err != nil {
			return err
		}
		done, t, err := a.eventsOnce(ctx, s, ref, &from, follow, f)
		last := s.Self
		if !s.Local() {
			last = *s.Owner
		}
		cerr := s.Close()
		if !s.Local() && a.server == "" && errors.Is(err, api.ErrOwnerGone) && ctx.Err() == nil && time.Now().Before(deadline) {
			// The owner went away under a read (it stopped or died, or
			// held the home for a moment): look at the home again.
			continue
		}
		if err != nil || cerr != nil {
			return errors.Join(err, cerr)
		}
		deadline = time.Now().Add(home.OwnWait)
		ref = t.ID
		if !follow {
			return nil
		}
		if done {
			if t.Status == api.Succeeded {
				return nil
			}
			return &exitError{code: exitFailed, err: fmt.Errorf("task %s %s%s", t.ID, t.Status, reasonSuffix(t))}
		}
		if !s.Local() && !cut {
			// The owner's stream ended before the task's end: it stopped
			// or died, perhaps as it finished the task (its last word
			// may not have reached us). Look at the home again at once
			// rather than wait for a next owner that need not come.
			cut = true
			continue
		}
		cut = false
		if !waiting {
			fmt.Fprintf(a.stderr, "task %s is %s and no process is working on it; waiting for one (start `lhengine resume %s` or `lhengine serve`), Ctrl-C to stop\n",
				t.ID, t.ShownStatus, t.ID)
			waiting = true
		}
		if err := home.WaitForOwner(ctx, a.home, last, t.ID); err != nil {
			return err
		}
	}
}

// eventsOnce prints the events from *from on through s and, following and
// if s is another process that works the task, streams them until the
// task finishes or that owner goes away. It reports whether the task is
// finished.
func (a *app) eventsOnce(ctx context.Context, s *home.Session, ref string, from *uint64, follow bool, f eventFilter) (bool, *api.Task, error) {
	t, err := s.Client.Task(ctx, ref)
	if err != nil {
		return false, nil, err
	}
	enc := json.NewEncoder(a.stdout)
	print := func(e *api.Event) error {
		*from = e.Seq + 1
		if !f.match(e) {
			return nil
		}
		if a.json() {
			return enc.Encode(e)
		}
		render.Event(a.stdout, e)
		return nil
	}
	// On a store that other processes share (PostgreSQL), the task's
	// workers are elsewhere: this process follows the store itself,
	// which hears their commits, until the task ends.
	shared := a.sharedStore()
	if !follow || !shared && (s.Local() || !t.Worked) {
		var evs []api.Event
		total := -1
		if f.set() {
			evs, total, err = s.Client.EventPage(ctx, t.ID, api.EventQuery{From: *from, Types: f.types, Since: f.since, Limit: f.limit})
		} else {
			evs, err = s.Client.Events(ctx, t.ID, *from)
		}
		if err != nil {
			return false, nil, err
		}
		for i := range evs {
			if err := print(&evs[i]); err != nil {
				return false, nil, err
			}
		}
		if !a.json() && total >= 0 {
			render.More(a.stdout, total-len(evs), "events")
		}
		return t.Status.Terminal(), t, nil
	}
	finished := false
	err = s.Client.Follow(ctx, t.ID, *from, func(it api.StreamItem) error {
		switch it.Type {
		case api.StreamEvent:
			return print(it.Event)
		case api.StreamTask:
			t = it.Task
		case api.StreamEnd:
			t, finished = it.Task, true
		}
		return nil
	})
	if err != nil && ctx.Err() != nil {
		return false, nil, ctx.Err()
	}
	if errors.Is(err, api.ErrOwnerGone) && !finished {
		a.ownerLeft(ctx, s.Owner, t.ID)
	}
	// A stream cut short (the owner stopped or died): the caller looks
	// at the home again.
	return finished, t, nil
}

// ownerLeft says on stderr that owner o stopped serving before task id
// finished, and how: it stopped, it died, or (neither seen within two
// seconds) it stopped answering.
func (a *app) ownerLeft(ctx context.Context, o *api.Owner, id string) {
	if a.server != "" {
		fmt.Fprintf(a.stderr, "the server at %s closed the event stream before task %s finished\n", a.server, id)
		return
	}
	fate, err := home.Gone(ctx, a.home, o)
	if err != nil {
		return
	}
	fmt.Fprintf(a.stderr, "%s %s before task %s finished\n", o, fate, id)
}

func (a *app) pluginCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "plugin", Short: "Plugin tools"}
	cmd.AddCommand(a.pluginNewCmd(), a.pluginTestCmd())
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
