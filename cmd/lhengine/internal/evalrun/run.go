package evalrun

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"

	"github.com/lhengine/lhengine/engine"
	"github.com/lhengine/lhengine/ledger"
)

// DefaultSeed is the seed of a run that names none.
const DefaultSeed = 1

// DefaultWorkers is how many runs go at once by default.
const DefaultWorkers = 2

// Config configures Run.
type Config struct {
	Set *Set
	// Ablate adds states to the set's own ablations: NAME for the state
	// without policy NAME, NAME@VERSION for the state with that version.
	Ablate []string
	// PolicyDirs are searched after the set's policy_dirs (absolute).
	PolicyDirs []string
	Workers    int    // runs at once; 0 = DefaultWorkers
	Seed       uint64 // decides the order of the runs and the seed variable
	// Executable is the lhengine command a crash case runs as a child
	// process; required when a case has a crash point.
	Executable string
	// Scratch is where the runs' homes go; "" makes a temporary directory,
	// removed at the end unless KeepHomes.
	Scratch   string
	KeepHomes bool
	Logger    hclog.Logger
	// OnRun, when set, is called after each run, from the goroutine that
	// ran it (calls may come at once from several).
	OnRun func(*RunReport)
}

// Result is what an eval found: the set, the states, and every run.
type Result struct {
	Set           string        `json:"set"`
	Description   string        `json:"description,omitempty"`
	File          string        `json:"file"`
	SetSHA256     string        `json:"set_sha256"`
	EngineVersion string        `json:"engine_version"`
	Seed          uint64        `json:"seed"`
	Workers       int           `json:"workers"`
	Started       time.Time     `json:"started"`
	Finished      time.Time     `json:"finished"`
	States        []StateResult `json:"states"`
	Cases         []CaseInfo    `json:"cases"`
	// Runs are in the order they were started, which the seed decides.
	Runs []*RunReport `json:"runs"`
	// Homes is where the runs' stores were kept; "" when they were removed.
	Homes string `json:"homes,omitempty"`
}

// StateResult is one policy state and its figures.
type StateResult struct {
	Name string `json:"name"`
	// Ablation is what sets the state apart from the baseline: "" for the
	// baseline, NAME (without it) or NAME@VERSION (that version).
	Ablation string   `json:"ablation,omitempty"`
	Policies []string `json:"policies"` // added to each task's own (--policy)
	Without  []string `json:"without"`  // removed (--without)
	// Pins are the policies the state's runs applied, NAME@VERSION SHA256,
	// as their manifests pinned them.
	Pins    []string `json:"pins"`
	Figures Figures  `json:"figures"`
}

// Figures sum the runs of a state, each measured from its own store. A
// crash case's uncrashed reference run is not among them.
type Figures struct {
	Runs        int     `json:"runs"`
	Passes      int     `json:"passes"`
	SuccessRate float64 `json:"success_rate"` // Passes / Runs
	Attempts    int     `json:"attempts"`     // units run: every attempt started
	Repeated    int     `json:"repeated"`     // attempts beyond each unit's first, repair passes included
	Repairs     int     `json:"repairs"`
	WallSeconds float64 `json:"wall_seconds"` // each task's creation to its end, summed
	Cost        float64 `json:"cost"`         // model cost units
	CrashRuns   int     `json:"crash_runs"`
	Recovered   int     `json:"recovered"` // crash runs whose recovery was correct
	Errors      int     `json:"errors"`    // runs that could not be made (see each run's error)
}

// CaseInfo describes a case as the set declares it.
type CaseInfo struct {
	Name       string            `json:"name"`
	Task       string            `json:"task"`
	TaskSHA256 string            `json:"task_sha256"`
	Vars       map[string]string `json:"vars,omitempty"`
	Repeat     int               `json:"repeat"`
	Crash      string            `json:"crash,omitempty"`
	// ModelReplay is the case's replay folder, as the set file writes it.
	ModelReplay string `json:"model_replay,omitempty"`
	Verify      string `json:"verify"`
}

