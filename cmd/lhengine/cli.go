package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/spf13/cobra"
	"go.opentelemetry.io/otel/trace"

	"github.com/lhengine/lhengine/api"
	"github.com/lhengine/lhengine/cmd/lhengine/internal/home"
	"github.com/lhengine/lhengine/cmd/lhengine/internal/live"
	"github.com/lhengine/lhengine/cmd/lhengine/internal/memlimit"
	"github.com/lhengine/lhengine/engine"
	"github.com/lhengine/lhengine/ledger"
)

// Exit codes. One place decides them.
const (
	exitOK          = 0
	exitFailed      = 1 // an error, an invalid task file, or a task that did not succeed
	exitUsage       = 2 // bad command line
	exitPaused      = 3 // run or resume returned on a task that paused or waits for a person
	exitInterrupted = 130
)

// exitError carries an exit code (and maybe nothing more to print).
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit %d", e.code)
	}
	return e.err.Error()
}

// app holds the global flags and the streams of one invocation.
type app struct {
	stop      workStop // how a command that works tasks stops (stop.go)
	home      string
	homeWhy   string // how home was chosen (chooseHome)
	output    string
	logLevel  string
	damaged   bool   // --allow-damaged
	server    string // --server: an owner's API over TCP instead of the home
	tokenFile string // --token-file
	memLimit  string // --memory-limit
	cache     string // --cache: a directory, "off", or "" for the user's cache directory
	storeURL  string // --store: a PostgreSQL URL, or "" for the embedded store in the home
	migrate   bool   // --migrate: bring a PostgreSQL store's schema up to date as it opens
	stopGov   func() // ends the memory governor PersistentPreRunE started
	stdout    io.Writer
	stderr    io.Writer
	logs      logOutput // where the engine's log lines go

	// beforeClose, set when the process is a command of its own, runs
	// before the engine of a home it owns closes
	// (memlimit.BeforeStoreClose).
	beforeClose func()

	// Set by serve for the session it opens.
	dashboard bool
	extra     []home.Listener

	// compiling, set by submit and run, shows the plugin loads of a
	// submission this process makes as the home's owner.
	compiling *live.Compile

	// traces is the OTLP tracer provider of the OTEL_* environment, made
	// at the first engine this process opens (nil: no traces); endTraces
	// sends what is left at exit.
	traces    trace.TracerProvider
	tracesSet bool
	endTraces func(context.Context) error
}

// logOutput is the engine logger's output: stderr, or while a live progress
// line is drawn, the progress, which keeps the two apart.
type logOutput struct {
	mu     sync.Mutex
	stderr io.Writer
	via    io.Writer
}

func (o *logOutput) to(w io.Writer) {
	o.mu.Lock()
	o.via = w
	o.mu.Unlock()
}

func (o *logOutput) Write(b []byte) (int, error) {
	o.mu.Lock()
	w := o.via
	if w == nil {
		w = o.stderr
	}
	o.mu.Unlock()
	return w.Write(b)
}

// run is the whole command line program; main only maps its result to
// os.Exit. ctx ending asks the command to stop (one that works tasks stops
// gracefully, within its --grace).
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return runHalt(ctx, nil, args, stdout, stderr)
}

