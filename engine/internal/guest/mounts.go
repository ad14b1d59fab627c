package guest

import (
	"context"
	"errors"
	"fmt"
	"path"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	experimentalsys "github.com/tetratelabs/wazero/experimental/sys"
	"github.com/tetratelabs/wazero/experimental/sysfs"

	"github.com/lhengine/lhengine/engine/internal/confine"
)

// Mount makes the host directory HostDir visible to the guest at GuestDir
// (a WASI preopen), read-only when ReadOnly is set.
//
// The guest cannot leave a mount: wazero refuses paths that climb out with
// "..", an absolute path outside every mount matches no preopen, and every
// path is resolved and used relative to an open descriptor of the mount's
// directory (package confine): one component at a time, never following a
// link out, every change made with the *at call on the parent directory's
// descriptor. Relative links that stay inside the mount are followed; a
// link leading outside and every absolute link are refused (EPERM). This
// holds while anything else (another item sharing the workspace, a host
// process) changes the tree at the same time: there is no check made by
// path and then used by path. A read-only mount refuses every write.
//
// With Guard set, the guest's writes to the mount take room from it: a
// write past its quota fails with EDQUOT, one that would leave less free
// space than its reserve with ENOSPC, and the attempt's log says why.
//
// With Changed set, anything the guest does that may change the tree
// beneath a writable mount sets it first (confine.FS.Tracked): left unset,
// the attempt changed nothing there.
type Mount struct {
	HostDir  string
	GuestDir string
	ReadOnly bool
	Guard    *confine.Guard
	Changed  *atomic.Bool
}

// mountConfig is the filesystem of an attempt: nil for none. refused is
// told of each write a mount's Guard refuses.
func mountConfig(mounts []Mount, refused func(error)) (wazero.FSConfig, error) {
	if len(mounts) == 0 {
		return nil, nil
	}
	cfg := wazero.NewFSConfig()
	seen := map[string]bool{}
	for _, m := range mounts {
		guestDir := m.GuestDir
		if guestDir == "" || !strings.HasPrefix(guestDir, "/") {
			return nil, fmt.Errorf("mount %q: guest directory %q must be an absolute path", m.HostDir, m.GuestDir)
		}
		guestDir = path.Clean(guestDir)
		if seen[guestDir] {
			return nil, fmt.Errorf("mount %q: guest directory %q is mounted twice", m.HostDir, guestDir)
		}
		seen[guestDir] = true
		// The path to the host directory is the operator's or the task
		// author's, and trusted: the kernel follows any link on it each time
		// the root is opened. Confinement starts beneath it (package
		// confine), so resolving the path first bought nothing and cost a
		// stat per component at every attempt.
		root, err := filepath.Abs(m.HostDir)
		if err != nil {
			return nil, fmt.Errorf("mount %q: %w", m.HostDir, err)
		}
		// Opening it as the root refuses what is missing or not a
		// directory (ENOTDIR): no stat beforehand.
		fsys, err := mountFS(root, m, refused)
		if err != nil {
			return nil, fmt.Errorf("mount %q: %w", m.HostDir, err)
		}
		// What WithDirMount and WithReadOnlyDirMount do, with confinement.
		cfg = cfg.(sysfs.FSConfig).WithSysFSMount(fsys, guestDir)
	}
	return cfg, nil
}

// mountFS is the file system of mount m: the tree beneath root, held
// inside it by package confine, and read-only when m says so.
func mountFS(root string, m Mount, refused func(error)) (experimentalsys.FS, error) {
	c, err := confine.NewFS(root)
	if err != nil {
		return nil, err
	}
	if m.ReadOnly {
		return &sysfs.ReadFS{FS: c}, nil
	}
	if m.Guard != nil {
		c = c.Guarded(m.Guard, refused)
	}
	if m.Changed != nil {
		c = c.Tracked(m.Changed)
	}
	return c, nil
}

// WASI error numbers (wasi_snapshot_preview1 errno) of a refused write.
const (
	wasiDquot uint64 = 19
	wasiIO    uint64 = 29
	wasiNospc uint64 = 51
)

// refusedWrite records, in attempt a's log and for the WASI call under way,
// a write a mount's guard refused.
func (a *attempt) refusedWrite(err error) {
	if a == nil || a == orphan {
		return
	}
	a.log.line("warn", "workspace write refused: "+err.Error())
	a.fsErrno = wasiNospc
	var re *confine.RefusedError
	if errors.As(err, &re) && re.Errno() == syscall.EDQUOT {
		a.fsErrno = wasiDquot
	}
}

// wrapWrite wraps a WASI function that writes to a file (fd_write,
// fd_pwrite, fd_filestat_set_size): when a guard refused the write, the
// guest gets EDQUOT or ENOSPC instead of the EIO wazero passes on for an
// error it cannot name.
func wrapWrite(orig api.GoModuleFunction) api.GoModuleFunc {
	return func(ctx context.Context, mod api.Module, stack []uint64) {
		a, _ := attemptFrom(ctx)
		if a == nil || a == orphan {
			orig.Call(ctx, mod, stack)
			return
		}
		a.fsErrno = 0
		orig.Call(ctx, mod, stack)
		if a.fsErrno != 0 && stack[0] == wasiIO {
			stack[0] = a.fsErrno
		}
		a.fsErrno = 0
	}
}