// RunReport is one run of a case in a state: what its store records.
type RunReport struct {
	State  string            `json:"state"`
	Case   string            `json:"case"`
	Repeat int               `json:"repeat"` // 1-based
	Vars   map[string]string `json:"vars,omitempty"`
	Home   string            `json:"home,omitempty"` // when kept
	Measured
	Crash *CrashReport `json:"crash,omitempty"`
	// Error says why the run could not be made (the task did not
	// validate in this state, a child process failed...).
	Error string `json:"error,omitempty"`
}

// Measured is what Measure reads from a store about one task.
type Measured struct {
	Task         string          `json:"task,omitempty"`
	TaskSHA256   string          `json:"task_sha256,omitempty"`
	Status       string          `json:"status,omitempty"`
	Pass         bool            `json:"pass"`
	Reason       string          `json:"reason,omitempty"`
	Attempts     int             `json:"attempts"`
	Repeated     int             `json:"repeated"`
	Repairs      int             `json:"repairs"`
	WallSeconds  float64         `json:"wall_seconds"`
	Cost         float64         `json:"cost"`
	Pins         []string        `json:"pins,omitempty"`
	ReplaySet    string          `json:"replay_set,omitempty"` // the sha256 of the replay set the manifest pins
	VerifierTask string          `json:"verifier_task,omitempty"`
	Output       json.RawMessage `json:"output,omitempty"`
}

// CrashReport is the crash of a crash case's run and what recovery did.
type CrashReport struct {
	Point string `json:"point"`
	// ResumedAt is the sequence number of the first event written after
	// the crash: events before it are the killed process's.
	ResumedAt uint64 `json:"resumed_at"`
	// Committed is how many units were committed (in their current pass)
	// when the process died.
	Committed int    `json:"committed"`
	Recovered bool   `json:"recovered"`
	Reason    string `json:"reason,omitempty"`
	// Reference is the same case and state run without a crash, on a
	// store of its own: the output recovery must reproduce.
	Reference *Measured `json:"reference,omitempty"`
	// ReferenceHome is the reference run's home, when kept.
	ReferenceHome string `json:"reference_home,omitempty"`
}

// state is a policy state as Run works it.
type state struct {
	StateResult
}

// job is one run to make.
type job struct {
	st   *state
	c    *Case
	rep  int
	vars map[string]string
}

// States returns the policy states of a set with extra ablations: the
// baseline first, then one per ablation, each named once.
func States(s *Set, extra []string) ([]StateResult, error) {
	base := StateResult{Name: "baseline", Policies: slices.Clone(s.Policies), Without: []string{}}
	if base.Policies == nil {
		base.Policies = []string{}
	}
	out := []StateResult{base}
	seen := map[string]bool{}
	for _, a := range append(slices.Clone(s.Ablate), extra...) {
		if !engine.IsPolicyRef(a) {
			return nil, fmt.Errorf("--ablate %q: want NAME or NAME@VERSION", a)
		}
		if seen[a] {
			continue
		}
		seen[a] = true
		st := StateResult{Ablation: a, Without: []string{}}
		name, _, versioned := strings.Cut(a, "@")
		if versioned {
			st.Name = a
			st.Policies = append(slices.DeleteFunc(slices.Clone(s.Policies), func(p string) bool {
				n, _, _ := strings.Cut(p, "@")
				return n == name
			}), a)
		} else {
			st.Name = "without " + name
			st.Policies = slices.DeleteFunc(slices.Clone(s.Policies), func(p string) bool {
				n, _, _ := strings.Cut(p, "@")
				return n == name
			})
			st.Without = []string{name}
		}
		if st.Policies == nil {
			st.Policies = []string{}
		}
		out = append(out, st)
	}
	return out, nil
}