// runHalt is run with halt, whose end stops a command that works tasks at
// once, its grace cut short (main: a second SIGTERM or Ctrl-C).
func runHalt(ctx, halt context.Context, args []string, stdout, stderr io.Writer) int {
	a := &app{stdout: stdout, stderr: stderr, stop: workStop{halt: halt}}
	a.logs.stderr = stderr
	root := a.rootCmd()
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	err := root.ExecuteContext(ctx)
	if a.stopGov != nil {
		a.stopGov()
	}
	if a.endTraces != nil {
		// The last spans go out, within a bound: an endpoint that is gone
		// does not hold the exit.
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		if terr := a.endTraces(sctx); terr != nil {
			fmt.Fprintln(stderr, "warning: sending the last traces:", terr)
		}
		cancel()
	}
	if err == nil {
		return exitOK
	}
	if a.json() || a.output == "yaml" {
		return jsonFailure(ctx, stderr, err)
	}
	var ee *exitError
	if errors.As(err, &ee) {
		if ee.err != nil {
			fmt.Fprintln(stderr, "error:", ee.err)
		}
		return ee.code
	}
	var inv *engine.InvalidTaskError
	if errors.As(err, &inv) {
		_ = inv.Diagnostics.Write(stderr, 0, false)
		return exitFailed
	}
	var ae *api.Error
	if errors.As(err, &ae) && ae.Diagnostics != "" {
		// The owner rendered them, with the source excerpts it read.
		fmt.Fprint(stderr, ae.Diagnostics)
		return exitFailed
	}
	if ctx.Err() != nil {
		fmt.Fprintln(stderr, "interrupted")
		return exitInterrupted
	}
	fmt.Fprintln(stderr, "error:", err)
	if isUsage(err) {
		return exitUsage
	}
	return exitFailed
}

// jsonFailure writes err to stderr as one JSON object of the API's error
// shape, {"code", "error", "exit"} (and "diagnostics" for an invalid task
// file), so that a script run with -o json can branch on it, and returns
// the exit status the text form would.
func jsonFailure(ctx context.Context, stderr io.Writer, err error) int {
	out := struct {
		api.Error
		Exit int `json:"exit"`
	}{Error: api.Error{Code: api.CodeInternal, Message: err.Error()}, Exit: exitFailed}
	var ee *exitError
	var inv *engine.InvalidTaskError
	var ae *api.Error
	switch {
	case errors.As(err, &ee):
		out.Exit, out.Code = ee.code, exitCodeName(ee.code)
		out.Message = ""
		if ee.err != nil {
			out.Message = ee.err.Error()
		}
		if ee.code == exitFailed && ee.err == nil {
			out.Message = "the task did not succeed"
		}
	case errors.As(err, &inv):
		var b strings.Builder
		_ = inv.Diagnostics.Write(&b, 0, false)
		out.Code, out.Message, out.Diagnostics = api.CodeInvalidTask, "the task file is not valid", b.String()
	case errors.As(err, &ae):
		out.Error = *ae
	case ctx.Err() != nil:
		out.Exit, out.Code, out.Message = exitInterrupted, "interrupted", "interrupted"
	case isUsage(err):
		out.Exit, out.Code = exitUsage, "usage"
	case errors.Is(err, ledger.ErrNotFound), errors.Is(err, api.ErrNotFound), errors.As(err, new(*engine.NoHomeError)):
		out.Code = api.CodeNotFound
	}
	enc := json.NewEncoder(stderr)
	_ = enc.Encode(out)
	return out.Exit
}

// exitCodeName names an exit status for a JSON error.
func exitCodeName(code int) string {
	switch code {
	case exitUsage:
		return "usage"
	case exitPaused:
		return "paused"
	case exitInterrupted:
		return "interrupted"
	}
	return "failed"
}

func isUsage(err error) bool {
	s := err.Error()
	for _, p := range []string{"unknown command", "unknown flag", "unknown shorthand", "accepts ", "requires ", "invalid argument", "flag needs an argument", "-o must be", " is required: ", "too many arguments: "} {
		if strings.Contains(s, p) {
			return true
		}
	}
	return false
}

