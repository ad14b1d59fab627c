package ledger

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"time"

	"github.com/lhengine/lhengine/fault"
)

// Status is the lifecycle state of a task. The string value is persisted.
type Status string

// Task statuses. Append only.
const (
	Queued          Status = "queued"
	Running         Status = "running"
	WaitingApproval Status = "waiting_approval" // runnable, but every unit left waits for a person (store/approval.go)
	Paused          Status = "paused"           // waits for a human decision (Store.Pause, Store.Resume)
	Succeeded       Status = "succeeded"
	Failed          Status = "failed"
	Cancelled       Status = "cancelled"
)

// Terminal reports whether no work of a task in this status will ever run again.
func (s Status) Terminal() bool {
	return s == Succeeded || s == Failed || s == Cancelled
}

// runnable reports whether units of a task in this status may be leased. A
// task waiting for approvals is: an approval that expires makes its unit
// claimable, and the claim that takes it puts the task back to running.
func (s Status) Runnable() bool { return s == Queued || s == Running || s == WaitingApproval }

// Task is the ledger record of one task.
type Task struct {
	ID     string `json:"id"`
	Name   string `json:"name"`
	Status Status `json:"status"`
	// Reason says why the task is in its status when that is not obvious:
	// the failure of a failed task, the reason of a cancel, the decision a
	// paused task waits for.
	Reason  string   `json:"reason,omitempty"`
	Failure *Failure `json:"failure,omitempty"`
	// Pause says who or what paused a paused task; nil otherwise.
	Pause *PauseReason `json:"pause,omitempty"`
	// Budget is the task's budgets, their limits and usage (store/budget.go).
	Budget *Budget `json:"budget,omitempty"`
	// Drift is the last change of an environment fact the task saw
	// (Store.CheckFacts); nil while none changed.
	Drift *FactChange `json:"drift,omitempty"`
	// Notify is the task's notify block (store/notify.go); nil for none.
	Notify *NotifySpec `json:"notify,omitempty"`
	// Meter is the task's progress block and the samples its rate is
	// read from (store/progress.go); nil in records written before it existed.
	Meter *Progress `json:"progress,omitempty"`

	// Cursor is the index of the step whose units are being worked.
	Cursor int `json:"cursor"`
	// Steps is every step's state, in order, in a task read through Reader
	// or Store.Task. The ledger keeps each step under a key of its own (see
	// store/internal/kv/tasks.go), so a commit reads and writes only the steps it changes.
	Steps []StepState `json:"steps,omitempty"`

	// Epoch is the fencing epoch: every lease grant takes the next value.
	Epoch uint64 `json:"epoch"`
	// LeaseOwner and LeaseUntil describe the most recent lease grant or renewal.
	LeaseOwner string    `json:"lease_owner,omitempty"`
	LeaseUntil time.Time `json:"lease_until,omitzero"`
	// Leases is the number of units currently leased.
	Leases int `json:"leases"`

	Attempts            int    `json:"attempts"`             // attempts started
	Failures            int    `json:"failures"`             // attempts failed
	ConsecutiveFailures int    `json:"consecutive_failures"` // since the last success
	Reclaims            int    `json:"reclaims"`             // expired leases taken over
	Repairs             int    `json:"repairs"`
	Retries             int    `json:"retries,omitempty"` // times Store.Retry re-opened the task
	RepairReason        string `json:"repair_reason,omitempty"`
	// Waiting is the number of units waiting for a person's decision
	// (UnitWaiting); NextApproval the sequence number of the task's last
	// approval (store/approval.go).
	Waiting      int    `json:"waiting,omitempty"`
	NextApproval uint64 `json:"next_approval,omitempty"`

	Output json.RawMessage `json:"output,omitempty"` // the last step's output once succeeded

	// Counters are the progress counts the task's current committed units
	// reported: the sum of its steps' Counters. A step entered again (a
	// repair, a retry from it) withdraws what its earlier pass counted.
	Counters map[string]int64 `json:"counters,omitempty"`
	// Notes counts the progress notes recorded (read them with Reader.Notes).
	Notes uint64 `json:"notes,omitempty"`
	// ModelUsage totals the task's model calls: each billed once, when its
	// response was recorded (read them with Reader.ModelCalls).
	ModelUsage ModelUsage `json:"model_usage,omitzero"`

	CreatedAt  time.Time `json:"created_at"`
	UpdatedAt  time.Time `json:"updated_at"`
	StartedAt  time.Time `json:"started_at,omitzero"`
	FinishedAt time.Time `json:"finished_at,omitzero"`

	IdempotencyKey string `json:"idempotency_key,omitempty"`
	// Removing is set by Remove before it deletes anything of the task; a
	// task being removed is never re-opened (Retry), only removed again.
	Removing bool `json:"removing,omitempty"`

	NextEvent uint64 `json:"next_event"`

	// WorkspaceSeq is the seq of the task's latest workspace snapshot
	// (Workspaces); 0 while it has none.
	WorkspaceSeq uint64 `json:"workspace_seq,omitempty"`
	// WorkspaceDigest is the Digest of that snapshot's tree: a folder
	// holding a tree of that digest needs no restore, whatever snapshot
	// it was written for.
	WorkspaceDigest string `json:"workspace_digest,omitempty"`
	// ForkedFrom says which task, and where, this task was forked from
	// (Store.Fork); nil for a task submitted.
	ForkedFrom *ForkOrigin `json:"forked_from,omitempty"`

	// Partial, inside a store that reads a task's steps one at a time,
	// stands for Steps: the number of steps and those loaded so far. A task
	// with Partial set has no Steps. It is nil in every task a store hands
	// out, and never encoded.
	Partial PartialSteps `json:"-"`
}