// checkAblations refuses an ablation of a policy no case's search path has.
func checkAblations(s *Set, states []StateResult, dirs []string) error {
	for _, st := range states[1:] {
		found := false
		var lastErr error
		for _, c := range s.Cases {
			list, diags := engine.Policies(engine.PolicySearchPath(c.TaskPath, dirs, ""), nil)
			if diags.HasErrors() {
				return fmt.Errorf("reading the policies of case %q: %s", c.Name, diags.List()[0].Summary)
			}
			if _, err := engine.FindPolicy(list, st.Ablation); err == nil {
				found = true
				break
			} else {
				lastErr = err
			}
		}
		if !found {
			return fmt.Errorf("ablation %s: %v", st.Ablation, lastErr)
		}
	}
	return nil
}

// Run runs every case of cfg.Set in every state, cfg.Workers at a time,
// and returns what their stores record. An error means the eval could not
// be made at all; a run that failed is in the result with its reason.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	s := cfg.Set
	if cfg.Workers <= 0 {
		cfg.Workers = DefaultWorkers
	}
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	dirs := append(slices.Clone(s.PolicyDirs), cfg.PolicyDirs...)
	srs, err := States(s, cfg.Ablate)
	if err != nil {
		return nil, err
	}
	if err := checkAblations(s, srs, dirs); err != nil {
		return nil, err
	}
	for _, c := range s.Cases {
		if c.Crash != "" && cfg.Executable == "" {
			return nil, fmt.Errorf("case %q crashes at %s, which needs the lhengine executable", c.Name, c.Crash)
		}
	}
	res := &Result{
		Set: s.Name, Description: s.Description, File: s.Filename, SetSHA256: s.SHA256,
		EngineVersion: engine.Version, Seed: cfg.Seed, Workers: cfg.Workers, Started: time.Now().UTC(),
	}
	var jobs []*job
	states := make([]*state, len(srs))
	for i := range srs {
		states[i] = &state{StateResult: srs[i]}
	}
	for _, c := range s.Cases {
		src, err := os.ReadFile(c.TaskPath)
		if err != nil {
			return nil, fmt.Errorf("case %q: %w", c.Name, err)
		}
		sum := sha256.Sum256(src)
		res.Cases = append(res.Cases, CaseInfo{Name: c.Name, Task: c.Task, TaskSHA256: hex.EncodeToString(sum[:]),
			Vars: c.Vars, Repeat: c.Repeat, Crash: c.Crash, ModelReplay: c.ModelReplay, Verify: c.Verify.String()})
		seeded := declaresVariable(c.TaskPath, src, "seed")
		for _, st := range states {
			for rep := 1; rep <= c.Repeat; rep++ {
				vars := maps(c.Vars)
				if _, given := vars["seed"]; seeded && !given {
					vars["seed"] = strconv.FormatUint(cfg.Seed+uint64(rep-1), 10)
				}
				jobs = append(jobs, &job{st: st, c: c, rep: rep, vars: vars})
			}
		}
	}
	rng := rand.New(rand.NewPCG(cfg.Seed, 0x6c68656e67696e65))
	rng.Shuffle(len(jobs), func(i, j int) { jobs[i], jobs[j] = jobs[j], jobs[i] })

	scratch := cfg.Scratch
	if scratch == "" {
		if scratch, err = os.MkdirTemp("", "lhengine-eval-"); err != nil {
			return nil, err
		}
		if !cfg.KeepHomes {
			defer os.RemoveAll(scratch)
		}
	} else if err := os.MkdirAll(scratch, 0o755); err != nil {
		return nil, err
	}
	if cfg.KeepHomes {
		res.Homes = scratch
	}
	// Every home shares one compilation cache: a store is fresh, the
	// machine code of a module is the same in each.
	cache := filepath.Join(scratch, "cache")
	if err := os.MkdirAll(cache, 0o755); err != nil {
		return nil, err
	}
	r := &runner{cfg: cfg, dirs: dirs, scratch: scratch, cache: cache}
	if err := r.warm(ctx, jobs); err != nil {
		return nil, err
	}

	res.Runs = make([]*RunReport, len(jobs))
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(cfg.Workers, len(jobs)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				rr := r.run(ctx, jobs[i], i)
				if !cfg.KeepHomes {
					rr.Home = ""
					if rr.Crash != nil {
						rr.Crash.ReferenceHome = ""
					}
				}
				res.Runs[i] = rr
				if cfg.OnRun != nil {
					cfg.OnRun(rr)
				}
			}
		}()
	}
