package ledger

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// ApprovalState is where an approval stands. The string value is
// persisted. Append only.
type ApprovalState string

// Approval states.
const (
	ApprovalPending  ApprovalState = "pending"
	ApprovalApproved ApprovalState = "approved"
	ApprovalRejected ApprovalState = "rejected"
	// ApprovalExpired: no decision came before Expires.
	ApprovalExpired ApprovalState = "expired"
	// ApprovalVoided: the subject changed after the approval was asked
	// for (or decided), or the unit it was for will not run again; Void
	// says why.
	ApprovalVoided ApprovalState = "voided"
)

// Approval sources: what asked for it.
const (
	ApprovalFromStep   = "step"   // the step's approval block
	ApprovalFromPlugin = "plugin" // the approval.request host call
)

// Approval is one request for a person's decision about one unit.
type Approval struct {
	ID   string `json:"id"`
	Task string `json:"task"`
	// Step and Item are the unit: the step's name and index, the fan-out
	// item (0 for a plain step); Pass is the step's pass it was asked in.
	Step      string `json:"step"`
	StepIndex int    `json:"step_index"`
	Item      int    `json:"item"`
	Pass      int    `json:"pass"`
	Source    string `json:"source"`
	Prompt    string `json:"prompt"`
	// Subject is what the decision is about, as JSON; SubjectSHA256 its
	// sha256 (of these bytes), checked again before the unit runs.
	Subject       json.RawMessage `json:"subject"`
	SubjectSHA256 string          `json:"subject_sha256"`
	Created       time.Time       `json:"created"`
	// Expires is when a pending approval stops accepting a decision (zero:
	// never); OnExpiry is what happens then: "reject" or "pause".
	Expires  time.Time     `json:"expires,omitzero"`
	OnExpiry string        `json:"on_expiry,omitempty"`
	State    ApprovalState `json:"state"`
	// DecidedBy (the OS user, or a token's name over TCP), DecidedAt and
	// Note record the decision.
	DecidedBy string    `json:"decided_by,omitempty"`
	DecidedAt time.Time `json:"decided_at,omitzero"`
	Note      string    `json:"note,omitempty"`
	// UsedBy is the first attempt of the unit that ran on the decision
	// (0: none yet). An approval covers the pass it was asked in: retries
	// and takeovers of that pass run on it, a later pass asks again.
	UsedBy int `json:"used_by,omitempty"`
	// Void says why an approval was voided.
	Void string `json:"void,omitempty"`
}

// Decided reports whether a person decided the approval.
func (a *Approval) Decided() bool {
	return a.State == ApprovalApproved || a.State == ApprovalRejected
}

// SubjectSum returns the sha256 of a subject, as Approval.SubjectSHA256.
func SubjectSum(subject []byte) string {
	sum := sha256.Sum256(subject)
	return hex.EncodeToString(sum[:])
}

// ErrApprovalClosed refuses a decision on an approval that is no longer
// pending: decided, expired or voided.
var ErrApprovalClosed = errors.New("approval is not pending")

// Budget names, as written in a task's budget block.
const (
	BudgetWallTime            = "wall_time"
	BudgetCost                = "cost"
	BudgetUnits               = "units"
	BudgetRepairs             = "repairs"
	BudgetConsecutiveFailures = "consecutive_failures"
)

// ErrBudgetReached refuses the commit of an attempt whose result a reached
// budget no longer allows (a unit past the units budget, a failure past
// consecutive_failures, a repair past repairs): the task is paused, and
// the worker gives the unit back uncharged (Release).
var ErrBudgetReached = errors.New("budget reached")

// BudgetLimits are a task's limits; zero is no limit.
type BudgetLimits struct {
	WallTime            time.Duration `json:"wall_time,omitempty"`
	Cost                float64       `json:"cost,omitempty"`
	Units               int64         `json:"units,omitempty"`
	Repairs             int64         `json:"repairs,omitempty"`
	ConsecutiveFailures int64         `json:"consecutive_failures,omitempty"`
}