// PauseKind names what paused a task. The string value is persisted. Append
// only.
type PauseKind string

// Pause kinds.
const (
	PauseOperator        PauseKind = "operator"         // a person: By is who (the CLI sends the OS user)
	PauseBudget          PauseKind = "budget"           // a task budget reached its limit: Name is the budget
	PauseRepairs         PauseKind = "repairs"          // a step's repair.max was reached: Name is the step
	PauseDrift           PauseKind = "drift"            // an environment fact changed: Name is the fact
	PauseApprovalExpired PauseKind = "approval_expired" // an approval expired: Name is the approval
	PauseEffect          PauseKind = "effect"           // a manual effect's outcome is unknown: Name is its key (Store.Pause)
)

// PauseReason is the structured why of a paused task (Task.Pause).
type PauseReason struct {
	Kind PauseKind `json:"kind"`
	Name string    `json:"name,omitempty"`
	By   string    `json:"by,omitempty"`
	At   time.Time `json:"at"`
	Note string    `json:"note,omitempty"`
	// Used and Limit are a budget's usage and limit when it paused the task
	// (wall_time in seconds).
	Used  float64 `json:"used,omitempty"`
	Limit float64 `json:"limit,omitempty"`
}

// String says the reason in one line: "budget units reached: 50 of 50",
// "paused by alice: maintenance".
func (p *PauseReason) String() string {
	var s string
	switch p.Kind {
	case PauseOperator:
		s = "paused by " + p.By
		if p.By == "" {
			s = "paused by an operator"
		}
	case PauseBudget:
		s = fmt.Sprintf("budget %s reached: %s of %s", p.Name, FormatUsage(p.Name, p.Used), FormatUsage(p.Name, p.Limit))
	case PauseRepairs:
		s = fmt.Sprintf("step %s reached its repair.max", p.Name)
	case PauseDrift:
		s = fmt.Sprintf("environment fact %s changed", p.Name)
	case PauseApprovalExpired:
		s = fmt.Sprintf("approval %s expired", p.Name)
	default:
		s = string(p.Kind)
		if p.Name != "" {
			s += " " + p.Name
		}
	}
	if p.Note != "" {
		s += ": " + p.Note
	}
	return s
}

// StepIndex returns the index of the step named name, or -1.
func (t *Task) StepIndex(name string) int {
	for i, s := range t.Steps {
		if s.Name == name {
			return i
		}
	}
	return -1
}

// copyTo makes dst a deep copy of t.
func (t *Task) CopyTo(dst *Task) {
	*dst = *t
	dst.Steps = slices.Clone(t.Steps)
	dst.Output = slices.Clone(t.Output)
	dst.Counters = maps.Clone(t.Counters)
	if t.Failure != nil {
		f := *t.Failure
		dst.Failure = &f
	}
	if t.Pause != nil {
		p := *t.Pause
		dst.Pause = &p
	}
	if t.Budget != nil {
		b := *t.Budget
		b.Warned = slices.Clone(b.Warned)
		dst.Budget = &b
	}
	dst.Partial = nil
	if t.Partial != nil {
		dst.Partial = t.Partial.Clone()
	}
}

