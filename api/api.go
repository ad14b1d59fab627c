// Package api is lhengine's control-plane API: the JSON shapes of its
// version 1 (specs/api.md) and a Client for it.
//
// The process that owns a home (the one that has its store open: `lhengine
// run`, `worker`, `resume`, `retry`, `serve`, or any command that found no
// owner) serves the API on a Unix socket inside the home, SocketPath(home);
// `lhengine serve --listen ADDR` also serves it over TCP behind a bearer
// token. Every command of the CLI is a client of it. The API's records
// (records.go) are its own types, converted by the owner from the store's:
// the package imports nothing of the engine, so a program that uses the
// Client links neither the store nor the runtime.
package api

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"time"

	"errors"
)

// SocketPath is where the owner of home serves the API: a Unix socket in a
// directory only the owner's user can enter.
func SocketPath(home string) string { return filepath.Join(home, "run", "api.sock") }

// OwnerPath is the owner's description (Owner, as JSON), written next to
// the socket while it owns the home, so a process that cannot reach the
// socket can say who holds the home.
func OwnerPath(home string) string { return filepath.Join(home, "run", "owner.json") }

// TokenPath is the bearer token a TCP listener requires, created on the
// first `serve --listen` and readable by the owner's user only.
func TokenPath(home string) string { return filepath.Join(home, "run", "token") }

// TokenEnv is the environment variable a client reads the token from.
const TokenEnv = "LHENGINE_TOKEN"

// Shown statuses beyond Status.
const (
	// Interrupted is a task recorded as running that no live worker works:
	// its process is gone; `resume` continues it.
	Interrupted = "interrupted"
)

// Report is one task's progress report: GET /v1/tasks/{id}.
type Report struct {
	Task     Task            `json:"task"`
	Manifest ManifestSummary `json:"manifest"`
	// Notes are the task's newest notes, up to ReportNotes, oldest first:
	// GET /v1/tasks/{id}/notes pages through all of them.
	Notes       []Note `json:"notes"`
	ShownStatus string `json:"shown_status"`
	// Progress is the progress as a person reads it (progress.go).
	Progress *Progress `json:"progress"`
}

// ManifestSummary is the run manifest without the task source.
type ManifestSummary struct {
	Objective     string                     `json:"objective"`
	Constraints   []string                   `json:"constraints"`
	Filename      string                     `json:"filename"`
	Vars          map[string]json.RawMessage `json:"vars"`
	Plugins       map[string]PluginPin       `json:"plugins"`
	EngineVersion string                     `json:"engine_version"`
	ABI           string                     `json:"abi"`
	SourceSHA256  string                     `json:"source_sha256"`
	// Policies are the run's policy versions, without their text.
	Policies []PolicySummary `json:"policies,omitempty"`
	// Models are the task's models (never their keys).
	Models []ModelPin `json:"models"`
	// Prompts are the task's prompts, without their text.
	Prompts []PromptSummary `json:"prompts"`
	// ModelReplay is the replay set the task's model calls are answered
	// from; absent when they go to the providers.
	ModelReplay *ReplayPin `json:"model_replay,omitempty"`
}

// PromptSummary names one pinned prompt.
type PromptSummary struct {
	Name    string `json:"name"`
	Version string `json:"version,omitempty"`
	File    string `json:"file,omitempty"`
	SHA256  string `json:"sha256"`
}

// PolicySummary names one pinned policy version.
type PolicySummary struct {
	Name    string `json:"name"`
	Version int    `json:"version"`
	SHA256  string `json:"sha256"`
}

// Manifest is a task's whole run manifest: GET /v1/tasks/{id}/manifest.
// Summary is what a report shows; Source is the pinned task file, Policies
// the pinned policies and Prompts the pinned prompts, with their full
// text.
type Manifest struct {
	ID       string          `json:"id"`
	Summary  ManifestSummary `json:"summary"`
	Source   string          `json:"source"`
	Policies []PolicyPin     `json:"policies"`
	Prompts  []PromptPin     `json:"prompts"`
	// Grants are the capabilities of the steps the policies insert, read
	// back from the pinned texts (specs/policies.md, §2.5).
	Grants []PolicyGrant `json:"grants"`
}

// PolicyGrant is one capability a step inserted by a policy has: a mount,
// a host, an effect, a workspace or a model. ByTask: a step of the task's
// own has it too; Granted: no step of the task has it, and the run was
// submitted with --grant-policy naming the policy.
type PolicyGrant struct {
	Policy     string `json:"policy"` // NAME@VERSION
	Step       string `json:"step"`
	Capability string `json:"capability"`
	ByTask     bool   `json:"by_task"`
	Granted    bool   `json:"granted"`
}

