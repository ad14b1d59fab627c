package guest

import (
	"fmt"
	"path"
	"path/filepath"
	"strings"

	"github.com/tetratelabs/wazero"
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
type Mount struct {
	HostDir  string
	GuestDir string
	ReadOnly bool
}

// mountConfig is the filesystem of an attempt: nil for none.
func mountConfig(mounts []Mount) (wazero.FSConfig, error) {
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
		fsys, err := mountFS(root, m.ReadOnly)
		if err != nil {
			return nil, fmt.Errorf("mount %q: %w", m.HostDir, err)
		}
		// What WithDirMount and WithReadOnlyDirMount do, with confinement.
		cfg = cfg.(sysfs.FSConfig).WithSysFSMount(fsys, guestDir)
	}
	return cfg, nil
}

// mountFS is the file system of one mount: the tree beneath root, held
// inside it by package confine, and read-only when ro.
func mountFS(root string, ro bool) (experimentalsys.FS, error) {
	c, err := confine.NewFS(root)
	if err != nil {
		return nil, err
	}
	if ro {
		return &sysfs.ReadFS{FS: c}, nil
	}
	return c, nil
}
