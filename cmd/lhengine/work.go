package main

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"math"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/lhengine/lhengine/api"
	"github.com/lhengine/lhengine/cmd/lhengine/internal/home"
	"github.com/lhengine/lhengine/cmd/lhengine/internal/live"
	"github.com/lhengine/lhengine/cmd/lhengine/internal/render"
	"github.com/lhengine/lhengine/engine"
	"github.com/lhengine/lhengine/ledger"
	"github.com/lhengine/lhengine/server"
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
	var pf policyFlags
	cmd := &cobra.Command{
		Use:   "validate FILE.hcl",
		Short: "Check a task file (with the policies a run would apply); errors show file:line:col with a source excerpt",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var req api.SubmitRequest
			if err := pf.apply(&req); err != nil {
				return err
			}
			diags, grants := engine.ValidatePolicies(cmd.Context(), args[0], engine.ValidateOptions{
				Policies: req.Policies, Without: req.Without, PolicyDirs: req.PolicyDirs, Home: a.home,
				GrantPolicies: req.GrantPolicies})
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
				if grants == nil {
					grants = []engine.PolicyGrant{}
				}
				if err := a.printJSON(map[string]any{"valid": !diags.HasErrors(), "diagnostics": out, "grants": grants}); err != nil {
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
				return render.Grants(a.stdout, grants)
			}
			return nil
		},
	}
	pf.register(cmd)
	return cmd
}

// policyFlags are the flags of run, submit and validate that choose a
// run's policies.
type policyFlags struct {
	add, without, dirs, grant []string
}

func (f *policyFlags) register(cmd *cobra.Command) {
	cmd.Flags().StringArrayVar(&f.add, "policy", nil, "apply policy NAME or NAME@VERSION, adding it or re-versioning one the task lists (repeatable)")
	cmd.Flags().StringArrayVar(&f.without, "without", nil, "do not apply policy NAME though the task lists it (repeatable)")
	cmd.Flags().StringArrayVar(&f.dirs, "policies", nil, "look for policies in DIR too, after policies/ beside the task file and before HOME/policies (repeatable)")
	cmd.Flags().StringArrayVar(&f.grant, "grant-policy", nil, "let the steps policy NAME inserts reach what no step of the task does (mounts, hosts, effects, workspace, models); refused otherwise (repeatable)")
}

// apply sets the policy fields of req; directories become absolute, since
// the owner may run elsewhere.
func (f *policyFlags) apply(req *api.SubmitRequest) error {
	req.Policies, req.Without, req.GrantPolicies = f.add, f.without, f.grant
	for _, d := range f.dirs {
		abs, err := filepath.Abs(d)
		if err != nil {
			return err
		}
		req.PolicyDirs = append(req.PolicyDirs, abs)
	}
	return nil
}