feed:
	for i := range jobs {
		select {
		case next <- i:
		case <-ctx.Done():
			break feed
		}
	}
	close(next)
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	res.Finished = time.Now().UTC()
	for _, st := range states {
		res.States = append(res.States, st.StateResult)
	}
	res.Tally()
	return res, nil
}

// Tally computes each state's Figures and Pins from its runs' reports.
func (res *Result) Tally() {
	for i := range res.States {
		st := &res.States[i]
		f := Figures{}
		pins := map[string]bool{}
		for _, rr := range res.Runs {
			if rr.State != st.Name {
				continue
			}
			f.Runs++
			if rr.Error != "" {
				f.Errors++
			}
			if rr.Pass {
				f.Passes++
			}
			f.Attempts += rr.Attempts
			f.Repeated += rr.Repeated
			f.Repairs += rr.Repairs
			f.WallSeconds += rr.WallSeconds
			f.Cost += rr.Cost
			if rr.Crash != nil {
				f.CrashRuns++
				if rr.Crash.Recovered {
					f.Recovered++
				}
			}
			for _, p := range rr.Pins {
				pins[p] = true
			}
		}
		if f.Runs > 0 {
			f.SuccessRate = float64(f.Passes) / float64(f.Runs)
		}
		st.Figures = f
		st.Pins = slices.Sorted(func(yield func(string) bool) {
			for p := range pins {
				if !yield(p) {
					return
				}
			}
		})
		if st.Pins == nil {
			st.Pins = []string{}
		}
	}
}

// runner holds what every run shares.
type runner struct {
	cfg     Config
	dirs    []string
	scratch string
	cache   string
}

// home makes a fresh home for run i, its compilation cache shared.
func (r *runner) home(i int, what string) (string, error) {
	home := filepath.Join(r.scratch, fmt.Sprintf("run-%03d%s", i+1, what))
	if i < 0 {
		home = filepath.Join(r.scratch, what)
	}
	if err := os.MkdirAll(home, 0o755); err != nil {
		return "", err
	}
	// Where symbolic links are not allowed (Windows without the
	// privilege), the home compiles its modules itself.
	_ = os.Symlink(r.cache, filepath.Join(home, "cache"))
	return home, nil
}

// warm compiles, one at a time, every module the runs will load into the
// shared cache, by submitting each case once in each state to a home of
// its own that is then removed: runs that start together would otherwise
// each compile the same modules at once. A submission that fails is left
// for its runs to report.
func (r *runner) warm(ctx context.Context, jobs []*job) (err error) {
	home, err := r.home(-1, "warm")
	if err != nil {
		return err
	}
	defer os.RemoveAll(home)
	e, err := r.open(ctx, home)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, e.Close(context.WithoutCancel(ctx))) }()
	done := map[[2]string]bool{}
	for _, j := range jobs {
		k := [2]string{j.c.Name, j.st.Name}
		if done[k] {
			continue
		}
		done[k] = true
		_, _, _ = e.Submit(ctx, j.c.TaskPath, r.submitOptions(j))
		if j.c.Verify.PluginPath != "" && !done[[2]string{j.c.Verify.PluginPath}] {
			done[[2]string{j.c.Verify.PluginPath}] = true
			if _, err := runVerifierTask(ctx, e, home, j, json.RawMessage("null"), false); err != nil && ctx.Err() != nil {
				return ctx.Err()
			}
		}
		if err := ctx.Err(); err != nil {
			return err
		}
	}
	return nil
}

func (r *runner) submitOptions(j *job) engine.SubmitOptions {
	return engine.SubmitOptions{Vars: j.vars, Policies: j.st.Policies, Without: j.st.Without, PolicyDirs: r.dirs, ModelReplay: j.c.ModelReplayPath}
}