func (a *app) rootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:   "lhengine",
		Short: "Run long-horizon agent tasks durably: HCL pipelines of WebAssembly steps",
		Long: `lhengine runs tasks described in HCL as pipelines of WebAssembly step plugins.
Every step is a durable work unit: leased, checkpointed and resumable, so a task
survives crashes and restarts and always says how far it got.

State lives in an embedded store in a home: --home, else the nearest .lhengine in
this folder or a parent, else $LHENGINE_HOME, else ~/.local/share/lhengine
("lhengine home" says which, and why). With --store postgres://… (or
$LHENGINE_STORE) the ledger is kept in that PostgreSQL database instead, which
processes on many hosts share (lhengine workers lists them); the home then
holds the compiled plugins and the socket.
The process that has it open (run, resume, retry, worker, serve) serves the
home's API on a socket inside it, and every other command talks to that
process; with none alive, a command opens the home itself while it runs.

Exit codes: 0 success; 1 error, invalid task file, or a task that did not succeed;
2 bad command line; 3 run or resume returned on a task that paused or waits for a
person (it says why and the command that continues it); 130 interrupted.`,
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			a.chooseHome(cmd)
			if n := cmd.Name(); n == "submit" || n == "run" {
				a.compiling = live.NewCompile(a.stderr, time.Now)
			}
			if a.output != "" && a.output != "json" && a.output != "text" && (a.output != "yaml" || cmd.Name() != "handoff") {
				return fmt.Errorf("-o must be text or json (or yaml, for handoff), not %q", a.output)
			}
			floor, err := memlimit.Parse(a.memLimit)
			if err != nil {
				return &exitError{code: exitUsage, err: err}
			}
			if err := checkFlags(cmd); err != nil {
				return err
			}
			if a.storeURL != "" && !engine.IsPostgresURL(a.storeURL) {
				return &exitError{code: exitUsage, err: fmt.Errorf("--store must be a postgres:// URL (or empty for the embedded store in the home), not %q", a.storeURL)}
			}
			if governMemory {
				a.stopGov = memlimit.Start(floor)
				a.beforeClose = memlimit.BeforeStoreClose
			}
			return nil
		},
	}
	root.PersistentFlags().StringVar(&a.home, "home", "", "home directory of the store and caches (default: the nearest .lhengine in this folder or a parent, else $LHENGINE_HOME, else ~/.local/share/lhengine; lhengine home says which)")
	root.PersistentFlags().StringVarP(&a.output, "output", "o", "text", "output format: text or json")
	root.PersistentFlags().StringVar(&a.logLevel, "log-level", "warn", "engine log level on stderr: trace, debug, info, warn, error, off")
	root.PersistentFlags().StringVar(&a.server, "server", os.Getenv("LHENGINE_SERVER"), "talk to the API of \"lhengine serve --listen\" at this URL instead of a home (env LHENGINE_SERVER)")
	root.PersistentFlags().StringVar(&a.tokenFile, "token-file", "", "file holding the bearer token for --server (default: env "+api.TokenEnv+")")
	root.PersistentFlags().StringVar(&a.memLimit, "memory-limit", memlimit.Default(), "soft limit of the process's heap, or off: the collector reclaims freed memory before the heap passes it, and the limit rises to 1.25 times what is live when that is more (env LHENGINE_MEMORY_LIMIT; GOMEMLIMIT, if set, overrides it)")
	root.PersistentFlags().StringVar(&a.cache, "cache", os.Getenv("LHENGINE_CACHE"), "directory of compiled plugins, shared by every home that names it, or off (default: lhengine in the user's cache directory; env LHENGINE_CACHE)")
	root.PersistentFlags().StringVar(&a.storeURL, "store", os.Getenv("LHENGINE_STORE"), "keep the ledger in this PostgreSQL database (postgres://USER@HOST:PORT/DB) instead of the embedded store in the home, which then holds the caches and the socket only; any number of processes on any number of hosts may share it (env LHENGINE_STORE)")
	root.PersistentFlags().BoolVar(&a.migrate, "migrate", false, "bring a PostgreSQL store's schema up to this lhengine's before using it, as lhengine store migrate does")
	root.PersistentFlags().BoolVar(&a.damaged, "allow-damaged", false, "open a store that failed an integrity check (see: lhengine store verify)")
	root.AddCommand(
		a.validateCmd(), a.runCmd(), a.submitCmd(), a.workerCmd(), a.resumeCmd(), a.pauseCmd(), a.approvalsCmd(), a.decideCmd(true), a.decideCmd(false), a.handoffCmd(), a.homeCmd(),
		a.lsCmd(), a.statusCmd(), a.notesCmd(), a.outputsCmd(), a.eventsCmd(), a.cancelCmd(), a.pluginCmd(),
		a.artifactsCmd(), a.artifactCmd(), a.effectsCmd(), a.effectCmd(), a.failuresCmd(),
		a.storeCmd(), a.workersCmd(),
		a.rmCmd(), a.gcCmd(),
		a.benchCmd(),
		a.versionCmd(), a.retryCmd(), a.forkCmd(), a.serveCmd(), a.tokenCmd(),
		a.manifestCmd(),
		a.policiesCmd(),
		a.evalCmd(),
	)
	// --version prints what `lhengine version` does.
	root.Version = engine.Version
	root.SetVersionTemplate(versionText())
	nameArgs(root)
	a.addCompletions(root) // complete.go
	return root
}

