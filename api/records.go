package api

import (
	"encoding/json"
	"fmt"
	"strconv"
	"time"
)

// The records of version 1 of the API: what the owner answers about tasks,
// their steps, events, attempts, notes, approvals, effects and artifacts.
// They are the API's own types, not the store's: the owner converts its
// records into them (server/wire.go), so a change of the store's record
// format is not a change of the API, and a program that uses the Client
// links nothing of the engine. Their JSON is specs/api.md's.

// Status is a task's status.
type Status string

// Statuses of a task.
const (
	Queued          Status = "queued"
	Running         Status = "running"
	WaitingApproval Status = "waiting_approval" // every unit left waits for a person
	Paused          Status = "paused"           // waits for a person to resume it
	Succeeded       Status = "succeeded"
	Failed          Status = "failed"
	Cancelled       Status = "cancelled"
)

// Terminal: the task is finished and will not run again (unless retried).
func (s Status) Terminal() bool {
	return s == Succeeded || s == Failed || s == Cancelled
}

// Task is a task record as the owner sees it.
type Task struct {
	ID     string `json:"id"`
	Name   string `json:"name"`
	Status Status `json:"status"`
	// Reason says why the task failed, was cancelled or is paused.
	Reason  string   `json:"reason,omitempty"`
	Failure *Failure `json:"failure,omitempty"`
	// Pause is why a paused task paused.
	Pause *PauseReason `json:"pause,omitempty"`
	// Budget is the task's budget limits and what it used of them.
	Budget *Budget `json:"budget,omitempty"`
	// Drift is the last change of an environment fact.
	Drift *FactChange `json:"drift,omitempty"`
	// Notify is where the task's notifications go.
	Notify *NotifySpec `json:"notify,omitempty"`
	// Meter is the task's progress meter (the progress block).
	Meter *Meter `json:"progress,omitempty"`

	// Cursor is the index of the step being worked.
	Cursor int         `json:"cursor"`
	Steps  []StepState `json:"steps,omitempty"`

	// Epoch is the fencing epoch of the task's last claim.
	Epoch      uint64    `json:"epoch"`
	LeaseOwner string    `json:"lease_owner,omitempty"`
	LeaseUntil time.Time `json:"lease_until,omitzero"`
	// Leases is how many units are leased to workers now.
	Leases int `json:"leases"`

	Attempts            int    `json:"attempts"`
	Failures            int    `json:"failures"`
	ConsecutiveFailures int    `json:"consecutive_failures"`
	Reclaims            int    `json:"reclaims"`
	Repairs             int    `json:"repairs"`
	Retries             int    `json:"retries,omitempty"`
	RepairReason        string `json:"repair_reason,omitempty"`
	// Waiting is how many units wait for a person's decision.
	Waiting      int    `json:"waiting,omitempty"`
	NextApproval uint64 `json:"next_approval,omitempty"`

	// Output is the last step's output once the task succeeded.
	Output json.RawMessage `json:"output,omitempty"`

	Counters   map[string]int64 `json:"counters,omitempty"`
	Notes      uint64           `json:"notes,omitempty"`
	ModelUsage ModelUsage       `json:"model_usage,omitzero"`

	CreatedAt  time.Time `json:"created_at"`
	UpdatedAt  time.Time `json:"updated_at"`
	StartedAt  time.Time `json:"started_at,omitzero"`
	FinishedAt time.Time `json:"finished_at,omitzero"`

	IdempotencyKey string `json:"idempotency_key,omitempty"`
	Removing       bool   `json:"removing,omitempty"`
	NextEvent      uint64 `json:"next_event"`

	// ShownStatus is Status, except that a running task no live worker of
	// the owner works is Interrupted.
	ShownStatus string `json:"shown_status"`
	// Worked: a worker of the owner may work this task now.
	Worked bool `json:"worked"`
}

// Progress returns the number of committed units of the current passes and
// the number of units known so far; a step not yet planned counts as one.
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

// StepIndex returns the index of the step named name, or -1.
func (t *Task) StepIndex(name string) int {
	for i := range t.Steps {
		if t.Steps[i].Name == name {
			return i
		}
	}
	return -1
}