// StepState is the progress of one step of a task.
type StepState struct {
	Name   string `json:"name"`
	FanOut bool   `json:"fan_out,omitempty"`
	// Limit bounds how many units of this step may be leased at once.
	Limit int `json:"limit"`
	// Pass counts how often the step was entered (repairs enter it again).
	Pass int `json:"pass"`
	// Planned is set once every unit of the current pass exists. A fan-out
	// step is planned outside the commit that entered it, in bounded
	// batches: Units is the number of items from the first batch on,
	// Written how many units exist so far, and PlanHash the digest of the
	// item list, so that planning resumed after a crash continues the same
	// list or fails the task, never mixes two.
	Planned  bool   `json:"planned"`
	Units    int    `json:"units"`
	Written  int    `json:"written,omitempty"`
	PlanHash string `json:"plan_hash,omitempty"`
	Done     int    `json:"done"`
	Leased   int    `json:"leased"`
	// Waiting counts the units of the current pass waiting for a person's
	// decision (UnitWaiting).
	Waiting int `json:"waiting,omitempty"`
	// AllowFailures, or AllowPercent percent of Units rounded down, is
	// how many items of a fan-out step may fail beyond their retries
	// without failing the task (Allowed). Failed counts the items of the
	// current pass that did: the step completes when Done+Failed reaches
	// Units, and its output lists the Done items' outputs only.
	AllowFailures int     `json:"allow_failures,omitempty"`
	AllowPercent  float64 `json:"allow_percent,omitempty"`
	Failed        int     `json:"failed,omitempty"`
	// Windows is the number of window steps of this step: the steps right
	// after it that a policy inserted with every = N.
	Windows int `json:"windows,omitempty"`
	// Every, on a window step, is N: the step gets one unit for every N
	// units of its anchor step (index Anchor) that commit, while the anchor
	// runs, and one for the rest when the anchor completes. Open lists the
	// anchor's items committed since the last window, in commit order
	// (decimal, comma-separated: the state stays comparable).
	Every  int    `json:"every,omitempty"`
	Anchor int    `json:"anchor,omitempty"`
	Open   string `json:"open,omitempty"`
	// Counters are the progress counts the committed units of the step's
	// current pass reported (nil for none, and in records written before
	// steps counted their own). The map is never changed in place: a
	// commit stores a new one, which keeps StepState comparable.
	Counters *map[string]int64 `json:"counters,omitempty"`
}

// Allowed is how many items of the step's current pass may fail.
func (s *StepState) Allowed() int {
	if s.AllowPercent > 0 {
		return int(math.Floor(float64(s.Units) * s.AllowPercent / 100))
	}
	return s.AllowFailures
}

// Progress returns the number of committed units of the current pass and the
// number of units known so far; a step not yet planned counts as one.
func (t *Task) Progress() (done, total int) {
	for _, s := range t.Steps {
		done += s.Done
		if s.Planned || s.Units > 0 {
			total += s.Units
		} else {
			total++
		}
	}
	return done, total
}

// Manifest pins everything a task needs to run the same way after files on
// disk change: the task source, its variables and the plugin hashes.
type Manifest struct {
	Objective   string                     `json:"objective,omitempty"`
	Constraints []string                   `json:"constraints,omitempty"`
	Filename    string                     `json:"filename"`
	Source      []byte                     `json:"source"`
	Vars        map[string]json.RawMessage `json:"vars,omitempty"`
	// Plugins maps step name to the plugin pinned for it.
	Plugins       map[string]PluginPin `json:"plugins"`
	EngineVersion string               `json:"engine_version"`
	ABI           string               `json:"abi"`
	// Policies are the harness policies of the run, in the order they
	// apply, each pinned with its full text (specs/policies.md): the run
	// applies these, never the files they came from. Manifests written
	// before policies existed have none.
	Policies []PolicyPin `json:"policies,omitempty"`
	// Models are the task's models as the run calls them (never their
	// keys). Manifests written before models existed have none.
	Models []ModelPin `json:"models,omitempty"`
	// Prompts are the prompts the task declares, in declaration order, each
	// pinned with its text: steps read the pinned text (prompt.NAME), never
	// the file it came from.
	Prompts []PromptPin `json:"prompts,omitempty"`
	// ModelReplay is the replay set the task's model calls are answered
	// from instead of a provider (--model-replay), kept in the store with
	// the task (store/replay.go); nil when the calls go to the providers.
	ModelReplay *ReplayPin `json:"model_replay,omitempty"`
}