func (a *app) submitCmd() *cobra.Command {
	var vars []string
	var key string
	var pf policyFlags
	var rf replayFlag
	var follow bool
	cmd := &cobra.Command{
		Use:   "submit FILE.hcl",
		Short: "Queue a task and print its id at once; a worker runs it",
		Long: `submit queues a task and prints its id at once; the home's owner (lhengine
serve, lhengine worker) works it.

With --follow it then follows the task to its end with the live progress
bar run shows (plain lines when stderr is not a terminal), prints the
outcome as run does, and exits with run's status. --follow needs serve or
worker to own the home: with no such owner nothing would work the task
("lhengine run FILE.hcl" works it in this process).

With --server URL the task file is read on this machine, with its
plugins, prompts, the policies of its search path (policies/ beside it,
--policy-dir, then this home's policies/) and the --model-replay
recordings, and validated here; their contents are uploaded to the server,
only those it does not hold yet, and the task is submitted from them: the
server reads none of this machine's paths. Mount sources and the files of
file and git facts name the server's disk.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			req, err := submitRequest(args[0], vars)
			if err != nil {
				return err
			}
			req.IdempotencyKey = key
			if key == "" {
				// A key of its own lets it send the submission again if
				// the home's owner goes away under it (a command that held
				// the home for a moment): never two tasks.
				req.IdempotencyKey = "submit-" + rand.Text()
			}
			if err := pf.apply(&req); err != nil {
				return err
			}
			if err := rf.apply(&req); err != nil {
				return err
			}
			return a.withSessionAgain(cmd.Context(), home.Mode{Create: true}, func(s *home.Session) error {
				// On a store shared by many processes (PostgreSQL) the
				// workers are elsewhere: follow the task through the store.
				shared := a.sharedStore()
				if follow && !shared && (s.Local() || !s.Owner.WorksAll()) {
					return &exitError{code: exitUsage, err: fmt.Errorf("--follow: nothing works the tasks of home %s (no lhengine serve or lhengine worker owns it): "+
						"start one, or work the task in this process with: lhengine run %s", a.home, args[0])}
				}
				r, err := a.submit(cmd.Context(), s, req)
				if err != nil {
					return err
				}
				if follow {
					if !a.json() {
						fmt.Fprintf(a.stdout, "task %s\n", r.ID)
					}
					return a.workOrFollow(cmd.Context(), s, r.ID, defaultConcurrency, recordFlag{}, s.Local() && !shared)
				}
				if a.json() {
					return a.printJSON(r)
				}
				fmt.Fprintln(a.stdout, r.ID)
				return nil
			})
		},
	}
	cmd.Flags().BoolVarP(&follow, "follow", "f", false, "follow the task to its end with the live progress bar, with run's exit status (needs lhengine serve or worker, or workers on the --store)")
	cmd.Flags().StringArrayVar(&vars, "var", nil, "set a task variable: name=value (repeatable)")
	cmd.Flags().StringVar(&key, "idempotency-key", "", "return the task submitted earlier with this key instead of a new one (default: a random key of this submit's own)")
	pf.register(cmd)
	rf.register(cmd)
	return cmd
}

// submit submits req through s, with a line on a terminal saying what
// happens while the task's plugins load.
func (a *app) submit(ctx context.Context, s *home.Session, req api.SubmitRequest) (*api.SubmitResponse, error) {
	p := a.compiling
	if p == nil {
		return a.send(ctx, s, req)
	}
	if !s.Local() {
		p.Remote(s.Owner, req.Path)
	}
	a.logs.to(p)
	defer a.logs.to(nil)
	defer p.Finish()
	defer p.Ticking()() // the elapsed time moves while a plugin compiles
	return a.send(ctx, s, req)
}

// send sends req through s. To a server (--server) the task file is read
// here and uploaded, with its plugins, prompts, policies and recordings,
// those the server does not hold only (specs/api.md, "Uploads"): the
// server reads no path of this machine's. A task file that does not
// validate is reported from here, with file:line:col, before anything is
// sent. Over the home's socket the owner reads req.Path itself.
func (a *app) send(ctx context.Context, s *home.Session, req api.SubmitRequest) (*api.SubmitResponse, error) {
	if a.server == "" {
		return s.Client.Submit(ctx, req)
	}
	r, _, err := server.SubmitRemote(ctx, s.Client, req, a.home)
	return r, err
}

// submitRequest is the API request for the task file at path: the owner
// may run in another directory, so the path it gets is absolute.
func submitRequest(path string, vars []string) (api.SubmitRequest, error) {
	vs, err := parseVars(vars)
	if err != nil {
		return api.SubmitRequest{}, err
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return api.SubmitRequest{}, err
	}
	return api.SubmitRequest{Path: abs, Vars: vs}, nil
}

func (a *app) runCmd() *cobra.Command {
	var vars []string
	var conc int
	var pf policyFlags
	var rf replayFlag
	var mf recordFlag
	cmd := &cobra.Command{
		Use:   "run FILE.hcl",
		Short: "Submit a task and work it to the end on the embedded store, with live progress",
		Long: `Submit a task and work it to the end on the embedded store.

The task id is printed at once. While it works, a live bar on stderr shows
the numbers "lhengine status" starts with: working time, done / total of the
counted step in its unit (the task's progress block), percent, rate, time
left ("time left unknown" until it can be told), the step the task is at
(and its pass after a repair), and the labelled counters beneath; log lines
are printed above it. When stderr is not a terminal, that line is printed as
plain text at each step change, every 5 seconds and at the end. At the end
the final status and the last step's output are printed. If the process
dies, "lhengine resume ID" continues from the last committed work unit.
If the task pauses (a budget reached, "lhengine pause", a drift) or waits
for a person, run returns, saying why and the command that continues it,
with exit status 3.

With --server URL the task's files are read here and uploaded, as submit
does, and the server works the task.

While it runs, this process owns the home: other commands (status, events
--follow, cancel...) reach it through the home's API socket. If "lhengine
serve" already owns the home, run submits the task there and follows it.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			req, err := submitRequest(args[0], vars)
			if err != nil {
				return err
			}
			if err := pf.apply(&req); err != nil {
				return err
			}
			if err := rf.apply(&req); err != nil {
				return err
			}
			if rf.dir != "" && mf.dir != "" {
				return errors.New("--model-replay and --model-record exclude each other: a replayed call sends nothing to record")
			}
			return a.withWorker(cmd.Context(), true, func(s *home.Session) error {
				r, err := a.submit(cmd.Context(), s, req)
				if err != nil {
					return err
				}
				if !a.json() {
					fmt.Fprintf(a.stdout, "task %s\n", r.ID)
				}
				return a.workTask(cmd.Context(), s, r.ID, conc, mf)
			})
		},
	}
	cmd.Flags().StringArrayVar(&vars, "var", nil, "set a task variable: name=value (repeatable)")
	cmd.Flags().IntVar(&conc, "concurrency", defaultConcurrency, "attempts run at once (fan-out steps also obey their own concurrency)")
	a.registerGrace(cmd)
	pf.register(cmd)
	rf.register(cmd)
	mf.register(cmd)
	return cmd
}