// Limit returns the limit of budget name (wall_time in seconds), 0 for none.
func (l BudgetLimits) Limit(name string) float64 {
	switch name {
	case BudgetWallTime:
		return l.WallTime.Seconds()
	case BudgetCost:
		return l.Cost
	case BudgetUnits:
		return float64(l.Units)
	case BudgetRepairs:
		return float64(l.Repairs)
	case BudgetConsecutiveFailures:
		return float64(l.ConsecutiveFailures)
	}
	return 0
}

// Budget is a task's budgets: their limits and the usage the task record
// does not already count (repairs, consecutive failures and model cost
// are Task.Repairs, Task.ConsecutiveFailures and Task.ModelUsage.Cost).
type Budget struct {
	Limits BudgetLimits `json:"limits"`
	// Units counts the units committed (a unit run again by a repair or a
	// retry counts again: it was work done).
	Units int64 `json:"units"`
	// WallTime is the time during which some unit of the task was leased:
	// not while it is paused, waits for a person or waits for a process.
	WallTime time.Duration `json:"wall_time"`
	// WallSince is when the period now being counted began; zero when no
	// unit is leased.
	WallSince time.Time `json:"wall_since,omitzero"`
	// Warned names the budgets that passed 80% of their current limit
	// (each is warned once per limit).
	Warned []string `json:"warned,omitempty"`
	// RepairGrace is how many repairs raises of "repairs" allowed beyond
	// the steps' own repair.max.
	RepairGrace int `json:"repair_grace,omitempty"`
}

// BudgetUsage returns the usage of budget name (wall_time in seconds).
func (t *Task) BudgetUsage(name string) float64 {
	switch name {
	case BudgetCost:
		return t.ModelUsage.Cost
	case BudgetRepairs:
		return float64(t.Repairs)
	case BudgetConsecutiveFailures:
		return float64(t.ConsecutiveFailures)
	}
	if t.Budget == nil {
		return 0
	}
	switch name {
	case BudgetUnits:
		return float64(t.Budget.Units)
	case BudgetWallTime:
		return t.Budget.WallTime.Seconds()
	}
	return 0
}

// reached returns the first budget whose usage is at or past its limit.
func (t *Task) Reached() (name string, used, limit float64) {
	if t.Budget == nil {
		return "", 0, 0
	}
	for _, n := range BudgetNames {
		if l := t.Budget.Limits.Limit(n); l > 0 && t.BudgetUsage(n) >= l {
			return n, t.BudgetUsage(n), l
		}
	}
	return "", 0, 0
}

// BudgetRaise raises one budget: to Value, or by Value when Delta.
// wall_time values are in seconds.
type BudgetRaise struct {
	Name  string
	Value float64
	Delta bool
}

// ParseBudgetRaise parses NAME=VALUE or NAME=+DELTA (wall_time as a
// duration: "8h", "+30m").
func ParseBudgetRaise(s string) (BudgetRaise, error) {
	name, val, ok := strings.Cut(s, "=")
	name, val = strings.TrimSpace(name), strings.TrimSpace(val)
	if !ok || val == "" {
		return BudgetRaise{}, fmt.Errorf("budget %q: want NAME=VALUE or NAME=+DELTA, such as units=60000 or wall_time=+2h", s)
	}
	if !slices.Contains(BudgetNames, name) {
		return BudgetRaise{}, fmt.Errorf("budget %q: no budget named %q; the budgets are wall_time, cost, units, repairs and consecutive_failures", s, name)
	}
	r := BudgetRaise{Name: name}
	val, r.Delta = strings.CutPrefix(val, "+")
	var err error
	switch name {
	case BudgetWallTime:
		var d time.Duration
		if d, err = time.ParseDuration(val); err == nil {
			r.Value = d.Seconds()
		}
	case BudgetCost:
		r.Value, err = strconv.ParseFloat(val, 64)
	default:
		var n int64
		if n, err = strconv.ParseInt(val, 10, 64); err == nil {
			r.Value = float64(n)
		}
	}
	if err != nil || r.Value < 0 || r.Value != r.Value || r.Value > 1<<50 || (r.Value == 0 && !r.Delta) {
		what := "a whole number above 0"
		switch name {
		case BudgetWallTime:
			what = "a duration such as 8h or 30m"
		case BudgetCost:
			what = "a number of cost units above 0"
		}
		return BudgetRaise{}, fmt.Errorf("budget %q: %s must be %s (or +DELTA)", s, name, what)
	}
	return r, nil
}