// PromptPin is a prompt a task declares with a prompt block, as pinned at
// submit: its name, the version identifier the block gives ("" for none),
// the file its text was read from ("" for a text attribute), the text's
// sha256 and the text.
type PromptPin struct {
	Name    string `json:"name"`
	Version string `json:"version,omitempty"`
	File    string `json:"file,omitempty"`
	SHA256  string `json:"sha256"`
	Text    string `json:"text"`
}

// ReplayPin is a replay set as a manifest pins it: the folder its
// recordings were read from at submit, how many there are and their total
// size, and the set's sha256 (the sha256 of its index: one line "<request
// sha256> <recording file sha256>" per recording, sorted), under which the
// store keeps the index.
type ReplayPin struct {
	Dir        string `json:"dir"`
	Recordings int    `json:"recordings"`
	Bytes      int64  `json:"bytes"`
	SHA256     string `json:"sha256"`
}

// ModelPin is a model a task declares: the model block's name, protocol,
// endpoint and model id, the name of the environment variable that holds
// its key, and its prices in cost units per million tokens.
type ModelPin struct {
	Name        string  `json:"name"`
	Provider    string  `json:"provider"`
	BaseURL     string  `json:"base_url"`
	ID          string  `json:"id"`
	APIKeyEnv   string  `json:"api_key_env,omitempty"`
	InputPrice  float64 `json:"input_price"`
	OutputPrice float64 `json:"output_price"`
}

// PolicyPin is one policy version as a run pinned it: the policy block's own
// text, its sha256, and where the block started in the file it came from
// (so diagnostics read from the text point at the file's lines).
type PolicyPin struct {
	Name     string `json:"name"`
	Version  int    `json:"version"`
	SHA256   string `json:"sha256"`
	Filename string `json:"filename"`
	Line     int    `json:"line"`
	Column   int    `json:"column"`
	Byte     int    `json:"byte"`
	Text     string `json:"text"`
}

// Ref is NAME@VERSION.
func (p PolicyPin) Ref() string { return fmt.Sprintf("%s@%d", p.Name, p.Version) }

// PluginPin is a plugin file and the sha256 it had when the task was submitted.
type PluginPin struct {
	Path   string `json:"path"`
	SHA256 string `json:"sha256"`
}

// Failure is a classified failure of one attempt, or of a whole task.
type Failure struct {
	Kind    fault.Kind `json:"kind"`
	Message string     `json:"message"`
	Step    string     `json:"step,omitempty"`
	Item    int        `json:"item"`
	Attempt int        `json:"attempt,omitempty"`
	// Single: the step runs one unit, not one per item (no for_each, not
	// a window step), so Item is 0 and String does not name it.
	Single bool `json:"single,omitempty"`
}

func (f *Failure) String() string {
	switch {
	case f.Step == "":
		return fmt.Sprintf("%s: %s", f.Kind, f.Message)
	case f.Single:
		return fmt.Sprintf("step %q attempt %d: %s: %s", f.Step, f.Attempt, f.Kind, f.Message)
	}
	return fmt.Sprintf("step %q item %d attempt %d: %s: %s", f.Step, f.Item, f.Attempt, f.Kind, f.Message)
}

// UnitState is the state of one work unit.
type UnitState string

// Unit states. Append only.
const (
	UnitReady  UnitState = "ready"
	UnitLeased UnitState = "leased"
	UnitDone   UnitState = "done"
	UnitFailed UnitState = "failed"
	// UnitStale marks a unit of an earlier pass of a step that a repair sent
	// the task back over. Its outputs stay readable; it is never leased again.
	UnitStale UnitState = "stale"
	// UnitWaiting marks a unit waiting for the decision on its approval
	// (Unit.Approval). It is claimed only once that approval expires
	// (NotBefore), to apply its on_expiry.
	UnitWaiting UnitState = "waiting"
)

