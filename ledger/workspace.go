package ledger

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"time"
)

// A task's workspace travels with it: at each checkpoint of a unit whose
// step writes the workspace, the worker records a snapshot of the tree (the
// manifest: every file, directory and symlink, each file by the sha256 of
// its content), whose files' contents are blobs of the store's
// content-addressed table, stored once however many snapshots and tasks
// name them. A worker whose local copy of a task's workspace is missing or
// older than the task's latest snapshot restores it from the store before
// it runs the unit, so a step that another host takes over sees what the
// steps before it wrote. specs/ledger.md, "Workspace snapshots".

// WorkspaceSnapshot is the manifest of a task's workspace as one commit
// recorded it.
type WorkspaceSnapshot struct {
	// Set by the store as it records the snapshot: Seq numbers a task's
	// snapshots from 1 (Task.WorkspaceSeq is the latest), and the unit
	// whose commit recorded it (Pass is its step's pass).
	Task    string    `json:"task,omitempty"`
	Seq     uint64    `json:"seq,omitempty"`
	Step    int       `json:"step"`
	Pass    int       `json:"pass,omitempty"`
	Item    int       `json:"item"`
	Attempt int       `json:"attempt,omitempty"`
	Time    time.Time `json:"time,omitzero"`
	// Bytes is the sum of the files' sizes.
	Bytes int64 `json:"bytes"`
	// Entries is the tree, sorted by path, parents before children.
	Entries []WorkspaceEntry `json:"entries"`
}

// Workspace entry types.
const (
	WorkspaceFile    = "file"
	WorkspaceDir     = "dir"
	WorkspaceSymlink = "symlink"
)

// WorkspaceEntry is one file, directory or symlink of a workspace.
type WorkspaceEntry struct {
	Path   string `json:"path"` // relative to the workspace, slash-separated
	Type   string `json:"type"` // WorkspaceFile, WorkspaceDir or WorkspaceSymlink
	Mode   uint32 `json:"mode"` // permission bits
	Size   int64  `json:"size,omitempty"`
	SHA256 string `json:"sha256,omitempty"` // of a file's content
	Target string `json:"target,omitempty"` // of a symlink, as read
}

// Digest is the sha256 of the snapshot's tree (every entry's path, type,
// mode, size, content and target, in order): two snapshots of the same
// tree have the same digest whatever their seq, so a folder that holds
// one holds the other.
func (s *WorkspaceSnapshot) Digest() string {
	h := sha256.New()
	for _, e := range s.Entries {
		fmt.Fprintf(h, "%q %s %o %d %s %q\n", e.Path, e.Type, e.Mode, e.Size, e.SHA256, e.Target)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// Sums returns the sha256 of every file of the snapshot, once each.
func (s *WorkspaceSnapshot) Sums() []string {
	seen := map[string]bool{}
	var out []string
	for _, e := range s.Entries {
		if e.Type == WorkspaceFile && !seen[e.SHA256] {
			seen[e.SHA256] = true
			out = append(out, e.SHA256)
		}
	}
	return out
}

// ForkOrigin says which task, and which of its checkpoints, a task was
// forked from (Store.Fork).
type ForkOrigin struct {
	Task string `json:"task"`
	// Step is the name of the step the fork starts at and StepIndex its
	// index; StepIndex is the number of steps for a fork of a task's end.
	Step      string `json:"step,omitempty"`
	StepIndex int    `json:"step_index"`
	// Workspace is the seq, in the original task, of the workspace
	// snapshot the fork starts from; 0 for none.
	Workspace uint64 `json:"workspace,omitempty"`
	By        string `json:"by,omitempty"`
}

// Workspaces keeps a task's workspace snapshots and forks tasks from their
// checkpoints.
type Workspaces interface {
	// PrepareWorkspace is the first half of recording a snapshot: it
	// records, under lease l (anyone else gets ErrLeaseLost), that the
	// snapshot the unit is about to commit names the blobs sums, so that
	// GC keeps them until that commit (or the task's removal), and returns
	// those of sums the store does not hold, to be put (PutWorkspaceBlob)
	// before the commit that carries the snapshot (Result.Workspace).
	PrepareWorkspace(ctx context.Context, l Lease, sums []string) (missing []string, err error)
	// PutWorkspaceBlob stores the size bytes read from r as the blob sum
	// (the sha256 of the bytes, lower-case hex). Bytes that do not have
	// that sha256 or size (a file changed while it was read) store nothing
	// and return an error wrapping ErrWorkspaceChanged.
	PutWorkspaceBlob(ctx context.Context, sum string, size int64, r io.Reader) error
	// ReadWorkspaceBlob writes the blob sum to w, checked against its
	// sha256 as it is read; ErrNotFound when the store does not hold it.
	ReadWorkspaceBlob(sum string, w io.Writer) error
	// WorkspaceSnapshot returns the task's latest workspace snapshot (the
	// one whose Seq is Task.WorkspaceSeq); ErrNotFound when it has none.
	WorkspaceSnapshot(task string) (*WorkspaceSnapshot, error)
	// WorkspaceSnapshots returns the snapshots the task keeps: for each
	// step that recorded one, the latest, in step order.
	WorkspaceSnapshots(task string) ([]WorkspaceSnapshot, error)
	// Fork creates a task (a new id) from a checkpoint of task id: with
	// at >= 0, the outputs of the steps before step at, as committed in
	// their current pass (each must have completed it), with the
	// artifacts they put, and the workspace snapshot recorded when step
	// at-1 completed (the latest that a unit of a step before at recorded
	// in its current pass); the new task starts at step at, or has
	// succeeded when at is the number of steps (the original must have
	// succeeded). With at < 0: at the original's last checkpoint, the
	// end of a succeeded task, else the step under its cursor. The new
	// task pins the original's manifest, facts and limits, records its
	// origin (Task.ForkedFrom) and an EvForked event, and runs like any
	// other. The original is not changed. by says who forked it.
	Fork(ctx context.Context, id string, at int, by string) (*Task, error)
}

// ErrWorkspaceChanged: a workspace file's bytes did not match the sha256
// or size they were recorded with (it changed while it was read).
var ErrWorkspaceChanged = errors.New("workspace file changed while it was read")

// EvForked: the task was created from a checkpoint of another
// (Store.Fork); the message says which.
const EvForked EventType = "forked"
