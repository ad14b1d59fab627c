// Package benchrun measures, side by side on one disk, what the engine does
// and the floors beneath it: a 4 KiB write and fsync, Badger's group commit,
// and a fresh wazero instance of the step plugin. It backs `lhengine bench`.
//
// Run interleaves the figures over rounds (round r runs every figure once,
// starting from a different one each round), so that a shared machine's
// drift reaches every figure alike, and reports medians over rounds. All
// loops are bounded by the Config's counts; nothing touches the network.
package benchrun

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/lhengine/lhengine/engine"
	"github.com/lhengine/lhengine/ledger"
)

// Limits of the counts in a Config.
const (
	MaxRounds = 100
	MaxSteps  = 10_000
	MaxItems  = 1_000_000
)

// Config says what Run measures and where.
type Config struct {
	// Dir is an existing, empty scratch directory; Run creates everything
	// beneath it and leaves removing it to the caller.
	Dir string
	// Plugin is the step plugin: a WASI command module importing only
	// wasi_snapshot_preview1 that answers {"mode":"echo"} with an output
	// (testdata/guests/c/pipeline.c). Required.
	Plugin string
	// GoPlugin, if set, is a Go-SDK plugin answering {"mode":"echo"}
	// (testdata/guests/go/conformance); it adds a fan-out figure.
	GoPlugin string
	// GoReusePlugin, if set, is the same plugin declared stateless
	// (sdk.Stateless(); testdata/guests/go/stateless), whose instances
	// the engine reuses; it adds a fan-out figure beside GoPlugin's.
	GoReusePlugin string
	Rounds        int // rounds of every figure; medians are over rounds
	Steps         int // steps of the serial pipeline, and fsyncs per round
	Items         int // items of each fan-out, and transactions and instances per round
	// Concurrency of the fan-outs, and the smaller of Badger's two
	// goroutine counts (the other is twice it).
	Concurrency int
	Logger      hclog.Logger
	// Progress, if set, is called before each figure of each round.
	Progress func(round int, figure string)
}

// Figure is one row of the report.
type Figure struct {
	Name    string    `json:"name"`
	What    string    `json:"what"`
	Unit    string    `json:"unit"`
	Samples []float64 `json:"samples"` // one per round, in round order
	Median  float64   `json:"median"`  // of the rounds' samples
	Min     float64   `json:"min"`     // the range of the rounds' samples
	Max     float64   `json:"max"`
	// A latency (ms/op, ms/step) is timed op by op: a round's sample is
	// the median op of the round, P99 the 99th percentile of every op of
	// every round (Ops of them).
	P99 float64 `json:"p99,omitempty"`
	Ops int     `json:"ops,omitempty"`
	// Floor names the figure (or sum of figures) this one is compared
	// with; empty for the floors themselves.
	Floor       string  `json:"floor,omitempty"`
	FloorMedian float64 `json:"floor_median,omitempty"`
	FloorUnit   string  `json:"floor_unit,omitempty"`
	// Ratio is Median / FloorMedian, in this figure's unit: above 1 is
	// slower for a time (ms), below 1 is slower for a rate (/s).
	Ratio float64 `json:"ratio,omitempty"`
}

// Report is the result of Run.
type Report struct {
	Rounds      int    `json:"rounds"`
	Steps       int    `json:"steps"`
	Items       int    `json:"items"`
	Concurrency int    `json:"concurrency"`
	Dir         string `json:"dir"`
	GOOS        string `json:"goos"`
	GOARCH      string `json:"goarch"`
	CPUs        int    `json:"cpus"`
	GoVersion   string `json:"go_version"`
	Engine      string `json:"engine_version"`
	// InMemory is true when Dir is on tmpfs or ramfs (Linux): its syncs
	// reach no disk, so the figures say nothing about one.
	InMemory bool     `json:"in_memory"`
	Load     Load     `json:"load"`
	Figures  []Figure `json:"figures"`
}