// BudgetSummary says each budget the task has, with its usage: "units 5 of
// 5, wall_time 3m0s of 8h0m0s"; "" for a task without one.
func (t *Task) BudgetSummary() string {
	if t.Budget == nil {
		return ""
	}
	var parts []string
	for _, n := range BudgetOrder {
		if l := t.Budget.Limits.Limit(n); l > 0 {
			parts = append(parts, fmt.Sprintf("%s %s of %s", n, FormatUsage(n, t.BudgetUsage(n)), FormatUsage(n, l)))
		}
	}
	return strings.Join(parts, ", ")
}

// BudgetOrder is every budget name, in the order of the budget block.
var BudgetOrder = []string{BudgetWallTime, BudgetCost, BudgetUnits, BudgetRepairs, BudgetConsecutiveFailures}

// Facts are a task's environment facts as last read (the task file's
// environment block, specs/task-language.md): recorded at submit, and
// again by CheckFacts whenever a worker read different values before a
// unit. Every attempt records the values it ran under (Attempt.Environment).
type Facts struct {
	Values map[string]string `json:"values"`
	Read   time.Time         `json:"read"` // when these values were recorded
}

// FactChange is one fact whose value changed: an EvDrift event's Fact, and
// the task's last drift (Task.Drift).
type FactChange struct {
	Name string    `json:"name"`
	Old  string    `json:"old"`
	New  string    `json:"new"`
	At   time.Time `json:"at"`
	// Action is what the task did: "continue", "pause" or "restart:STEP".
	Action string `json:"action"`
}

// String says the change in one line.
func (c FactChange) String() string {
	return fmt.Sprintf("environment fact %s changed from %s to %s (on_drift %s)", c.Name, orNone(c.Old), orNone(c.New), c.Action)
}

// OnDrift is what CheckFacts does when a fact changed: nothing more than
// recording it (the zero value: continue), pause the task (Pause), or run
// the task again from step RestartFrom (Restart).
type OnDrift struct {
	Pause       bool
	Restart     bool
	RestartFrom int
	// Name is the on_drift setting as written, for the record.
	Name string
}

// Progress sampling.
const (
	// ProgressSamples is the size of the ring of samples.
	ProgressSamples = 10
	// ProgressSampleEvery is the least time between two samples.
	ProgressSampleEvery = 3 * time.Second
	// ProgressStale is how old the newest commit may be for a rate to be
	// told: a task that committed nothing for longer has no current rate.
	ProgressStale = time.Minute
)

// ProgressSpec is a task's progress block as pinned at submit.
type ProgressSpec struct {
	// Unit names one unit of the progress step ("pages"); "" reads "units".
	Unit string `json:"unit,omitempty"`
	// Step and StepIndex are the step whose units the progress counts;
	// StepIndex -1 (Step "") counts the units of every step.
	Step      string `json:"step,omitempty"`
	StepIndex int    `json:"step_index"`
	// Labels give counters words for people, by counter name.
	Labels map[string]string `json:"labels,omitempty"`
}

// ProgressSample is the number of units of the progress step committed by
// a time.
type ProgressSample struct {
	At        time.Time `json:"at"`
	Committed int64     `json:"committed"`
}

// Progress is a task's progress block and the samples its rate is read
// from (Task.Meter). A commit replaces the record, never changes it in
// place, so a Task copy may share it.
type Progress struct {
	ProgressSpec
	// Committed counts the units of the progress step committed, over
	// every pass (a unit run again by a repair counts again: it was work
	// done at the rate the samples measure).
	Committed int64 `json:"committed"`
	// Samples is the ring, oldest first, at most ProgressSamples long;
	// Last is the newest commit.
	Samples []ProgressSample `json:"samples,omitempty"`
	Last    ProgressSample   `json:"last,omitzero"`
	// Kinds counts the notes committed units recorded, by kind (a
	// compaction's summaries and the notes they replace change nothing).
	Kinds map[string]int64 `json:"kinds,omitempty"`
}