func (r *runner) run(ctx context.Context, j *job, i int) *RunReport {
	rr := &RunReport{State: j.st.Name, Case: j.c.Name, Repeat: j.rep, Vars: j.vars}
	home, err := r.home(i, "")
	if err != nil {
		rr.Error = err.Error()
		return rr
	}
	rr.Home = home
	if j.c.Crash == "" {
		m, err := r.inProcess(ctx, home, j)
		rr.Measured = m
		if err != nil {
			rr.Error = err.Error()
		}
		return rr
	}
	// A crash case: the reference run first, then the crashed one.
	rr.Crash = &CrashReport{Point: j.c.Crash}
	refHome, err := r.home(i, "-reference")
	if err != nil {
		rr.Error = err.Error()
		return rr
	}
	rr.Crash.ReferenceHome = refHome
	ref, err := r.inProcess(ctx, refHome, j)
	rr.Crash.Reference = &ref
	if err != nil {
		rr.Error = "reference run: " + err.Error()
		return rr
	}
	m, cr, err := r.crashed(ctx, home, j, ref.Output)
	rr.Measured = m
	if cr != nil {
		cr.Reference, cr.ReferenceHome = rr.Crash.Reference, rr.Crash.ReferenceHome
		rr.Crash = cr
	}
	if err != nil {
		rr.Error = err.Error()
		rr.Crash.Recovered = false
		if rr.Crash.Reason == "" {
			rr.Crash.Reason = err.Error()
		}
	}
	return rr
}

// open opens a run's home.
func (r *runner) open(ctx context.Context, home string) (*engine.Engine, error) {
	return engine.Open(ctx, engine.Config{Home: home, Logger: r.cfg.Logger.With("home", filepath.Base(home))})
}

// work runs task id to its end.
func work(ctx context.Context, e *engine.Engine, id string) error {
	return e.Work(ctx, engine.WorkOptions{Task: id, ExitWhenIdle: true, Concurrency: 4})
}

// inProcess submits and works the case in a fresh home, verifies its
// output, and measures it from the store.
func (r *runner) inProcess(ctx context.Context, home string, j *job) (m Measured, err error) {
	e, err := r.open(ctx, home)
	if err != nil {
		return m, err
	}
	defer func() { err = errors.Join(err, e.Close(context.WithoutCancel(ctx))) }()
	t, _, err := e.Submit(ctx, j.c.TaskPath, r.submitOptions(j))
	if err != nil {
		return m, submitError(err)
	}
	if err := work(ctx, e, t.ID); err != nil {
		return m, err
	}
	return r.verifyAndMeasure(ctx, e, home, j, t.ID)
}

// verifyAndMeasure runs the case's verifier plugin, if it has one, on the
// task's output in the same store, then measures both from the store.
func (r *runner) verifyAndMeasure(ctx context.Context, e *engine.Engine, home string, j *job, id string) (Measured, error) {
	verifier := ""
	if j.c.Verify.PluginPath != "" {
		t, err := e.Task(ctx, id)
		if err != nil {
			return Measured{}, err
		}
		if t.Status == ledger.Succeeded {
			if verifier, err = runVerifier(ctx, e, home, j, t.Output); err != nil {
				return Measured{}, fmt.Errorf("verifier: %w", err)
			}
		}
	}
	var m Measured
	var miss string
	err := e.Read(func(rd ledger.Reader) error {
		var err error
		if m, err = Measure(rd, id, verifier, j.c.Verify); err != nil {
			return err
		}
		miss, err = ReplayMiss(rd, id)
		return err
	})
	if err == nil && miss != "" {
		// The recordings do not hold this conversation: the run says
		// nothing about the policy state, it could not be made.
		err = fmt.Errorf("a model call missed the case's replay set: %s", miss)
	}
	return m, err
}