// Load is how busy the machine was with other work while Run measured
// (Linux; Known false elsewhere).
type Load struct {
	Known bool `json:"known"`
	// The 1, 5 and 15 minute load averages before the first round and
	// after the last (the benchmark's own work raises the second).
	Before [3]float64 `json:"before"`
	After  [3]float64 `json:"after"`
	// OtherCPUs is how many CPUs other processes kept busy on average
	// during the rounds: the machine's busy time less this process's own,
	// over the time the rounds took. OtherCPUsMax is the busiest round's.
	OtherCPUs    float64 `json:"other_cpus"`
	OtherCPUsMax float64 `json:"other_cpus_max"`
	// Busy says the machine was too busy for the figures to mean much;
	// Warning says why.
	Busy    bool   `json:"busy"`
	Warning string `json:"warning,omitempty"`
}

// busyCPUs is how many CPUs other processes may keep busy, on average over
// the rounds, before Run warns that the figures mean little: a quarter of
// a CPU, or an eighth of the machine on a larger one.
func busyCPUs(cpus int) float64 { return max(0.25, float64(cpus)/8) }

// Figure names, in table order.
const (
	FigFsync      = "fsync"
	FigBadgerSync = "badger-sync-writes-%d"
	FigCoalesced  = "badger-coalesced-sync-%d"
	FigInstance   = "wazero-instance"
	FigSerial     = "serial-steps"
	FigFanOutC    = "fan-out-c"
	FigFanOutGo   = "fan-out-go"
	FigFanOutGoRe = "fan-out-go-reuse"
	floorSerialOf = FigFsync + " + " + FigInstance
	// FigCPU names the CPU figure of a fan-out figure (Linux).
	FigCPU = "%s-cpu"
)

// Check reports a Config whose counts are out of range.
func (c Config) Check() error {
	for _, f := range []struct {
		name      string
		v, lo, hi int
	}{
		{"rounds", c.Rounds, 1, MaxRounds},
		{"steps", c.Steps, 1, MaxSteps},
		{"items", c.Items, 1, MaxItems},
		{"concurrency", c.Concurrency, 1, 1024},
	} {
		if f.v < f.lo || f.v > f.hi {
			return fmt.Errorf("--%s %d: want %d to %d", f.name, f.v, f.lo, f.hi)
		}
	}
	if c.Plugin == "" {
		return errors.New("no step plugin: pass --plugin X.wasm (make bench-compare builds testdata/guests/c/pipeline.c and passes it)")
	}
	return nil
}