// StepState is one step of a task: its pass, how many units it has and
// how far they got.
type StepState struct {
	Name          string            `json:"name"`
	FanOut        bool              `json:"fan_out,omitempty"`
	Limit         int               `json:"limit"`
	Pass          int               `json:"pass"`
	Planned       bool              `json:"planned"`
	Units         int               `json:"units"`
	Written       int               `json:"written,omitempty"`
	PlanHash      string            `json:"plan_hash,omitempty"`
	Done          int               `json:"done"`
	Leased        int               `json:"leased"`
	Waiting       int               `json:"waiting,omitempty"`
	AllowFailures int               `json:"allow_failures,omitempty"`
	AllowPercent  float64           `json:"allow_percent,omitempty"`
	Failed        int               `json:"failed,omitempty"`
	Windows       int               `json:"windows,omitempty"`
	Every         int               `json:"every,omitempty"`
	Anchor        int               `json:"anchor,omitempty"`
	Open          string            `json:"open,omitempty"`
	Counters      *map[string]int64 `json:"counters,omitempty"`
}

// Allowed is how many items of the step's current pass may fail.
func (s *StepState) Allowed() int {
	if s.AllowPercent > 0 {
		return int(float64(s.Units) * s.AllowPercent / 100)
	}
	return s.AllowFailures
}

// Failure is a classified failure: of an attempt, or of the task.
type Failure struct {
	// Kind is the fault kind (trap, timeout, memory, plugin_error, ...:
	// specs/abi.md).
	Kind    string `json:"kind"`
	Message string `json:"message"`
	Step    string `json:"step,omitempty"`
	Item    int    `json:"item"`
	Attempt int    `json:"attempt,omitempty"`
	// Single: the step is not a fan-out (Item means nothing).
	Single bool `json:"single,omitempty"`
}

// PauseKind says what paused a task.
type PauseKind string

// What paused a task.
const (
	PauseOperator        PauseKind = "operator"
	PauseBudget          PauseKind = "budget"
	PauseRepairs         PauseKind = "repairs"
	PauseDrift           PauseKind = "drift"
	PauseApprovalExpired PauseKind = "approval_expired"
	PauseEffect          PauseKind = "effect"
)

// PauseReason is why a task paused.
type PauseReason struct {
	Kind PauseKind `json:"kind"`
	// Name is the budget, step, fact, approval or effect key, by Kind.
	Name  string    `json:"name,omitempty"`
	By    string    `json:"by,omitempty"`
	At    time.Time `json:"at"`
	Note  string    `json:"note,omitempty"`
	Used  float64   `json:"used,omitempty"`
	Limit float64   `json:"limit,omitempty"`
}

// Budget names (BudgetLimits' fields, as in a task file's budget block),
// in the block's order.
const (
	BudgetWallTime            = "wall_time"
	BudgetCost                = "cost"
	BudgetUnits               = "units"
	BudgetRepairs             = "repairs"
	BudgetConsecutiveFailures = "consecutive_failures"
)

// BudgetLimits are a task's limits; zero is none.
type BudgetLimits struct {
	WallTime            time.Duration `json:"wall_time,omitempty"`
	Cost                float64       `json:"cost,omitempty"`
	Units               int64         `json:"units,omitempty"`
	Repairs             int64         `json:"repairs,omitempty"`
	ConsecutiveFailures int64         `json:"consecutive_failures,omitempty"`
}

// Budget is a task's budget: its limits and the usage the task record
// does not otherwise carry.
type Budget struct {
	Limits      BudgetLimits  `json:"limits"`
	Units       int64         `json:"units"`
	WallTime    time.Duration `json:"wall_time"`
	WallSince   time.Time     `json:"wall_since,omitzero"`
	Warned      []string      `json:"warned,omitempty"`
	RepairGrace int           `json:"repair_grace,omitempty"`
}

// FactChange is one environment fact whose value changed.
type FactChange struct {
	Name   string    `json:"name"`
	Old    string    `json:"old"`
	New    string    `json:"new"`
	At     time.Time `json:"at"`
	Action string    `json:"action"`
}

// NotifySpec is a task's notify block.
type NotifySpec struct {
	URL    string      `json:"url"`
	Events []EventType `json:"events"`
}

