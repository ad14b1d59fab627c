// Package metrics is the engine's Prometheus metrics: what this process's
// workers did (units committed and failed, attempts, retries, repairs,
// lease takeovers, commit latency, host calls, effects, model tokens and
// cost), and, read from the ledger at each scrape, the units ready to run
// per task. specs/metrics.md names every one.
//
// Counters count what this process committed: a scrape of every process
// working a store, summed, agrees with the ledger's durable counts once the
// work is over (a process killed takes its unscraped increments with it;
// the ledger keeps the truth).
package metrics

import (
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/lhengine/lhengine/fault"
	"github.com/lhengine/lhengine/ledger"
)

// Set holds one engine's metrics and the registry they are served from. A
// nil *Set counts nothing.
type Set struct {
	reg            *prometheus.Registry
	unitsCommitted prometheus.Counter
	unitsFailed    *prometheus.CounterVec
	attempts       prometheus.Counter
	retries        prometheus.Counter
	repairs        prometheus.Counter
	takeovers      prometheus.Counter
	commitSeconds  prometheus.Histogram
	hostCalls      *prometheus.CounterVec
	effects        *prometheus.CounterVec
	modelTokens    *prometheus.CounterVec
	modelCost      prometheus.Counter
}

// HostCallNames are the names lhengine_host_calls_total counts under their
// own label: the capabilities of call and the artifact functions. Any
// other name a plugin asks for is counted as "unknown", so that a plugin
// cannot grow the metric's labels without bound.
var HostCallNames = []string{
	"effect.do", "approval.request", "handoff.get", "notes.list", "notes.compact", "http.fetch",
	"model.generate", "progress.count", "progress.note", "kv.get", "kv.put", "artifact.put", "artifact.read",
}

// EffectOutcomes are the labels of lhengine_effects_total.
var EffectOutcomes = []string{"performed", "replayed", "failed", "unknown"}

// New makes the metrics of one engine, with ready units read through read
// (nil: no ready-units gauge), registered with the Go runtime's and the
// process's own collectors.
func New(read func(fn func(r ledger.Reader) error) error) *Set {
	s := &Set{reg: prometheus.NewRegistry()}
	counter := func(name, help string) prometheus.Counter {
		c := prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help})
		s.reg.MustRegister(c)
		return c
	}
	vec := func(name, help, label string, values []string) *prometheus.CounterVec {
		c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, []string{label})
		for _, v := range values {
			c.WithLabelValues(v) // shown at 0 before the first
		}
		s.reg.MustRegister(c)
		return c
	}
	s.unitsCommitted = counter("lhengine_units_committed_total", "Units whose output this process committed.")
	var kinds []string
	for _, k := range fault.Kinds() {
		kinds = append(kinds, string(k))
	}
	s.unitsFailed = vec("lhengine_units_failed_total", "Failed attempts this process committed, by fault kind.", "kind", kinds)
	s.attempts = counter("lhengine_attempts_total", "Attempts this process ran to a committed outcome (output, failure or repair).")
	s.retries = counter("lhengine_retries_total", "Failed attempts this process committed with a retry to come.")
	s.repairs = counter("lhengine_repairs_total", "Repairs (a task sent back to an earlier step) this process committed.")
	s.takeovers = counter("lhengine_lease_takeovers_total", "Expired leases this process's claims took back.")
	s.commitSeconds = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "lhengine_commit_seconds",
		Help:    "Time from a commit's call to its durability, seconds.",
		Buckets: prometheus.ExponentialBuckets(0.0001, 2, 16)})
	s.reg.MustRegister(s.commitSeconds)
	s.hostCalls = vec("lhengine_host_calls_total", "Host calls plugins made, by capability.", "name", append(HostCallNames, "unknown"))
	s.effects = vec("lhengine_effects_total", "Effects through the journal, by outcome.", "outcome", EffectOutcomes)
	s.modelTokens = vec("lhengine_model_tokens_total", "Model tokens billed, by direction (input, output).", "direction", []string{"input", "output"})
	s.modelCost = counter("lhengine_model_cost_total", "Model cost billed, in the models' cost unit.")
	if read != nil {
		s.reg.MustRegister(&readyCollector{read: read})
	}
	s.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return s
}