// Run measures every figure c.Rounds times, interleaved, and returns their
// medians with ratios to their floors.
func Run(ctx context.Context, c Config) (rep *Report, err error) {
	if err := c.Check(); err != nil {
		return nil, err
	}
	if c.Logger == nil {
		c.Logger = hclog.NewNullLogger()
	}
	wasm, err := os.ReadFile(c.Plugin)
	if err != nil {
		return nil, fmt.Errorf("reading the step plugin: %w", err)
	}
	var goWasm, goReWasm []byte
	if c.GoPlugin != "" {
		if goWasm, err = os.ReadFile(c.GoPlugin); err != nil {
			return nil, fmt.Errorf("reading the Go plugin: %w", err)
		}
	}
	if c.GoReusePlugin != "" {
		if goReWasm, err = os.ReadFile(c.GoReusePlugin); err != nil {
			return nil, fmt.Errorf("reading the stateless Go plugin: %w", err)
		}
	}
	tasks := filepath.Join(c.Dir, "tasks")
	for _, d := range []string{tasks, filepath.Join(c.Dir, "badger"), filepath.Join(c.Dir, "badger-coalesced")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
	}
	if err := writeTasks(tasks, c, wasm, goWasm, goReWasm); err != nil {
		return nil, err
	}

	// Everything opened is closed before Run returns, and a failure to
	// close is Run's error.
	var closers []func() error
	defer func() {
		for i := len(closers) - 1; i >= 0; i-- {
			if cerr := closers[i](); cerr != nil && err == nil {
				rep, err = nil, cerr
			}
		}
	}()
	// The plain wazero runtime comes first: see newInstanceFloor.
	in, err := newInstanceFloor(ctx, wasm)
	if err != nil {
		return nil, fmt.Errorf("wazero floor: %w", err)
	}
	closers = append(closers, func() error { return in.close(context.WithoutCancel(ctx)) })
	fs, err := newFsyncFloor(c.Dir)
	if err != nil {
		return nil, fmt.Errorf("fsync floor: %w", err)
	}
	closers = append(closers, fs.close)
	bg, err := newBadgerFloor(filepath.Join(c.Dir, "badger"), false)
	if err != nil {
		return nil, fmt.Errorf("badger floor: %w", err)
	}
	closers = append(closers, bg.close)
	co, err := newBadgerFloor(filepath.Join(c.Dir, "badger-coalesced"), true)
	if err != nil {
		return nil, fmt.Errorf("badger coalesced-sync floor: %w", err)
	}
	closers = append(closers, co.close)
	e, err := engine.Open(ctx, engine.Config{Home: filepath.Join(c.Dir, "engine"), Logger: c.Logger})
	if err != nil {
		return nil, err
	}
	closers = append(closers, func() error { return e.Close(context.WithoutCancel(ctx)) })

	// One task of each plugin before the rounds, so that compiling the
	// modules is not timed.
	if _, _, err := runTask(ctx, e, filepath.Join(tasks, "warm.hcl"), 1); err != nil {
		return nil, fmt.Errorf("warm-up task: %w", err)
	}
	if goWasm != nil {
		if _, _, err := runTask(ctx, e, filepath.Join(tasks, "warm-go.hcl"), 1); err != nil {
			return nil, fmt.Errorf("warm-up task of the Go plugin: %w", err)
		}
	}
	if goReWasm != nil {
		if _, _, err := runTask(ctx, e, filepath.Join(tasks, "warm-go-reuse.hcl"), 1); err != nil {
			return nil, fmt.Errorf("warm-up task of the stateless Go plugin: %w", err)
		}
	}

	lo, hi := c.Concurrency, 2*c.Concurrency
	// A measure gives a round's sample, or, for a latency, every op's
	// (the sample is then their median).
	type measure struct {
		fig *Figure
		run func() (float64, []float64, error)
	}
	rate := func(run func() (float64, error)) func() (float64, []float64, error) {
		return func() (float64, []float64, error) { v, err := run(); return v, nil, err }
	}
	latency := func(run func() ([]float64, error)) func() (float64, []float64, error) {
		return func() (float64, []float64, error) {
			ops, err := run()
			return median(ops), ops, err
		}
	}
	// A fan-out's round also gives its CPU figure: this process's CPU
	// time (user and system, every thread) over the round, per unit.
	var cpuFigs []*Figure
	fanOut := func(name, file string) func() (float64, []float64, error) {
		cpu := &Figure{Name: fmt.Sprintf(FigCPU, name), Unit: "cpu-ms/unit",
			What: fmt.Sprintf("this process's CPU time (user + system, all threads) during a %s round, per unit", name)}
		cpuFigs = append(cpuFigs, cpu)
		return rate(func() (float64, error) {
			before, known := selfCPU()
			d, _, err := runTask(ctx, e, filepath.Join(tasks, file), c.Concurrency)
			if after, ok := selfCPU(); known && ok && err == nil {
				cpu.Samples = append(cpu.Samples, ms(after-before)/float64(c.Items))
			}
			return float64(c.Items) / d.Seconds(), err
		})
	}
	figs := []measure{
		{&Figure{Name: FigFsync, What: fmt.Sprintf("write 4 KiB + fsync of one file, %d times a round", c.Steps), Unit: "ms/op"},
			latency(func() ([]float64, error) { return fs.run(ctx, c.Steps) })},
		{&Figure{Name: fmt.Sprintf(FigBadgerSync, lo), What: fmt.Sprintf("Badger SyncWrites: %d writers, %d small transactions, each synced by Badger's own group commit", lo, c.Items), Unit: "tx/s"},
			rate(func() (float64, error) { return bg.run(ctx, lo, c.Items) })},
		{&Figure{Name: fmt.Sprintf(FigBadgerSync, hi), What: fmt.Sprintf("Badger SyncWrites: %d writers, %d small transactions, each synced by Badger's own group commit", hi, c.Items), Unit: "tx/s"},
			rate(func() (float64, error) { return bg.run(ctx, hi, c.Items) })},
		{&Figure{Name: fmt.Sprintf(FigCoalesced, lo), What: fmt.Sprintf("Badger: %d writers, %d small transactions sharing DB.Sync calls (the engine's commit scheme without the engine)", lo, c.Items), Unit: "tx/s"},
			rate(func() (float64, error) { return co.run(ctx, lo, c.Items) })},
		{&Figure{Name: FigInstance, What: fmt.Sprintf("plain wazero + WASI: a fresh instance of the plugin, echo, %d a round", c.Items), Unit: "ms/op"},
			latency(func() ([]float64, error) { return in.run(ctx, c.Items) })},
		{&Figure{Name: FigSerial, What: fmt.Sprintf("lhengine: a task of %d serial steps, fsync on; a step: from the last one's commit to its own", c.Steps), Unit: "ms/step"},
			latency(func() ([]float64, error) {
				_, id, err := runTask(ctx, e, filepath.Join(tasks, "serial.hcl"), 1)
				if err != nil {
					return nil, err
				}
				return stepTimes(e, id)
			})},
		{&Figure{Name: FigFanOutC, What: fmt.Sprintf("lhengine: fan-out of %d items, C plugin, concurrency %d", c.Items, c.Concurrency), Unit: "units/s"},
			fanOut(FigFanOutC, "fanout.hcl")},
	}
	if goWasm != nil {
		figs = append(figs, measure{&Figure{Name: FigFanOutGo, What: fmt.Sprintf("lhengine: fan-out of %d items, Go-SDK plugin, concurrency %d", c.Items, c.Concurrency), Unit: "units/s"},
			fanOut(FigFanOutGo, "fanout-go.hcl")})
	}
	if goReWasm != nil {
		figs = append(figs, measure{&Figure{Name: FigFanOutGoRe, What: fmt.Sprintf("lhengine: fan-out of %d items, stateless Go-SDK plugin (reused instances), concurrency %d", c.Items, c.Concurrency), Unit: "units/s"},
			fanOut(FigFanOutGoRe, "fanout-go-reuse.hcl")})
	}

	load := Load{}
	load.Before, load.Known = loadAverages()
	ops := make([][]float64, len(figs))
	var others []float64
	for r := range c.Rounds {
		before, began := sampleCPU(), time.Now()
		// Each round starts from a different figure, so no figure always
		// follows the same one.
		for k := range figs {
			i := (r + k) % len(figs)
			m := figs[i]
			if c.Progress != nil {
				c.Progress(r+1, m.fig.Name)
			}
			v, op, err := m.run()
			if err != nil {
				return nil, fmt.Errorf("round %d, %s: %w", r+1, m.fig.Name, err)
			}
			m.fig.Samples = append(m.fig.Samples, v)
			ops[i] = append(ops[i], op...)
		}
		if after := sampleCPU(); before.ok && after.ok {
			other := (after.busy - before.busy) - (after.self - before.self)
			others = append(others, max(0, other.Seconds()/time.Since(began).Seconds()))
		}
	}
	if load.Known {
		load.After, _ = loadAverages()
		load.Known = len(others) == c.Rounds
	}
	if load.Known {
		for _, o := range others {
			load.OtherCPUs += o / float64(len(others))
		}
		load.OtherCPUsMax = slices.Max(others)
		if limit := busyCPUs(runtime.NumCPU()); load.OtherCPUs > limit {
			load.Busy = true
			load.Warning = fmt.Sprintf("other processes kept %.2f CPUs busy on average while the figures ran (more than %.2f; the busiest round %.2f): they shared the machine with the benchmark, and the figures mean little; run it again on a quiet machine",
				load.OtherCPUs, limit, load.OtherCPUsMax)
		}
	}

	rep = &Report{
		Rounds: c.Rounds, Steps: c.Steps, Items: c.Items, Concurrency: c.Concurrency, Dir: c.Dir,
		GOOS: runtime.GOOS, GOARCH: runtime.GOARCH, CPUs: runtime.NumCPU(), GoVersion: runtime.Version(),
		Engine: engine.Version, InMemory: inMemory(c.Dir), Load: load,
	}
	byName := map[string]*Figure{}
	for i, m := range figs {
		f := m.fig
		f.Median, f.Min, f.Max = median(f.Samples), slices.Min(f.Samples), slices.Max(f.Samples)
		if len(ops[i]) > 0 {
			f.P99, f.Ops = percentile(ops[i], 0.99), len(ops[i])
		}
		byName[f.Name] = f
		rep.Figures = append(rep.Figures, *f)
	}
	for _, f := range cpuFigs {
		if len(f.Samples) == c.Rounds { // known on every round (Linux)
			f.Median, f.Min, f.Max = median(f.Samples), slices.Min(f.Samples), slices.Max(f.Samples)
			rep.Figures = append(rep.Figures, *f)
		}
	}
	compare := func(name, floor string, floorMedian float64, unit string) {
		for i := range rep.Figures {
			if f := &rep.Figures[i]; f.Name == name && floorMedian > 0 {
				f.Floor, f.FloorMedian, f.FloorUnit, f.Ratio = floor, floorMedian, unit, f.Median/floorMedian
			}
		}
	}
	// A serial step cannot share its sync, and runs one instance.
	compare(FigSerial, floorSerialOf, byName[FigFsync].Median+byName[FigInstance].Median, "ms/op")
	// A fan-out at concurrency c commits as c writers sharing syncs
	// could at most: the engine's commit scheme without the engine.
	floor := byName[fmt.Sprintf(FigCoalesced, lo)]
	compare(FigFanOutC, floor.Name, floor.Median, floor.Unit)
	compare(FigFanOutGo, floor.Name, floor.Median, floor.Unit)
	compare(FigFanOutGoRe, floor.Name, floor.Median, floor.Unit)
	return rep, nil
}