// Meter is a task's progress meter: what the progress block declares and
// the recent rate's samples.
type Meter struct {
	Unit      string            `json:"unit,omitempty"`
	Step      string            `json:"step,omitempty"`
	StepIndex int               `json:"step_index"`
	Labels    map[string]string `json:"labels,omitempty"`
	Committed int64             `json:"committed"`
	Samples   []MeterSample     `json:"samples,omitempty"`
	Last      MeterSample       `json:"last,omitzero"`
	Kinds     map[string]int64  `json:"kinds,omitempty"`
}

// MeterSample is the count of committed units at a time.
type MeterSample struct {
	At        time.Time `json:"at"`
	Committed int64     `json:"committed"`
}

// ModelUsage is what a task's model calls used.
type ModelUsage struct {
	Calls          int64               `json:"calls"`
	InputTokens    int64               `json:"input_tokens"`
	OutputTokens   int64               `json:"output_tokens"`
	Cost           float64             `json:"cost"`
	PossiblyBilled ModelPossiblyBilled `json:"possibly_billed,omitzero"`
}

// ModelPossiblyBilled counts model calls sent whose answer was lost: they
// may have been billed.
type ModelPossiblyBilled struct {
	Calls        int64   `json:"calls"`
	RequestBytes int64   `json:"request_bytes"`
	MaxCost      float64 `json:"max_cost"`
}

// EventType is the type of an event.
type EventType string

// Event types.
const (
	EvSubmitted         EventType = "submitted"
	EvStarted           EventType = "started"
	EvStepStarted       EventType = "step_started"
	EvUnitDone          EventType = "unit_done"
	EvUnitFailed        EventType = "unit_failed"
	EvUnitRetry         EventType = "unit_retry"
	EvLeaseExpired      EventType = "lease_expired"
	EvStepDone          EventType = "step_done"
	EvRepair            EventType = "repair"
	EvSucceeded         EventType = "succeeded"
	EvFailed            EventType = "failed"
	EvCancelled         EventType = "cancelled"
	EvPaused            EventType = "paused"
	EvResumed           EventType = "resumed"
	EvEffectResolved    EventType = "effect_resolved"
	EvRetried           EventType = "retried"
	EvModelCall         EventType = "model_call"
	EvReleased          EventType = "released"
	EvItemFailed        EventType = "item_failed"
	EvBudgetWarning     EventType = "budget_warning"
	EvBudgetRaised      EventType = "budget_raised"
	EvDrift             EventType = "drift"
	EvApprovalRequested EventType = "approval_requested"
	EvApprovalDecided   EventType = "approval_decided"
	EvApprovalExpired   EventType = "approval_expired"
	EvApprovalVoided    EventType = "approval_voided"
	EvWaitingApproval   EventType = "waiting_approval"
	EvEffectUnknown     EventType = "effect_unknown"
	EvNotesCompacted    EventType = "notes_compacted"
)

// Event is one entry of a task's event log.
type Event struct {
	Seq      uint64          `json:"seq"`
	Time     time.Time       `json:"time"`
	Type     EventType       `json:"type"`
	Step     string          `json:"step,omitempty"`
	Item     *int            `json:"item,omitempty"`
	Attempt  int             `json:"attempt,omitempty"`
	Epoch    uint64          `json:"epoch,omitempty"`
	Owner    string          `json:"owner,omitempty"`
	Kind     string          `json:"kind,omitempty"`
	Message  string          `json:"message,omitempty"`
	Pause    *PauseReason    `json:"pause,omitempty"`
	Model    *ModelCallEvent `json:"model,omitempty"`
	Fact     *FactChange     `json:"fact,omitempty"`
	Approval string          `json:"approval,omitempty"`
}

// ModelCallEvent is a model_call event's call.
type ModelCallEvent struct {
	Model          string  `json:"model"`
	ModelID        string  `json:"model_id"`
	Key            string  `json:"key"`
	InputTokens    int64   `json:"input_tokens"`
	OutputTokens   int64   `json:"output_tokens"`
	Cost           float64 `json:"cost"`
	Replayed       bool    `json:"replayed"`
	PossiblyBilled bool    `json:"possibly_billed,omitempty"`
	RequestBytes   int64   `json:"request_bytes,omitempty"`
}

