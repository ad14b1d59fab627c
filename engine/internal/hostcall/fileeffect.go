package hostcall

import (
	"errors"
	"fmt"
	"path/filepath"

	"github.com/lhengine/lhengine/engine/internal/confine"
	"github.com/lhengine/lhengine/engine/internal/guest"
)

// workspacePath checks the path of a file effect, changing nothing: the
// step has a read-write workspace, the path is relative and stays inside
// it, and no element of it that exists now is a symbolic link (file
// effects follow none). It returns the path slash-separated, relative to
// the workspace. writeAtomic checks again as it writes: this check only
// refuses early, before the effect's intent is journaled.
func (a *Attempt) workspacePath(p string) (string, error) {
	if a.Workspace == "" || a.Step.Workspace == "none" {
		return "", herr(guest.StatusDenied, "step %q has no workspace", a.Step.Name)
	}
	if a.Step.Workspace == "ro" {
		return "", herr(guest.StatusDenied, "step %q has a read-only workspace", a.Step.Name)
	}
	if p == "" || filepath.IsAbs(p) || !filepath.IsLocal(p) {
		return "", herr(guest.StatusDenied, "path %q is not inside the workspace", p)
	}
	rel := filepath.ToSlash(filepath.Clean(p))
	if err := confine.CheckWrite(a.Workspace, rel); err != nil {
		return "", fileEffectError(p, err)
	}
	return rel, nil
}

// writeAtomic writes the file of a file effect at rel (from workspacePath)
// beneath the workspace: directories created one at a time relative to the
// one before, no symbolic link followed, a temporary file synced and
// renamed in its directory's descriptor, the directory synced
// (confine.WriteFile). A link met on the way, even one swapped in while the
// write runs, refuses the effect (StatusDenied) and nothing is created
// beyond it. The write takes room from the workspace's guard first: past
// the task's limits.workspace_bytes it is refused with StatusBudget, below
// the free space the guard keeps with StatusInternal (space may be freed).
func (a *Attempt) writeAtomic(rel string, data []byte) error {
	if err := a.WorkspaceGuard.Reserve(int64(len(data))); err != nil {
		if errors.Is(err, confine.ErrQuota) {
			return herr(guest.StatusBudget, "file effect %q: %v", rel, err)
		}
		return fmt.Errorf("file effect %q: %w", rel, err)
	}
	err := confine.WriteFile(a.Workspace, rel, data, 0o600)
	a.WorkspaceGuard.Written(int64(len(data)))
	if err != nil {
		return fileEffectError(rel, err)
	}
	return nil
}

func fileEffectError(p string, err error) error {
	if errors.Is(err, confine.ErrSymlink) {
		return herr(guest.StatusDenied, "file effect path %q goes through a symbolic link (%v); file effects follow no links: write to a real directory in the workspace", p, err)
	}
	return herr(guest.StatusInternal, "file effect %q: %v", p, err)
}