// Unit is one bounded work unit: a plain step, or one item of a fan-out step.
type Unit struct {
	Task string `json:"task"`
	Step int    `json:"step"`
	Item int    `json:"item"`
	Pass int    `json:"pass"`
	// Key and Value are the fan-out item (each.key, each.value); nil for a plain step.
	Key   json.RawMessage `json:"key,omitempty"`
	Value json.RawMessage `json:"value,omitempty"`

	State      UnitState `json:"state"`
	Attempt    int       `json:"attempt"` // attempts started, over all passes
	Owner      string    `json:"owner,omitempty"`
	Epoch      uint64    `json:"epoch,omitempty"`
	LeaseUntil time.Time `json:"lease_until,omitzero"`
	NotBefore  time.Time `json:"not_before,omitzero"`
	// Claimed is when the lease of attempt Attempt was granted: the
	// attempt's time (the request's "now", where the guest's wall clock
	// starts), recorded so that the attempt reads the same time however
	// often it is run.
	Claimed   time.Time `json:"claimed,omitzero"`
	Committed int       `json:"committed,omitempty"` // attempt whose output is current
	Failure   *Failure  `json:"failure,omitempty"`   // last failure
	// Base is the attempt number the tries of the unit's current pass
	// count from: Attempt-Base attempts were started in the pass since the
	// task was last retried (Round is the task's Retries then), which is
	// what the step's retry budget allows.
	Base  int `json:"base,omitempty"`
	Round int `json:"round,omitempty"`
	// Approval is the id of the unit's latest approval: the one it waits
	// for, or the one its attempts run on ("" for none).
	Approval string `json:"approval,omitempty"`
	// Effect is the key of the effect of unknown outcome a waiting unit
	// waits for a person to settle (Store.WaitEffect), and WaitReason
	// says so with the commands that settle it; "" otherwise.
	Effect     string `json:"effect,omitempty"`
	WaitReason string `json:"wait_reason,omitempty"`
}

// Item is one fan-out item as produced by planning a step.
type Item struct {
	Key   json.RawMessage
	Value json.RawMessage
}

// Lease is the right to run one attempt of one unit until Until. Commit and
// Heartbeat must present it.
type Lease struct {
	Task    string
	Step    int
	Item    int
	Attempt int // unique among the unit's attempts, over all passes
	Try     int // the attempt's place in its pass's retry budget, from 1 (Unit.Base)
	Owner   string
	Epoch   uint64
	Until   time.Time
	// Unit is the unit as leased (item key and value included).
	Unit Unit
	// Snapshot is the task as of the claim, shared by the leases of one
	// claim: read-only. Its Steps hold the steps before the unit's own
	// (complete: what the attempt's input may read), not that step nor the
	// ones after it. It saves the worker a read of the task. Later commits
	// may have changed the task; what matters for the attempt (a repair, a
	// cancel) also takes the lease.
	Snapshot *Task `json:"-"`
}

// EventType names an entry of a task's event log. Append only.
type EventType string

// Event types.
const (
	EvSubmitted      EventType = "submitted"
	EvStarted        EventType = "started"
	EvStepStarted    EventType = "step_started"
	EvUnitDone       EventType = "unit_done"
	EvUnitFailed     EventType = "unit_failed"
	EvUnitRetry      EventType = "unit_retry"
	EvLeaseExpired   EventType = "lease_expired"
	EvStepDone       EventType = "step_done"
	EvRepair         EventType = "repair"
	EvSucceeded      EventType = "succeeded"
	EvFailed         EventType = "failed"
	EvCancelled      EventType = "cancelled"
	EvPaused         EventType = "paused"
	EvResumed        EventType = "resumed"
	EvEffectResolved EventType = "effect_resolved"
	EvRetried        EventType = "retried"
	EvModelCall      EventType = "model_call"
	// EvReleased: a stopping worker gave a unit back before its attempt
	// ended (Store.Release); the attempt is not charged.
	EvReleased EventType = "released"
	// EvItemFailed: an item of a fan-out step failed beyond its retries
	// and its step's allow_failures tolerated it.
	EvItemFailed EventType = "item_failed"
	// EvBudgetWarning: a budget passed 80% of its limit.
	EvBudgetWarning EventType = "budget_warning"
	// EvBudgetRaised: a person raised a budget (Store.RaiseBudgets); Owner
	// is who.
	EvBudgetRaised EventType = "budget_raised"
	// EvDrift: an environment fact changed since it was last read
	// (Store.CheckFacts); Fact says which, from what to what, and the
	// task's on_drift action.
	EvDrift EventType = "drift"
	// Approvals (store/approval.go): a unit asked for one, a person decided
	// one, one expired undecided, one was voided (its subject changed);
	// and the task came to wait for people: nothing else of it can run.
	EvApprovalRequested EventType = "approval_requested"
	EvApprovalDecided   EventType = "approval_decided"
	EvApprovalExpired   EventType = "approval_expired"
	EvApprovalVoided    EventType = "approval_voided"
	EvWaitingApproval   EventType = "waiting_approval"
	// EvEffectUnknown: a unit waits for a person to settle an effect
	// whose outcome is unknown (Store.WaitEffect).
	EvEffectUnknown EventType = "effect_unknown"
	// EvNotesCompacted: a summary replaced notes (Store.CompactNotes).
	EvNotesCompacted EventType = "notes_compacted"
)

