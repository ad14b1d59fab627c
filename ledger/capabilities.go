package ledger

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// ArtifactChunk is the size of one stored piece of an artifact. Big
// artifacts are written chunk by chunk, each in its own transaction, and never
// pass through the task record.
const ArtifactChunk = 1 << 20

// Provenance says where an artifact came from.
type Provenance struct {
	Ref          string            `json:"ref"` // "sha256:<hex>"
	Name         string            `json:"name"`
	MediaType    string            `json:"media_type,omitempty"`
	Size         int64             `json:"size"`
	Task         string            `json:"task"`
	Step         string            `json:"step"`
	Item         int               `json:"item"`
	Attempt      int               `json:"attempt"`
	PluginSHA256 string            `json:"plugin_sha256"`
	InputSHA256  string            `json:"input_sha256"`
	Policies     []string          `json:"policies"`              // the run's policy versions, NAME@VERSION (specs/policies.md)
	Environment  map[string]string `json:"environment,omitempty"` // the environment facts the attempt ran under, by name
	Time         time.Time         `json:"time"`
}

// Note is a progress note a unit reported: a finding, a decision or a blocker.
type Note struct {
	Seq     uint64    `json:"seq"`
	Kind    string    `json:"kind"`
	Text    string    `json:"text"`
	Step    string    `json:"step"`
	Item    int       `json:"item"`
	Attempt int       `json:"attempt"`
	Time    time.Time `json:"time"`
	// Replaces, on a summary (kind "summary", CompactNotes), lists the
	// notes it stands for; ReplacedBy, on a note a summary replaced, is
	// that summary's seq (0: none). Replaced notes stay on record.
	Replaces   []uint64 `json:"replaces,omitempty"`
	ReplacedBy uint64   `json:"replaced_by,omitempty"`
}

// EffectState is the state of an effect journal entry. Append only.
type EffectState string

// Effect states.
const (
	// EffectIntent: recorded before the effect is performed; an intent with
	// no outcome means a crash may have happened in between.
	EffectIntent EffectState = "intent"
	// EffectDone: the outcome is recorded; it is returned, never re-performed.
	EffectDone EffectState = "done"
	// EffectUnknown: an intent without outcome under mode manual; the task is
	// paused until a human confirms or asks for a retry.
	EffectUnknown EffectState = "unknown"
)

// Effect is an effect journal entry.
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
	Performs       int             `json:"performs"` // times this engine performed it
	// Resend, on an intent, says why the next attempt sends the effect again
	// without reconciling it first: ResendRetryable or ResendRetry.
	Resend   string    `json:"resend,omitempty"`
	Note     string    `json:"note,omitempty"`
	IntentAt time.Time `json:"intent_at"`
	DoneAt   time.Time `json:"done_at,omitzero"`
	// Sender and SenderUntil, on a notification's intent, name the store
	// session delivering it and until when that holds: on a store shared
	// by many processes another does not send it meanwhile, unless the
	// sender's process is gone.
	Sender      string    `json:"sender,omitempty"`
	SenderUntil time.Time `json:"sender_until,omitzero"`
}

// Reasons an intent is sent again as it is (Effect.Resend).
const (
	// ResendRetryable: the receiver's last answer was one that leaves the
	// effect open (5xx, 408, 429): it did not apply it for good.
	ResendRetryable = "retryable"
	// ResendRetry: a person asked for the effect to be performed again.
	ResendRetry = "retry"
)

// ConfirmedOutcome is the outcome recorded for an effect a person confirmed
// (or a receiver's check_url reported applied) when its own response was
// lost: the kind's documented result shape (specs/abi.md), with
// "reconciled" set to how. An http effect reports status 200, no headers and
// an empty body; a file effect reports the path, size and sha256 of the
// content its request wrote.
func ConfirmedOutcome(kind string, request json.RawMessage, how string) json.RawMessage {
	var out map[string]any
	switch kind {
	case "file":
		var r struct {
			Path    string `json:"path"`
			Content string `json:"content"`
		}
		_ = json.Unmarshal(request, &r) // a bad request was refused before its intent was recorded
		sum := sha256.Sum256([]byte(r.Content))
		out = map[string]any{"path": r.Path, "bytes": len(r.Content), "sha256": hex.EncodeToString(sum[:])}
	default:
		out = map[string]any{"status": 200, "headers": map[string]string{}, "body": ""}
	}
	out["reconciled"] = how
	b, _ := json.Marshal(out) // strings, numbers and maps of strings: cannot fail
	return b
}

// IdempotencyKey is the stable key sent with an effect: derived from
// (task, step, item, key), so every replay of the same effect carries it.
func IdempotencyKey(task, step string, item int, key string) string {
	sum := sha256.Sum256([]byte(fmt.Sprintf("%s\x00%s\x00%d\x00%s", task, step, item, key)))
	return hex.EncodeToString(sum[:16])
}

// Note kinds.
const (
	NoteFinding  = "finding"
	NoteDecision = "decision"
	NoteBlocker  = "blocker"
	NoteSummary  = "summary" // written by CompactNotes only
)