// withWorker runs fn with a session in which a task can be worked: this
// process owns the home (and works the task fn names), or the home's
// owner works every task (serve, worker) and this command follows it.
func (a *app) withWorker(ctx context.Context, create bool, fn func(*home.Session) error) error {
	return a.withSession(ctx, home.Mode{Create: create, Works: "task", Own: true}, func(s *home.Session) error {
		if !s.Local() && !s.Owner.WorksAll() {
			return fmt.Errorf("home %s is owned by %s, which works only its own task: wait for it to finish, "+
				"or run many tasks in one home with \"lhengine serve\"", a.home, s.Owner)
		}
		return fn(s)
	})
}

func (a *app) resumeCmd() *cobra.Command {
	var conc int
	var mf recordFlag
	var follow bool
	var budgets []string
	cmd := &cobra.Command{
		Use:   "resume ID",
		Short: "Continue a task from its last committed work unit (after a crash, kill or stop)",
		Long: `resume continues a task from its last committed work unit (after a crash,
a kill or a stop): this process owns the home and works the task to its end,
with the live progress bar run shows.

If the home's owner already works every task (lhengine serve, lhengine
worker), resume hands the task to it (resuming it if it was paused), says
so and returns; with --follow it follows the task to its end instead, with
the exit status run would have.

--budget NAME=VALUE or NAME=+DELTA (repeatable) raises a budget of the task
first (wall_time, cost, units, repairs, consecutive_failures; wall_time as a
duration: --budget wall_time=+2h); each raise is an event naming who raised
it. A task paused by a budget resumes only once the budget is raised.

Like run, resume returns when the task pauses or waits for a person, saying
why and the command that continues it, with exit status 3.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.withWorker(cmd.Context(), false, func(s *home.Session) error {
				for _, b := range budgets {
					if _, err := ledger.ParseBudgetRaise(b); err != nil {
						return &exitError{code: exitUsage, err: fmt.Errorf("--budget %v", err)}
					}
				}
				t, err := s.Client.ResumeWith(cmd.Context(), args[0], api.ResumeRequest{Budget: budgets, By: who(), Where: fmt.Sprintf("%s (pid %d)", cwdHost(), os.Getpid())})
				if err != nil {
					return err
				}
				if !s.Local() && !follow {
					if a.json() {
						return a.printJSON(t)
					}
					done, total := t.Progress()
					fmt.Fprintf(a.stdout, "task %s is already being worked by %s at %d/%d units; follow it with: lhengine events %s --follow\n",
						t.ID, s.Owner, done, total, t.ID)
					return nil
				}
				if !a.json() {
					done, total := t.Progress()
					fmt.Fprintf(a.stdout, "task %s resuming at %d/%d units\n", t.ID, done, total)
				}
				return a.workTask(cmd.Context(), s, t.ID, conc, mf)
			})
		},
	}
	cmd.Flags().IntVar(&conc, "concurrency", defaultConcurrency, "attempts run at once")
	a.registerGrace(cmd)
	cmd.Flags().BoolVarP(&follow, "follow", "f", false, "when the home's owner (serve, worker) already works the task, follow it to its end instead of returning")
	cmd.Flags().StringArrayVar(&budgets, "budget", nil, "raise a budget first: NAME=VALUE or NAME=+DELTA (repeatable)")
	mf.register(cmd)
	return cmd
}

func reasonSuffix(t *api.Task) string {
	if t.Reason == "" {
		return ""
	}
	return " (" + t.Reason + ")"
}

// workTask works one task to its end with the live progress (live.Bar) on stderr, then
// prints the outcome. A task that did not succeed is exit status 1. In a
// session of another owner, that owner works it and this command follows
// its stream.
func (a *app) workTask(ctx context.Context, s *home.Session, id string, conc int, mf recordFlag) error {
	return a.workOrFollow(ctx, s, id, conc, mf, s.Local())
}

// workOrFollow is workTask, which works the task in this process when
// work is set (the session owns the home) and otherwise follows it as
// another process works it: the home's owner, or, on a store shared by
// many processes, the workers elsewhere (submit --follow).
func (a *app) workOrFollow(ctx context.Context, s *home.Session, id string, conc int, mf recordFlag, work bool) error {
	o := engine.WorkOptions{Concurrency: conc, Task: id, ExitWhenIdle: true}
	if err := mf.apply(&o, work); err != nil {
		return err
	}
	p := live.NewBar(a.stderr, live.IsTerminal(a.stderr), func(ctx context.Context) (*api.Report, error) {
		return s.Client.Report(ctx, id)
	})
	p.Start(ctx)
	a.logs.to(p)
	var err error
	if work {
		s.Server.SetWorks(id)
		o.OnCommit = func(*ledger.Task) { p.Changed() }
		err = a.work(ctx, s, o, p)
	} else {
		err = s.Client.Follow(ctx, id, math.MaxUint64, func(it api.StreamItem) error {
			if it.Task != nil {
				p.Changed()
				if stopsFollowing(it.Task.Status) && it.Task.Leases == 0 {
					return errStopped
				}
			}
			return nil
		})
		if errors.Is(err, errStopped) {
			err = nil
		}
	}
	p.Finish(ctx)
	a.logs.to(nil)
	if err != nil {
		if ctx.Err() != nil {
			switch {
			case work:
				fmt.Fprintf(a.stderr, "interrupted; continue with: lhengine resume %s\n", id)
			case s.Local():
				fmt.Fprintf(a.stderr, "stopped following; the store's workers go on working task %s (lhengine events %s --follow)\n", id, id)
			default:
				fmt.Fprintf(a.stderr, "stopped following; %s goes on working task %s (lhengine events %s --follow)\n", s.Owner, id, id)
			}
			return &exitError{code: exitInterrupted}
		}
		if !s.Local() && errors.Is(err, api.ErrOwnerGone) {
			return fmt.Errorf("%s, which worked task %s, went away before it finished; continue with: lhengine resume %s", s.Owner, id, id)
		}
		return err
	}
	t, err := s.Client.Task(context.WithoutCancel(ctx), id)
	if err != nil {
		return err
	}
	if ctx.Err() != nil && (t.Status == api.Queued || t.Status == api.Running) {
		// Stopped before the end (the stop said what became of the
		// units in flight).
		fmt.Fprintf(a.stderr, "interrupted; continue with: lhengine resume %s\n", id)
		return &exitError{code: exitInterrupted}
	}
	if a.json() {
		if err := a.printJSON(t); err != nil {
			return err
		}
	} else {
		done, total := t.Progress()
		fmt.Fprintf(a.stdout, "task %s %s: %d/%d units%s\n", t.ID, t.ShownStatus, done, total, reasonSuffix(t))
		if t.Status == api.Succeeded {
			fmt.Fprintf(a.stdout, "output of step %q:\n%s\n", t.Steps[len(t.Steps)-1].Name, render.IndentJSON(t.Output))
		}
		if stopsFollowing(t.Status) {
			fmt.Fprintf(a.stdout, "continue with: %s\n", render.Continue(t))
		}
	}
	if stopsFollowing(t.Status) {
		return &exitError{code: exitPaused}
	}
	if t.Status != api.Succeeded {
		return &exitError{code: exitFailed}
	}
	return nil
}

func (a *app) workerCmd() *cobra.Command {
	var o engine.WorkOptions
	var mf recordFlag
	var metricsAddr string
	cmd := &cobra.Command{
		Use:   "worker",
		Short: "Claim and run queued work units until stopped",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.withOwner(cmd.Context(), func(s *home.Session) error {
				if err := mf.apply(&o, true); err != nil {
					return err
				}
				if metricsAddr != "" {
					stop, err := a.serveMetrics(metricsAddr, s.Engine)
					if err != nil {
						return err
					}
					defer stop()
				}
				return a.work(cmd.Context(), s, o, a.stderr)
			})
		},
	}
	cmd.Flags().StringVar(&metricsAddr, "metrics", "", "serve Prometheus metrics at http://ADDR/metrics while working, without a token (specs/metrics.md)")
	cmd.Flags().IntVar(&o.Concurrency, "concurrency", defaultConcurrency, "attempts run at once (at least 1)")
	cmd.Flags().BoolVar(&o.ExitWhenIdle, "exit-when-idle", false, "exit once no queued or running task is left")
	cmd.Flags().StringVar(&o.Name, "name", "", "worker name in lease owners (default worker-PID)")
	cmd.Flags().DurationVar(&o.LeaseFor, "lease", 30*time.Second, "lease length, at least 1s; renewed at a third of it while a step runs")
	cmd.Flags().DurationVar(&o.PollEvery, "poll", time.Second, "longest wait of an idle worker before it looks for new work; positive")
	a.registerGrace(cmd)
	mf.register(cmd)
	return cmd
}

// withOwner runs fn with this process owning the home and working every
// task; a home another process owns is an error naming it.
func (a *app) withOwner(ctx context.Context, fn func(*home.Session) error) error {
	return a.withSession(ctx, home.Mode{Create: true, Works: "all", Own: true}, func(s *home.Session) error {
		if !s.Local() {
			what := "wait for it to finish or stop it"
			if s.Owner.WorksAll() {
				what = "its workers already run every task of the home"
			}
			return fmt.Errorf("home %s is owned by %s: %s", a.home, s.Owner, what)
		}
		return fn(s)
	})
}

func (a *app) cancelCmd() *cobra.Command {
	var reason string
	cmd := &cobra.Command{
		Use:   "cancel ID",
		Short: "Cancel a task; attempts in flight lose their leases",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.withClient(cmd.Context(), func(c *api.Client) error {
				t, err := c.Cancel(cmd.Context(), args[0], reason)
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

// cwdHost is where a command runs from: host:folder.
func cwdHost() string {
	h, _ := os.Hostname()
	dir, _ := os.Getwd()
	return h + ":" + dir
}

// serveMetrics serves e's Prometheus metrics at http://addr/metrics until
// stop is called, which closes the listener and waits for the server's
// goroutine. The address is the operator's choice, and nothing but the
// metrics is served there.
func (a *app) serveMetrics(addr string, e *engine.Engine) (stop func(), err error) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--metrics %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", e.MetricsHandler())
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(l) // ends with ErrServerClosed at stop
	}()
	fmt.Fprintf(a.stderr, "metrics: http://%s/metrics\n", l.Addr())
	return func() {
		_ = srv.Close()
		<-done
	}, nil
}