// stepTimes reads how long each step of task id took, in ms: from the
// task's start, then from the step before's commit, to its own commit
// (its step_done event).
func stepTimes(e *engine.Engine, id string) ([]float64, error) {
	var out []float64
	var last time.Time
	err := e.Read(func(r ledger.Reader) error {
		return r.EachEvent(id, 0, func(ev *ledger.Event) bool {
			switch ev.Type {
			case ledger.EvStarted:
				last = ev.Time
			case ledger.EvStepDone:
				if !last.IsZero() {
					out = append(out, ms(ev.Time.Sub(last)))
				}
				last = ev.Time
			}
			return true
		})
	})
	if err == nil && len(out) == 0 {
		err = fmt.Errorf("task %s: no step_done events to time its steps by", id)
	}
	return out, err
}

// runTask submits the task file at path, works it to the end and returns
// how long that took. A task that does not succeed is an error.
func runTask(ctx context.Context, e *engine.Engine, path string, concurrency int) (time.Duration, string, error) {
	start := time.Now()
	t, _, err := e.Submit(ctx, path, engine.SubmitOptions{})
	if err != nil {
		return 0, "", err
	}
	if err := e.Work(ctx, engine.WorkOptions{Name: "bench", Task: t.ID, Concurrency: concurrency, ExitWhenIdle: true}); err != nil {
		return 0, "", err
	}
	elapsed := time.Since(start)
	got, err := e.Task(ctx, t.ID)
	if err != nil {
		return 0, "", err
	}
	if got.Status != ledger.Succeeded {
		return 0, "", fmt.Errorf("task %s (%s) ended %s: %s", t.ID, filepath.Base(path), got.Status, got.Reason)
	}
	return elapsed, t.ID, nil
}