// Protected reports whether notes of kind may never be replaced by a
// summary.
func Protected(kind string) bool { return kind == NoteDecision || kind == NoteBlocker }

// ErrProtected refuses a compaction that would replace a protected note.
var ErrProtected = errors.New("note is protected")

// Usage is what a task keeps in the store, in bytes.
type Usage struct {
	KV        int64 `json:"kv"`        // keys and values of its units' key/value entries
	Artifacts int64 `json:"artifacts"` // distinct artifact blobs it stored or stored again
	Outputs   int64 `json:"outputs"`   // committed outputs of its units
	Workspace int64 `json:"workspace"` // distinct blobs of its workspace snapshots
}

// ErrQuota is matched (errors.Is) by every *QuotaError.
var ErrQuota = errors.New("quota exceeded")

// QuotaError is a write refused by a task's quota.
type QuotaError struct {
	What  string // "kv_bytes", "artifact_bytes" or "output_bytes": the limit's name in a limits block
	Used  int64  // bytes already counted
	Add   int64  // bytes the write would add
	Limit int64
}

// TooLarge reports whether the write alone is larger than the whole quota,
// as opposed to not fitting in what is left of it.
func (e *QuotaError) TooLarge() bool { return e.Add > e.Limit }

func (e *QuotaError) Error() string {
	if e.TooLarge() {
		return fmt.Sprintf("%d bytes are more than the task's whole %s quota of %d (raise it in the task's limits block)", e.Add, e.What, e.Limit)
	}
	return fmt.Sprintf("the task's %s quota is exhausted: %d of %d bytes used, %d more refused (raise it in the task's limits block)", e.What, e.Used, e.Limit, e.Add)
}

// Is makes errors.Is(err, ErrQuota) hold.
func (e *QuotaError) Is(target error) bool { return target == ErrQuota }

// DefaultOutputQuota is the output_bytes quota of a task submitted without
// one (NewTask.OutputQuota).
const DefaultOutputQuota = 256 << 20

// ModelCall is a model journal entry: one call's response and what it cost.
type ModelCall struct {
	Task          string `json:"task"`
	Step          int    `json:"step"`
	StepName      string `json:"step_name"`
	Item          int    `json:"item"`
	Key           string `json:"key"`
	RequestSHA256 string `json:"request_sha256"` // of the normalised request
	Model         string `json:"model"`          // the task's name for the model
	Provider      string `json:"provider"`
	ModelID       string `json:"model_id"`
	// Response is the normalised response the plugin was given (without
	// "replayed").
	Response     json.RawMessage `json:"response"`
	InputTokens  int64           `json:"input_tokens"`
	OutputTokens int64           `json:"output_tokens"`
	Cost         float64         `json:"cost"`
	Attempt      int             `json:"attempt"` // the attempt that made the call
	Time         time.Time       `json:"time"`

	// State is "" for a recorded response and ModelSending for an intent:
	// the call was being sent and no response is recorded.
	State string `json:"state,omitempty"`
	// RequestBytes is the size of the body sent to the provider.
	RequestBytes int64 `json:"request_bytes,omitempty"`
	// MaxCost is the most the call can cost: one input token per request
	// byte and the call's max_tokens out, at the model's prices.
	MaxCost float64 `json:"max_cost,omitempty"`
}

// ModelSending is the State of a model journal entry that records a call
// being sent: its intent, without a response.
const ModelSending = "sending"

// ModelUsage is what a task's model calls used, in total: each call
// counted once, however often its response was replayed.
type ModelUsage struct {
	Calls        int64   `json:"calls"`
	InputTokens  int64   `json:"input_tokens"`
	OutputTokens int64   `json:"output_tokens"`
	Cost         float64 `json:"cost"`
	// PossiblyBilled counts the sends whose outcome no one saw, apart
	// from the calls above: a call in flight when its process died and
	// sent again by a later attempt. The provider may or may not have
	// billed each.
	PossiblyBilled ModelPossiblyBilled `json:"possibly_billed,omitzero"`
}

// ModelPossiblyBilled totals the sends of model calls that may have been
// billed without their response being recorded.
type ModelPossiblyBilled struct {
	Calls        int64   `json:"calls"`
	RequestBytes int64   `json:"request_bytes"` // the bodies sent, in all
	MaxCost      float64 `json:"max_cost"`      // the sum of their ModelCall.MaxCost
}

// ModelCallEvent is the part of an EvModelCall event that describes the
// call: never the prompt or the response.
type ModelCallEvent struct {
	Model        string  `json:"model"`
	ModelID      string  `json:"model_id"`
	Key          string  `json:"key"`
	InputTokens  int64   `json:"input_tokens"`
	OutputTokens int64   `json:"output_tokens"`
	Cost         float64 `json:"cost"`
	Replayed     bool    `json:"replayed"`
	// PossiblyBilled: an earlier send of the call whose outcome is
	// unknown, counted as possibly billed; the tokens are 0 and Cost is the
	// most it can have cost.
	PossiblyBilled bool  `json:"possibly_billed,omitempty"`
	RequestBytes   int64 `json:"request_bytes,omitempty"` // of a possibly billed send
}