// Attempt is one attempt of a unit: its output or failure and its log.
type Attempt struct {
	Step        int               `json:"step"`
	Item        int               `json:"item"`
	Attempt     int               `json:"attempt"`
	Epoch       uint64            `json:"epoch"`
	Owner       string            `json:"owner"`
	Output      json.RawMessage   `json:"output,omitempty"`
	Failure     *Failure          `json:"failure,omitempty"`
	Repair      string            `json:"repair,omitempty"`
	Log         []byte            `json:"log,omitempty"`
	Started     time.Time         `json:"started"`
	Finished    time.Time         `json:"finished"`
	Pass        int               `json:"pass,omitempty"`
	Try         int               `json:"try,omitempty"`
	Environment map[string]string `json:"environment,omitempty"`
}

// ItemOutput is one committed unit's output.
type ItemOutput struct {
	Item    int             `json:"item"`
	Attempt int             `json:"attempt"`
	Output  json.RawMessage `json:"output"`
}

// FailedItem is an item a step let fail (allow_failures).
type FailedItem struct {
	Step    string          `json:"step"`
	Item    int             `json:"item"`
	Key     json.RawMessage `json:"key,omitempty"`
	Value   json.RawMessage `json:"value,omitempty"`
	Attempt int             `json:"attempt"`
	Failure *Failure        `json:"failure"`
}

// Note kinds.
const (
	NoteFinding  = "finding"
	NoteDecision = "decision"
	NoteBlocker  = "blocker"
	NoteSummary  = "summary"
)

// Note is a finding, decision, blocker or summary a step wrote.
type Note struct {
	Seq        uint64    `json:"seq"`
	Kind       string    `json:"kind"`
	Text       string    `json:"text"`
	Step       string    `json:"step"`
	Item       int       `json:"item"`
	Attempt    int       `json:"attempt"`
	Time       time.Time `json:"time"`
	Replaces   []uint64  `json:"replaces,omitempty"`
	ReplacedBy uint64    `json:"replaced_by,omitempty"`
}

// ApprovalState is the state of an approval.
type ApprovalState string

// States of an approval.
const (
	ApprovalPending  ApprovalState = "pending"
	ApprovalApproved ApprovalState = "approved"
	ApprovalRejected ApprovalState = "rejected"
	ApprovalExpired  ApprovalState = "expired"
	ApprovalVoided   ApprovalState = "voided"
)

// Approval is a decision a unit waits for.
type Approval struct {
	ID            string          `json:"id"`
	Task          string          `json:"task"`
	Step          string          `json:"step"`
	StepIndex     int             `json:"step_index"`
	Item          int             `json:"item"`
	Pass          int             `json:"pass"`
	Source        string          `json:"source"`
	Prompt        string          `json:"prompt"`
	Subject       json.RawMessage `json:"subject"`
	SubjectSHA256 string          `json:"subject_sha256"`
	Created       time.Time       `json:"created"`
	Expires       time.Time       `json:"expires,omitzero"`
	OnExpiry      string          `json:"on_expiry,omitempty"`
	State         ApprovalState   `json:"state"`
	DecidedBy     string          `json:"decided_by,omitempty"`
	DecidedAt     time.Time       `json:"decided_at,omitzero"`
	Note          string          `json:"note,omitempty"`
	UsedBy        int             `json:"used_by,omitempty"`
	Void          string          `json:"void,omitempty"`
}

// EffectState is the state of a journaled effect.
type EffectState string

// States of an effect.
const (
	EffectIntent  EffectState = "intent"
	EffectDone    EffectState = "done"
	EffectUnknown EffectState = "unknown"
)

// Effect is one entry of a task's effect journal.
type Effect struct {
	Task           string          `json:"task"`
	Step           int             `json:"step"`
	StepName       string          `json:"step_name"`
	Item           int             `json:"item"`
	Key            string          `json:"key"`
	Kind           string          `json:"kind"`
	Mode           string          `json:"mode"`
	IdempotencyKey string          `json:"idempotency_key"`
	Request        json.RawMessage `json:"request"`
	State          EffectState     `json:"state"`
	Outcome        json.RawMessage `json:"outcome,omitempty"`
	Attempt        int             `json:"attempt"`
	Performs       int             `json:"performs"`
	Resend         string          `json:"resend,omitempty"`
	Note           string          `json:"note,omitempty"`
	IntentAt       time.Time       `json:"intent_at"`
	DoneAt         time.Time       `json:"done_at,omitzero"`
}