// Owner describes the process that owns a home: GET /v1/owner.
type Owner struct {
	// Session is unique to one ownership of the home.
	Session string    `json:"session"`
	PID     int       `json:"pid"`
	Command string    `json:"command"` // its command line
	Started time.Time `json:"started"`
	// Works says which tasks its workers run: "all"; one task id; "task"
	// while that one is being submitted; or "" (it runs none: a command
	// that only reads or steers, and holds the home for a moment).
	Works   string `json:"works"`
	Version string `json:"version"`
	Home    string `json:"home"`
	// Stopped is when this owner let go of the home (zero while it owns
	// it): the owner record stays behind, so a waiting client can tell
	// that an owner came and went.
	Stopped time.Time `json:"stopped,omitzero"`
}

// WorksAll: the owner's workers run every task (`serve`, `worker`).
func (o *Owner) WorksAll() bool { return o.Works == "all" }

func (o *Owner) String() string {
	return fmt.Sprintf("process %d (%s, since %s)", o.PID, o.Command, o.Started.Local().Format(time.DateTime))
}

// Versions are the owner's versions: GET /v1/version.
type Versions struct {
	Engine   string `json:"engine"`
	ABI      int    `json:"plugin_abi"`
	Language int    `json:"task_language"`
	Go       string `json:"go"`
	Wazero   string `json:"wazero"`
	Badger   string `json:"badger"`
	// Commit, CommitTime and Modified are the VCS revision the binary was
	// built from, its time, and whether the tree had changes, as the Go
	// toolchain stamped them; empty when it did not (a build outside a
	// repository, or with -buildvcs=false).
	Commit     string `json:"commit,omitempty"`
	CommitTime string `json:"commit_time,omitempty"`
	Modified   bool   `json:"modified,omitempty"`
}

// SubmitRequest: POST /v1/tasks. It names the task one of two ways:
//
//   - Path, a task file on the owner's file system (the CLI sends an
//     absolute path), whose plugins, prompts, policies and recordings are
//     read there. Only over the home's socket: a client of the same user
//     on the same machine.
//   - Bundle, files the client read and uploaded first (PUT
//     /v1/uploads/{sha256}): the owner reads the submission from their
//     content alone, and never opens a path the client names. Over TCP
//     this is the only way (specs/api.md, "Uploads").
//
// The other fields name paths as the submission sees them: on the owner's
// file system with Path, the client's with Bundle.
type SubmitRequest struct {
	Path           string            `json:"path,omitempty"`
	Bundle         *Bundle           `json:"bundle,omitempty"`
	Vars           map[string]string `json:"vars,omitempty"`
	IdempotencyKey string            `json:"idempotency_key,omitempty"`
	// Policies adds NAME or NAME@VERSION to the task's policies (or
	// re-versions one it lists), Without removes policies by name, and
	// PolicyDirs are searched for them after policies/ beside the task
	// file (absolute paths on the owner's file system; specs/policies.md).
	Policies   []string `json:"policies,omitempty"`
	Without    []string `json:"without,omitempty"`
	PolicyDirs []string `json:"policy_dirs,omitempty"`
	// GrantPolicies names the policies whose inserted steps may have
	// capabilities no step of the task has (--grant-policy).
	GrantPolicies []string `json:"grant_policies,omitempty"`
	// ModelReplay is a folder of recorded model responses (an absolute
	// path on the owner's file system): its recordings are copied into the
	// store with the task, and the task's model calls are answered from
	// them and send nothing.
	ModelReplay string `json:"model_replay,omitempty"`
}

// Bundle is a submission the client read: every file it read (the task
// file, its plugins, prompts, the policy files of its search path and the
// replay set's recordings), by absolute path on the client, with the
// sha256 and size of the content it uploaded for it, and the folders it
// listed (a folder not named does not exist for the submission).
type Bundle struct {
	Task string `json:"task"`
	// Home is the client's home: its policies folder ends the policy
	// search path, as for a local submission. "" for none.
	Home  string                `json:"home,omitempty"`
	Files map[string]BundleFile `json:"files"`
	Dirs  []string              `json:"dirs,omitempty"`
}

// BundleFile is the uploaded content of one file of a bundle.
type BundleFile struct {
	SHA256 string `json:"sha256"` // lower-case hex
	Size   int64  `json:"size"`
}

// MissingRequest: POST /v1/uploads/missing asks which of the contents,
// by sha256, the owner does not hold.
type MissingRequest struct {
	SHA256 []string `json:"sha256"`
}

// MissingResponse answers a MissingRequest: those to upload, in the order
// asked.
type MissingResponse struct {
	Missing []string `json:"missing"`
}

// UploadResponse answers PUT /v1/uploads/{sha256}.
type UploadResponse struct {
	SHA256 string `json:"sha256"`
	Size   int64  `json:"size"`
}

// SubmitResponse answers a SubmitRequest.
type SubmitResponse struct {
	ID      string `json:"id"`
	Created bool   `json:"created"`
	Status  Status `json:"status"`
	Task    Task   `json:"task"`
}

// CancelRequest: POST /v1/tasks/{id}/cancel.
type CancelRequest struct {
	Reason string `json:"reason,omitempty"`
}