// Event is one entry of a task's durable event log.
type Event struct {
	Seq     uint64     `json:"seq"`
	Time    time.Time  `json:"time"`
	Type    EventType  `json:"type"`
	Step    string     `json:"step,omitempty"`
	Item    *int       `json:"item,omitempty"`
	Attempt int        `json:"attempt,omitempty"`
	Epoch   uint64     `json:"epoch,omitempty"`
	Owner   string     `json:"owner,omitempty"`
	Kind    fault.Kind `json:"kind,omitempty"`
	Message string     `json:"message,omitempty"`
	// Pause is the reason of an EvPaused event.
	Pause *PauseReason `json:"pause,omitempty"`
	// Model describes the call of an EvModelCall event.
	Model *ModelCallEvent `json:"model,omitempty"`
	// Fact is the change of an EvDrift event.
	Fact *FactChange `json:"fact,omitempty"`
	// Approval is the approval id of an approval event.
	Approval string `json:"approval,omitempty"`
}

// Attempt is the record of one finished attempt of a unit: its output (when it
// succeeded) and its captured log.
type Attempt struct {
	Step     int             `json:"step"`
	Item     int             `json:"item"`
	Attempt  int             `json:"attempt"`
	Epoch    uint64          `json:"epoch"`
	Owner    string          `json:"owner"`
	Output   json.RawMessage `json:"output,omitempty"`
	Failure  *Failure        `json:"failure,omitempty"`
	Repair   string          `json:"repair,omitempty"` // the reason, when the attempt asked for repair
	Log      []byte          `json:"log,omitempty"`
	Started  time.Time       `json:"started"`
	Finished time.Time       `json:"finished"`
	// Pass is the step's pass the attempt ran in, Try its place in that
	// pass's retry budget (Lease.Try); 0 in records written before they
	// were recorded.
	Pass int `json:"pass,omitempty"`
	Try  int `json:"try,omitempty"`
	// Environment is the task's environment facts the attempt ran under,
	// by name (Facts); nil for a task without an environment block.
	Environment map[string]string `json:"environment,omitempty"`
}

// FormatUsage writes a budget amount in the budget's unit.
func FormatUsage(budget string, v float64) string {
	if budget == "wall_time" {
		return (time.Duration(v * float64(time.Second))).Round(time.Second).String()
	}
	return strconv.FormatFloat(v, 'f', -1, 64)
}

// BudgetNames is every budget, in the order they are checked.
var BudgetNames = []string{BudgetUnits, BudgetRepairs, BudgetConsecutiveFailures, BudgetCost, BudgetWallTime}