// writeTasks writes the plugins and the task files Run submits into dir.
func writeTasks(dir string, c Config, wasm, goWasm, goReWasm []byte) error {
	files := map[string][]byte{
		"step.wasm":  wasm,
		"warm.hcl":   []byte(serialTask("step.wasm", 1)),
		"serial.hcl": []byte(serialTask("step.wasm", c.Steps)),
		"fanout.hcl": []byte(fanOutTask("step.wasm", c.Items, c.Concurrency)),
	}
	if goWasm != nil {
		files["warm-go.hcl"] = []byte(serialTask("go.wasm", 1))
		files["go.wasm"] = goWasm
		files["fanout-go.hcl"] = []byte(fanOutTask("go.wasm", c.Items, c.Concurrency))
	}
	if goReWasm != nil {
		files["warm-go-reuse.hcl"] = []byte(serialTask("go-reuse.wasm", 1))
		files["go-reuse.wasm"] = goReWasm
		files["fanout-go-reuse.hcl"] = []byte(fanOutTask("go-reuse.wasm", c.Items, c.Concurrency))
	}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			return err
		}
	}
	return nil
}

func serialTask(plugin string, steps int) string {
	var sb strings.Builder
	sb.WriteString("task \"bench-serial\" {\n")
	for i := range steps {
		fmt.Fprintf(&sb, "  step \"s%d\" {\n    plugin = %q\n    input  = { mode = \"echo\" }\n  }\n", i, plugin)
	}
	sb.WriteString("}\n")
	return sb.String()
}