// runVerifier submits the verifier task (one step, the verifier plugin,
// whose input is {"output": OUTPUT, "case": NAME, "vars": {...}}) to the
// store and works it. It returns the verifier task's id.
func runVerifier(ctx context.Context, e *engine.Engine, home string, j *job, output json.RawMessage) (string, error) {
	return runVerifierTask(ctx, e, home, j, output, true)
}

// runVerifierTask submits the verifier task and, if doWork, works it.
func runVerifierTask(ctx context.Context, e *engine.Engine, home string, j *job, output json.RawMessage, doWork bool) (string, error) {
	dir := filepath.Join(home, "eval")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	src := fmt.Sprintf(`# The verifier of eval case %s, written by lhengine eval.
task "verify-%s" {
  variable "output" { type = string }
  variable "vars" { type = string }
  step "verify" {
    plugin    = %s
    input     = { output = jsondecode(var.output), case = %s, vars = jsondecode(var.vars) }
    workspace = "none"
  }
}
`, j.c.Name, j.c.Name, hclQuote(j.c.Verify.PluginPath), hclQuote(j.c.Name))
	path := filepath.Join(dir, "verify.hcl")
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		return "", err
	}
	vars, err := json.Marshal(j.vars)
	if err != nil {
		return "", err
	}
	if j.vars == nil {
		vars = []byte("{}")
	}
	t, _, err := e.Submit(ctx, path, engine.SubmitOptions{Vars: map[string]string{"output": string(output), "vars": string(vars)}})
	if err != nil {
		return "", submitError(err)
	}
	if !doWork {
		return t.ID, nil
	}
	return t.ID, work(ctx, e, t.ID)
}