// Rate returns the units of the progress step committed per second over
// the ring's window, and whether it is known: it is not with fewer than two
// samples, or when the newest commit is older than ProgressStale at now.
func (p *Progress) Rate(now time.Time) (float64, bool) {
	if p == nil || len(p.Samples) < 2 || now.Sub(p.Last.At) > ProgressStale {
		return 0, false
	}
	first := p.Samples[0]
	dt := p.Last.At.Sub(first.At).Seconds()
	if dt <= 0 || p.Last.Committed <= first.Committed {
		return 0, false
	}
	return float64(p.Last.Committed-first.Committed) / dt, true
}

// Elapsed returns the time the task has been working at now: the time
// during which some unit of it was leased (the wall time the budgets
// count), not the time it was paused, waited for a person or had no
// process. Zero for records written before every task counted it.
func (t *Task) Elapsed(now time.Time) time.Duration {
	b := t.Budget
	if b == nil {
		return 0
	}
	d := b.WallTime
	if !b.WallSince.IsZero() && now.After(b.WallSince) {
		d += now.Sub(b.WallSince)
	}
	return d
}

// NoteQuery selects notes (Reader.NotesPage): empty fields select all.
type NoteQuery struct {
	Kind, Step string
	// Grep keeps notes whose text contains it, ignoring case.
	Grep string
	// From is the first seq looked at; Limit the most notes returned
	// (at most MaxNotesPage, 0 means DefaultNotesPage).
	From  uint64
	Limit int
}

// Notes pages.
const (
	DefaultNotesPage = 100
	MaxNotesPage     = 1000
)

// Match reports whether n is selected by q's filters.
func (q NoteQuery) Match(n *Note) bool {
	return (q.Kind == "" || n.Kind == q.Kind) && (q.Step == "" || n.Step == q.Step) &&
		(q.Grep == "" || strings.Contains(strings.ToLower(n.Text), strings.ToLower(q.Grep)))
}

// NotifySpec is a task's notify block as the ledger keeps it (Task.Notify):
// where its notifications go and the event types that are sent. It is set
// at submit and never changed, so copies of a task may share it.
type NotifySpec struct {
	URL    string      `json:"url"`
	Events []EventType `json:"events"`
}

// Notification is an outbox entry: one event of a task to deliver to the
// task's notify URL, with the task's name, status and reason as the event
// left them. Its fields do not change between deliveries, so every
// delivery of one event sends the same body.
type Notification struct {
	Task   string `json:"task"`
	Name   string `json:"name"`
	URL    string `json:"url"`
	Event  Event  `json:"event"`
	Status Status `json:"status"`
	Reason string `json:"reason,omitempty"`
	// Attempts counts the deliveries that left it open (a transport error,
	// 5xx, 408, 429); LastError says what the last one got.
	Attempts  int    `json:"attempts,omitempty"`
	LastError string `json:"last_error,omitempty"`
}

// IdempotencyKey is the key every delivery of the notification carries:
// "<task>/notify/<event seq>".
func (n *Notification) IdempotencyKey() string {
	return n.Task + "/notify/" + strconv.FormatUint(n.Event.Seq, 10)
}

// Body is the JSON document POSTed: {"task", "name", "event", "status",
// "reason"}.
func (n *Notification) Body() []byte {
	b, _ := json.Marshal(struct { // strings, numbers and an Event: cannot fail
		Task   string `json:"task"`
		Name   string `json:"name"`
		Event  Event  `json:"event"`
		Status Status `json:"status"`
		Reason string `json:"reason,omitempty"`
	}{n.Task, n.Name, n.Event, n.Status, n.Reason})
	return b
}

// NotifyStep is the StepName of the journal entries of notifications
// (Effect.StepName; their Step is -1, their Item the event's seq).
const NotifyStep = "notify"