// PauseRequest: POST /v1/tasks/{id}/pause. Reason is a note kept with the
// pause; By is who paused it (the CLI sends the OS user). Grace is how
// long units in flight may run on to finish and commit before they are
// given back uncharged, a Go duration ("30s"; "" is 30s, "0s" none); the
// request returns once nothing of the task is leased.
type PauseRequest struct {
	Reason string `json:"reason,omitempty"`
	By     string `json:"by,omitempty"`
	Grace  string `json:"grace,omitempty"`
}

// ResumeRequest: POST /v1/tasks/{id}/resume. Budget raises budgets before
// the task resumes, each NAME=VALUE or NAME=+DELTA ("units=+1000",
// "wall_time=10h"); By is who raised them.
type ResumeRequest struct {
	Budget []string `json:"budget,omitempty"`
	By     string   `json:"by,omitempty"`
	// Where is the host and process the resume comes from
	// ("host (pid N)"), recorded in the "resumed" event.
	Where string `json:"where,omitempty"`
}

// RetryRequest: POST /v1/tasks/{id}/retry. From names the step to run
// again from the start, committed units included ("" = go on where it
// stopped, keeping every committed unit); By is who retried it.
type RetryRequest struct {
	From string `json:"from,omitempty"`
	By   string `json:"by,omitempty"`
}

// DecideRequest: POST /v1/tasks/{id}/approvals/{approval}/approve and
// .../reject. By is who decides (the CLI sends the OS user; over TCP the
// owner records the name of the token the request carried instead); Note
// is kept with the decision, and is a rejection's reason.
type DecideRequest struct {
	By   string `json:"by,omitempty"`
	Note string `json:"note,omitempty"`
}

// Committed is GET /v1/tasks/{id}/steps/{step}/committed: the outputs of
// the units of a step committed so far in its current pass (the first
// Items, in item order), how many committed, and of how many units.
type Committed struct {
	Step      string       `json:"step"`
	Pass      int          `json:"pass"`
	Committed int          `json:"committed"`
	Units     int          `json:"units"`
	Planned   bool         `json:"planned"`
	Items     []ItemOutput `json:"items"`
}

// Decided is the answer to a decision: the approval as decided and its
// task.
type Decided struct {
	Approval Approval `json:"approval"`
	Task     Task     `json:"task"`
}

// SettleRequest: POST /v1/tasks/{id}/effects/confirm and .../retry.
type SettleRequest struct {
	Step string `json:"step"`
	Item int    `json:"item"`
	Key  string `json:"key"`
	Note string `json:"note,omitempty"`
}

// GCRequest: POST /v1/gc.
type GCRequest struct {
	Workspaces bool `json:"workspaces,omitempty"`
	// OlderThan is a Go duration ("72h"); "" spares nothing.
	OlderThan string `json:"older_than,omitempty"`
}

// RemoveResult: DELETE /v1/tasks/{id}.
type RemoveResult struct {
	ID string `json:"id"`
}

// Stream event names of GET /v1/tasks/{id}/events?follow=1 (server-sent
// events).
const (
	StreamEvent = "event" // data: a Event, id: its sequence number
	StreamTask  = "task"  // data: the Task, when its record changed
	StreamEnd   = "end"   // data: the Task, finished; the stream ends
	// StreamTasks is the message of GET /v1/tasks?follow=1: data is every
	// Task, oldest first.
	StreamTasks = "tasks"
)

// Error is the body of every response that is not 2xx, and the error the
// Client returns for it.
type Error struct {
	HTTPStatus int    `json:"-"`
	Code       string `json:"code"`
	Message    string `json:"error"`
	// Diagnostics is the rendered text of an invalid task file's
	// diagnostics (file:line:col with source excerpts), for Code
	// "invalid_task".
	Diagnostics string `json:"diagnostics,omitempty"`
}

// Error codes.
const (
	CodeNotFound     = "not_found"
	CodeConflict     = "conflict" // the task's state does not allow it (e.g. finished)
	CodeInvalid      = "invalid"  // a bad request
	CodeInvalidTask  = "invalid_task"
	CodeUnauthorized = "unauthorized"
	CodeUnavailable  = "unavailable" // the store refuses writes now (disk full, failed, read-only)
	CodeInternal     = "internal"
)

func (e *Error) Error() string { return e.Message }

// Sentinels an *Error matches with errors.Is, by its Code.
var (
	// ErrNotFound: no such task, step, approval or effect.
	ErrNotFound = errors.New("not found")
	// ErrConflict: the task's state does not allow the request (for
	// example, it is finished).
	ErrConflict = errors.New("conflict")
)

// Is matches ErrNotFound and ErrConflict by the error's Code.
func (e *Error) Is(target error) bool {
	switch e.Code {
	case CodeNotFound:
		return target == ErrNotFound
	case CodeConflict:
		return target == ErrConflict
	}
	return false
}