// hclQuote writes s as an HCL string literal.
func hclQuote(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`, "\r", `\r`, "\t", `\t`, "${", "$${", "%{", "%%{")
	return `"` + r.Replace(s) + `"`
}

// submitError turns a task that did not validate into an error that says
// where.
func submitError(err error) error {
	var inv *engine.InvalidTaskError
	if !errors.As(err, &inv) {
		return err
	}
	var parts []string
	for _, d := range inv.Diagnostics.List() {
		if d.Error {
			p := d.Summary
			if d.Range != "" {
				p = d.Range + ": " + p
			}
			if d.Detail != "" {
				p += ": " + d.Detail
			}
			parts = append(parts, p)
		}
	}
	return fmt.Errorf("the task does not validate: %s", strings.Join(parts, "; "))
}

// crashed runs the case in a child lhengine process that dies at the
// case's crash point, then resumes it in this process and checks the
// recovery against the reference output.
func (r *runner) crashed(ctx context.Context, home string, j *job, want json.RawMessage) (Measured, *CrashReport, error) {
	cr := &CrashReport{Point: j.c.Crash}
	args := []string{"--home", home, "--log-level", "off", "run", j.c.TaskPath}
	for _, k := range slices.Sorted(func(yield func(string) bool) {
		for k := range j.vars {
			if !yield(k) {
				return
			}
		}
	}) {
		args = append(args, "--var", k+"="+j.vars[k])
	}
	for _, p := range j.st.Policies {
		args = append(args, "--policy", p)
	}
	for _, w := range j.st.Without {
		args = append(args, "--without", w)
	}
	for _, d := range r.dirs {
		args = append(args, "--policies", d)
	}
	if j.c.ModelReplayPath != "" {
		args = append(args, "--model-replay", j.c.ModelReplayPath)
	}
	cmd := exec.CommandContext(ctx, r.cfg.Executable, args...)
	cmd.Env = append(slices.DeleteFunc(os.Environ(), func(kv string) bool {
		k, _, _ := strings.Cut(kv, "=")
		return k == "LHENGINE_CRASH_AT" || k == "LHENGINE_SERVER" || k == "LHENGINE_HOME" || k == "LHENGINE_TOKEN"
	}), "LHENGINE_CRASH_AT="+j.c.Crash)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	runErr := cmd.Run()
	if ctx.Err() != nil {
		return Measured{}, cr, ctx.Err()
	}
	var ee *exec.ExitError
	killed := errors.As(runErr, &ee) && killedBySIGKILL(ee)
	if !killed {
		why := "it finished"
		if runErr != nil {
			why = runErr.Error()
		}
		return Measured{}, cr, fmt.Errorf("the child process did not crash at %s (%s): %s", j.c.Crash, why, strings.TrimSpace(stderr.String()))
	}
	first, _, _ := strings.Cut(stdout.String(), "\n")
	id, ok := strings.CutPrefix(first, "task ")
	if !ok || id == "" {
		return Measured{}, cr, fmt.Errorf("the child process died at %s before it printed the task id", j.c.Crash)
	}
	e, err := r.open(ctx, home)
	if err != nil {
		return Measured{}, cr, err
	}
	defer e.Close(context.WithoutCancel(ctx))
	if err := e.Read(func(rd ledger.Reader) error {
		t, err := rd.Task(id)
		if err != nil {
			return err
		}
		cr.ResumedAt = t.NextEvent
		done, _ := t.Progress()
		cr.Committed = done
		return nil
	}); err != nil {
		return Measured{}, cr, err
	}
	if _, err := e.Resume(ctx, id); err != nil {
		return Measured{}, cr, err
	}
	if err := e.CheckPlugins(id); err != nil {
		return Measured{}, cr, err
	}
	if err := work(ctx, e, id); err != nil {
		return Measured{}, cr, err
	}
	m, err := r.verifyAndMeasure(ctx, e, home, j, id)
	if err != nil {
		return m, cr, err
	}
	err = e.Read(func(rd ledger.Reader) error {
		ok, reason, err := Recovery(rd, id, cr.ResumedAt, want)
		cr.Recovered, cr.Reason = ok, reason
		return err
	})
	return m, cr, err
}

func killedBySIGKILL(ee *exec.ExitError) bool {
	ws, ok := ee.Sys().(syscall.WaitStatus)
	if ok {
		return ws.Signaled() && ws.Signal() == syscall.SIGKILL
	}
	return ee.ExitCode() == 137 // crashpoint's exit where there is no SIGKILL
}

func maps(m map[string]string) map[string]string {
	out := make(map[string]string, len(m)+1)
	for k, v := range m {
		out[k] = v
	}
	return out
}

// declaresVariable reports whether the task file declares variable name:
// a `variable "NAME"` block directly in a block at the top level. It reads
// tokens only (the file has not been checked yet; Submit checks it).
func declaresVariable(path string, src []byte, name string) bool {
	tokens, _ := hclsyntax.LexConfig(src, path, hcl.InitialPos)
	depth := 0
	for i, tok := range tokens {
		switch tok.Type {
		case hclsyntax.TokenOBrace, hclsyntax.TokenTemplateInterp, hclsyntax.TokenTemplateControl:
			depth++
		case hclsyntax.TokenCBrace, hclsyntax.TokenTemplateSeqEnd:
			depth--
		case hclsyntax.TokenIdent:
			if depth == 1 && string(tok.Bytes) == "variable" && i+3 < len(tokens) &&
				tokens[i+1].Type == hclsyntax.TokenOQuote && tokens[i+2].Type == hclsyntax.TokenQuotedLit &&
				string(tokens[i+2].Bytes) == name && tokens[i+3].Type == hclsyntax.TokenCQuote {
				return true
			}
		}
	}
	return false
}

// String describes the checks of v.
func (v Verify) String() string {
	var parts []string
	if v.Expect != nil {
		parts = append(parts, "expect "+string(v.Expect))
	}
	if len(v.Includes) > 0 {
		parts = append(parts, fmt.Sprintf("output_includes %q", v.Includes))
	}
	if len(v.Excludes) > 0 {
		parts = append(parts, fmt.Sprintf("output_excludes %q", v.Excludes))
	}
	if v.Plugin != "" {
		parts = append(parts, "plugin "+v.Plugin)
	}
	return strings.Join(parts, ", ")
}