// fanOutTask is a task of one step fanning out over items numbers, known
// at submit.
func fanOutTask(plugin string, items, concurrency int) string {
	return fmt.Sprintf(`task "bench-fan-out" {
  step "each" {
    plugin      = %q
    for_each    = %s
    concurrency = %d
    input       = { mode = "echo" }
  }
}
`, plugin, numbers(items), concurrency)
}

// PlannedFanOutTask is the large fan-out the engine's and the command's
// benchmarks run: a step "list" of the plugin step.wasm lists items numbers,
// and "each" fans out over that output at concurrency 16, so its units are
// planned while the task runs. With readAll a step "count" follows whose
// input reads every output into one expression.
func PlannedFanOutTask(items int, readAll bool) string {
	task := fmt.Sprintf(`task "large" {
  step "list" {
    plugin = "step.wasm"
    input  = { mode = "echo", items = %s }
  }
  step "each" {
    plugin      = "step.wasm"
    for_each    = step.list.output.items
    concurrency = 16
    input       = { mode = "item" }
  }
`, numbers(items))
	if readAll {
		task += `  step "count" {
    plugin = "step.wasm"
    input  = { mode = "echo", n = length(step.each.output) }
  }
`
	}
	return task + "}\n"
}

// numbers is an expression for the list of n numbers.
func numbers(n int) string { return fmt.Sprintf("range(%d)", n) }

// percentile is the p-th quantile of xs (nearest rank).
func percentile(xs []float64, p float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	i := int(math.Ceil(p*float64(len(s)))) - 1
	return s[min(max(i, 0), len(s)-1)]
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if n := len(s); n%2 == 1 {
		return s[n/2]
	} else {
		return (s[n/2-1] + s[n/2]) / 2
	}
}