func (a *app) json() bool { return a.output == "json" }

// cacheConfig resolves --cache for engine.Config: "off" keeps compiled
// plugins in memory only; a directory is used as it is; "" means lhengine
// in the user's cache directory (os.UserCacheDir: $XDG_CACHE_HOME or
// ~/.cache on Linux), or the home's own cache where the system names none.
func (a *app) cacheConfig() (dir string, off bool) {
	switch a.cache {
	case "off":
		return "", true
	case "":
		if d, err := os.UserCacheDir(); err == nil {
			return filepath.Join(d, "lhengine"), false
		}
		return "", false
	}
	return a.cache, false
}

// onCompile is engine.Config.OnCompile for this command: nil unless it
// submits.
func (a *app) onCompile() func(engine.CompileEvent) {
	if a.compiling == nil {
		return nil
	}
	return a.compiling.Event
}

func (a *app) logger() hclog.Logger {
	if strings.EqualFold(a.logLevel, "off") {
		return hclog.NewNullLogger()
	}
	return hclog.New(&hclog.LoggerOptions{Name: "lhengine", Level: hclog.LevelFromString(a.logLevel), Output: &a.logs})
}

func (a *app) printJSON(v any) error {
	enc := json.NewEncoder(a.stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func parseVars(kvs []string) (map[string]string, error) {
	out := map[string]string{}
	for _, kv := range kvs {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("invalid argument --var %q: want name=value", kv)
		}
		out[k] = v
	}
	return out, nil
}

// nameArgs makes every command's argument check name what is missing or
// extra from its usage line ("ID is required: lhengine status ID; list
// tasks with lhengine ls") instead of counting ("accepts 1 arg(s),
// received 0").
func nameArgs(c *cobra.Command) {
	for _, sub := range c.Commands() {
		nameArgs(sub)
	}
	check := c.Args
	if check == nil {
		return
	}
	c.Args = func(cmd *cobra.Command, args []string) error {
		err := check(cmd, args)
		if err == nil {
			return nil
		}
		words := strings.Fields(cmd.Use)[1:]
		var required []string
		for _, w := range words {
			if !strings.HasPrefix(w, "[") && !strings.HasSuffix(w, "...") {
				required = append(required, w)
			}
		}
		usage := cmd.CommandPath() + " " + strings.Join(words, " ")
		if len(args) < len(required) {
			missing := required[len(args)]
			msg := fmt.Sprintf("%s is required: %s", missing, usage)
			if missing == "ID" {
				msg += "; list tasks with lhengine ls"
			}
			if missing == "APPROVAL" {
				msg += "; list them with lhengine approvals"
			}
			return errors.New(msg)
		}
		if len(required) == len(words) && len(args) > len(words) {
			return fmt.Errorf("too many arguments: %s takes %d (%s), got %d: %s", cmd.CommandPath(), len(words), strings.Join(words, " "), len(args), strings.Join(args, " "))
		}
		return err
	}
}