// Handler serves the metrics in Prometheus's text format.
func (s *Set) Handler() http.Handler {
	return promhttp.HandlerFor(s.reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
}

// Committed counts one attempt's committed outcome: an output, a failure
// of kind (with a retry to come or not) or a repair, and how long the
// commit took to be durable.
func (s *Set) Committed(r ledger.Result, took time.Duration) {
	if s == nil {
		return
	}
	s.attempts.Inc()
	s.commitSeconds.Observe(took.Seconds())
	switch {
	case r.Repair != nil:
		s.repairs.Inc()
	case r.Failure != nil:
		s.unitsFailed.WithLabelValues(string(r.Failure.Kind)).Inc()
		if !r.RetryAt.IsZero() {
			s.retries.Inc()
		}
	default:
		s.unitsCommitted.Inc()
	}
}

// TookOver counts leases a claim took back.
func (s *Set) TookOver(n int) {
	if s == nil || n <= 0 {
		return
	}
	s.takeovers.Add(float64(n))
}

// HostCall counts one host call of name.
func (s *Set) HostCall(name string) {
	if s == nil {
		return
	}
	s.hostCalls.WithLabelValues(HostCallLabel(name)).Inc()
}

// HostCallLabel is name if it is one of HostCallNames, else "unknown".
func HostCallLabel(name string) string {
	for _, n := range HostCallNames {
		if n == name {
			return n
		}
	}
	return "unknown"
}

// Effect counts one effect.do of outcome (one of EffectOutcomes).
func (s *Set) Effect(outcome string) {
	if s == nil {
		return
	}
	s.effects.WithLabelValues(outcome).Inc()
}

// Model counts a model call's billed tokens and cost (a response recorded
// for the first time; a journal hit or a replay bills nothing).
func (s *Set) Model(input, output int64, cost float64) {
	if s == nil {
		return
	}
	s.modelTokens.WithLabelValues("input").Add(float64(input))
	s.modelTokens.WithLabelValues("output").Add(float64(output))
	if cost > 0 {
		s.modelCost.Add(cost)
	}
}

// readyCollector reads the ledger at each scrape: per runnable task, the
// units of its open steps not done, leased, failed or waiting.
type readyCollector struct {
	read func(fn func(r ledger.Reader) error) error
}

var readyDesc = prometheus.NewDesc("lhengine_ready_units",
	"Units of a task ready to run (planned, not leased, done, failed or waiting), read from the ledger at the scrape.", []string{"task"}, nil)

func (c *readyCollector) Describe(ch chan<- *prometheus.Desc) { ch <- readyDesc }

func (c *readyCollector) Collect(ch chan<- prometheus.Metric) {
	err := c.read(func(r ledger.Reader) error {
		// Only the tasks not finished are read whole.
		tasks, _, err := r.TaskList(ledger.TaskQuery{Match: unfinished})
		if err != nil {
			return err
		}
		for _, t := range tasks {
			ch <- prometheus.MustNewConstMetric(readyDesc, prometheus.GaugeValue, float64(Ready(t)), t.ID)
		}
		return nil
	})
	if err != nil {
		ch <- prometheus.NewInvalidMetric(readyDesc, err)
	}
}

// unfinished keeps the tasks that have not finished.
func unfinished(t *ledger.Task) bool { return !t.Status.Terminal() }

// Ready is the number of units of task t ready to run: none while the task
// is paused or finished; else, over the step at its cursor and the window
// steps running beside it, the units that exist and are not done, leased,
// failed or waiting for a person (a unit waiting out a retry's backoff
// counts as ready).
func Ready(t *ledger.Task) int {
	if t.Status == ledger.Paused || t.Status.Terminal() || t.Cursor >= len(t.Steps) {
		return 0
	}
	n := 0
	for i := t.Cursor; i < len(t.Steps); i++ {
		st := t.Steps[i]
		if i > t.Cursor && (st.Every == 0 || st.Anchor > t.Cursor) {
			if st.Every == 0 {
				break
			}
			continue
		}
		units := st.Units
		if !st.Planned || st.Every > 0 {
			units = st.Written // the units planned so far
		}
		if r := units - st.Done - st.Leased - st.Failed - st.Waiting; r > 0 {
			n += r
		}
	}
	return n
}
