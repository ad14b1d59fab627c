package engine

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/lhengine/lhengine/ledger"
)

// NotFinishedError is returned by Remove for a task that is queued, running
// or paused: cancel it first.
type NotFinishedError = ledger.NotFinishedError

// Remove deletes a finished (succeeded, failed or cancelled) task: every
// record of it in the store, then its workspace folder. The artifacts and
// modules it referred to are freed by GC once nothing else refers to them.
// A Remove cut short can be run again; a workspace left behind by one is
// collected by GC. Errors: *NotFinishedError, or one wrapping
// ledger.ErrNotFound for an unknown task.
func (e *Engine) Remove(ctx context.Context, id string) error {
	if err := e.store.Remove(ctx, id); err != nil {
		return err
	}
	e.specs.Forget(id)
	if err := os.RemoveAll(e.workspace(id)); err != nil {
		return fmt.Errorf("task %s removed; its workspace was not: %w", id, err)
	}
	return nil
}

func (e *Engine) workspaces() string         { return filepath.Join(e.home, "workspaces") }
func (e *Engine) workspace(id string) string { return filepath.Join(e.workspaces(), id) }

// GCOptions configure GC.
type GCOptions struct {
	// Workspaces also removes the workspaces of finished tasks that are
	// kept (they may hold results someone wants to look at). Workspaces of
	// tasks that no longer exist are always removed.
	Workspaces bool
	// OlderThan spares workspaces of tasks that finished (or, for tasks
	// that no longer exist, folders last changed) less than this long ago.
	OlderThan time.Duration
	// Now is the clock for OlderThan; nil means time.Now.
	Now func() time.Time
}

// GCReport says what GC freed.
type GCReport struct {
	ledger.GCStats
	// Workspaces is the number of workspace folders removed;
	// WorkspaceBytes the size of the files they held.
	Workspaces     int   `json:"workspaces"`
	WorkspaceBytes int64 `json:"workspace_bytes"`
}

// GC frees what no task needs any more: workspaces of tasks that are gone
// (and, with o.Workspaces, of finished ones), artifact and module blobs that
// no task refers to, chunks of puts that never finished, and the value-log
// space of deleted records (see ledger.Store.GC). It is safe while workers of
// this engine run: the workspace of a task that may still run is never
// touched.
func (e *Engine) GC(ctx context.Context, o GCOptions) (GCReport, error) {
	var rep GCReport
	if o.Now == nil {
		o.Now = time.Now
	}
	if err := e.gcWorkspaces(o, &rep); err != nil {
		return rep, err
	}
	st, err := e.store.GC(ctx)
	rep.GCStats = st
	return rep, err
}

func (e *Engine) gcWorkspaces(o GCOptions, rep *GCReport) error {
	entries, err := os.ReadDir(e.workspaces())
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	} else if err != nil {
		return err
	}
	cutoff := o.Now().Add(-o.OlderThan)
	for _, ent := range entries {
		if !ent.IsDir() {
			continue
		}
		id := ent.Name()
		task, err := e.store.Task(context.Background(), id)
		switch {
		case errors.Is(err, ledger.ErrNotFound):
			info, err := ent.Info()
			if err != nil || info.ModTime().After(cutoff) {
				continue
			}
		case err != nil:
			return err
		case !task.Status.Terminal() || !o.Workspaces || task.FinishedAt.After(cutoff):
			continue
		}
		size, err := dirSize(e.workspace(id))
		if err != nil {
			return err
		}
		if err := os.RemoveAll(e.workspace(id)); err != nil {
			return fmt.Errorf("removing workspace of task %s: %w", id, err)
		}
		rep.Workspaces++
		rep.WorkspaceBytes += size
	}
	return nil
}

// dirSize is the total size of the regular files under dir.
func dirSize(dir string) (int64, error) {
	var n int64
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type().IsRegular() {
			info, err := d.Info()
			if err != nil {
				return err
			}
			n += info.Size()
		}
		return nil
	})
	return n, err
}