// Provenance is an artifact's record: what wrote it, from what.
type Provenance struct {
	Ref          string            `json:"ref"`
	Name         string            `json:"name"`
	MediaType    string            `json:"media_type,omitempty"`
	Size         int64             `json:"size"`
	Task         string            `json:"task"`
	Step         string            `json:"step"`
	Item         int               `json:"item"`
	Attempt      int               `json:"attempt"`
	PluginSHA256 string            `json:"plugin_sha256"`
	InputSHA256  string            `json:"input_sha256"`
	Policies     []string          `json:"policies"`
	Environment  map[string]string `json:"environment,omitempty"`
	Time         time.Time         `json:"time"`
}

// PluginPin is a step's pinned plugin.
type PluginPin struct {
	Path   string `json:"path"`
	SHA256 string `json:"sha256"`
}

// ModelPin is a task's model (never its key).
type ModelPin struct {
	Name        string  `json:"name"`
	Provider    string  `json:"provider"`
	BaseURL     string  `json:"base_url"`
	ID          string  `json:"id"`
	APIKeyEnv   string  `json:"api_key_env,omitempty"`
	InputPrice  float64 `json:"input_price"`
	OutputPrice float64 `json:"output_price"`
}

// ReplayPin is the replay set a task's model calls are answered from.
type ReplayPin struct {
	Dir        string `json:"dir"`
	Recordings int    `json:"recordings"`
	Bytes      int64  `json:"bytes"`
	SHA256     string `json:"sha256"`
}

// PolicyPin is a pinned policy version with its text.
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

// PromptPin is a pinned prompt with its text.
type PromptPin struct {
	Name    string `json:"name"`
	Version string `json:"version,omitempty"`
	File    string `json:"file,omitempty"`
	SHA256  string `json:"sha256"`
	Text    string `json:"text"`
}

// GCReport answers POST /v1/gc: what the collection deleted.
type GCReport struct {
	Blobs          int   `json:"blobs"`
	BlobBytes      int64 `json:"blob_bytes"`
	Orphans        int   `json:"orphans"`
	OrphanBytes    int64 `json:"orphan_bytes"`
	VlogFiles      int   `json:"vlog_files"`
	Workspaces     int   `json:"workspaces"`
	WorkspaceBytes int64 `json:"workspace_bytes"`
}

// Decided: the approval was approved or rejected.
func (a *Approval) Decided() bool {
	return a.State == ApprovalApproved || a.State == ApprovalRejected
}

// Ref is NAME@VERSION.
func (p PolicyPin) Ref() string { return p.Name + "@" + strconv.Itoa(p.Version) }

// String says the failure in one line: where, its kind and its message.
func (f *Failure) String() string {
	switch {
	case f.Step == "":
		return fmt.Sprintf("%s: %s", f.Kind, f.Message)
	case f.Single:
		return fmt.Sprintf("step %q attempt %d: %s: %s", f.Step, f.Attempt, f.Kind, f.Message)
	}
	return fmt.Sprintf("step %q item %d attempt %d: %s: %s", f.Step, f.Item, f.Attempt, f.Kind, f.Message)
}

// String says what changed: "environment fact head changed from A to B
// (on_drift pause)".
func (c FactChange) String() string {
	return fmt.Sprintf("environment fact %s changed from %s to %s (on_drift %s)", c.Name, orNone(c.Old), orNone(c.New), c.Action)
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

// String says why the task paused, as a person reads it.
func (p *PauseReason) String() string {
	var s string
	switch p.Kind {
	case PauseOperator:
		s = "paused by " + p.By
		if p.By == "" {
			s = "paused by an operator"
		}
	case PauseBudget:
		s = fmt.Sprintf("budget %s reached: %s of %s", p.Name, usage(p.Name, p.Used), usage(p.Name, p.Limit))
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