func IsSHA256(s string) bool {
	if len(s) != 64 {
		return false
	}
	for _, c := range []byte(s) {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

// PartialSteps is how a store that reads a task's steps one at a time
// stands for those of Task.Steps it holds (Task.Partial).
type PartialSteps interface {
	// Count is the number of steps of the task.
	Count() int
	// Clone is a deep copy.
	Clone() PartialSteps
}

// StepCount returns the number of steps of the task.
func (t *Task) StepCount() int {
	if t.Partial != nil {
		return t.Partial.Count()
	}
	return len(t.Steps)
}

// Header returns a deep copy of the task without its steps.
func (t *Task) Header() *Task {
	h := *t
	h.Steps, h.Partial = nil, nil
	c := new(Task)
	h.CopyTo(c)
	return c
}

// ItemOutput is the output of one committed unit of a step.
type ItemOutput struct {
	Item    int             `json:"item"`
	Attempt int             `json:"attempt"`
	Output  json.RawMessage `json:"output"`
}

// TaskVersion is a task's id and the commit version of its record. Every
// operation that changes anything of a task a Task read returns (its
// header or any step) writes the header, so a version that did not change
// means a task that did not change.
type TaskVersion struct {
	ID      string
	Version uint64
}

// MaxEvery bounds N, so that an open window stays a small record.
const MaxEvery = 1000

// WindowItem is the item of one window unit.
type WindowItem struct {
	From  int   `json:"from"`
	To    int   `json:"to"`
	Items []int `json:"items"`
}

// FailedItem is an item of a fan-out step that failed beyond its retries
// and that the step's allow_failures tolerated: the step completed without
// it, and later steps do not see it.
type FailedItem struct {
	Step    string          `json:"step"`
	Item    int             `json:"item"`
	Key     json.RawMessage `json:"key,omitempty"`
	Value   json.RawMessage `json:"value,omitempty"`
	Attempt int             `json:"attempt"`
	Failure *Failure        `json:"failure"`
}

// NotFinishedError is returned by Remove for a task that may still run.
type NotFinishedError struct {
	ID     string
	Status Status
}

func (e *NotFinishedError) Error() string {
	return fmt.Sprintf("task %s is %s, not finished: only succeeded, failed or cancelled tasks can be removed (cancel it first: lhengine cancel %s)", e.ID, e.Status, e.ID)
}

// GCStats says what GC freed.
type GCStats struct {
	// Blobs is the number of artifact and module blobs deleted because no
	// provenance record or manifest referred to them any more; BlobBytes
	// their size.
	Blobs     int   `json:"blobs"`
	BlobBytes int64 `json:"blob_bytes"`
	// Orphans counts the blobs whose chunks were deleted because their put
	// never finished (a crash or cancel before the blob record was written);
	// OrphanBytes their size.
	Orphans     int   `json:"orphans"`
	OrphanBytes int64 `json:"orphan_bytes"`
	// VlogFiles is the number of value-log files Badger rewrote to give back
	// the space of deleted values.
	VlogFiles int `json:"vlog_files"`
}

// MaxReplayBytes bounds a replay set: the recordings' total size. They are
// read into memory at submit.
const MaxReplayBytes = 64 << 20

// ReplaySet is a replay set ready to be stored: each recording file's bytes
// by the sha256 of its request.
type ReplaySet struct {
	pin   ReplayPin
	index []byte
	files map[string][]byte // by file sha256
}

// ReplayIndex maps a request's sha256 to the sha256 of its recording file.
type ReplayIndex map[string]string

// NewReplaySet builds the replay set of recordings (each recording file's
// bytes by the sha256 of the request it answers, 64 lower-case hex digits)
// read from dir, and the pin a manifest records for it. A set larger than
// MaxReplayBytes is an error.
func NewReplaySet(dir string, recordings map[string][]byte) (*ReplaySet, error) {
	set := &ReplaySet{files: map[string][]byte{}}
	var idx bytes.Buffer
	var total int64
	for _, req := range slices.Sorted(maps.Keys(recordings)) {
		if !IsSHA256(req) {
			return nil, fmt.Errorf("replay set: %q is not a request sha256 (64 lower-case hex digits)", req)
		}
		b := recordings[req]
		if total += int64(len(b)); total > MaxReplayBytes {
			return nil, fmt.Errorf("replay set %s: its recordings are more than %d bytes; replay a smaller conversation", dir, MaxReplayBytes)
		}
		sum := sha256.Sum256(b)
		file := hex.EncodeToString(sum[:])
		set.files[file] = b
		fmt.Fprintf(&idx, "%s %s\n", req, file)
	}
	set.index = idx.Bytes()
	sum := sha256.Sum256(set.index)
	set.pin = ReplayPin{Dir: dir, Recordings: len(recordings), Bytes: total, SHA256: hex.EncodeToString(sum[:])}
	return set, nil
}

// Pin is what a manifest records of the set.
func (r *ReplaySet) Pin() ReplayPin { return r.pin }

// Index is the set's index, the blob its pin's sha256 names.
func (r *ReplaySet) Index() []byte { return r.index }

// Files is the set's recordings by their sha256. A store keeps each once,
// and the index last: a set whose index is stored has all its recordings.
func (r *ReplaySet) Files() map[string][]byte { return r.files }
