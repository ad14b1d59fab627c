package worker

import (
	"sync"

	"github.com/lhengine/lhengine/engine/internal/confine"
	"github.com/lhengine/lhengine/ledger"
)

// WorkspaceMargin is the free space, beyond the store's own floor
// (store.Options.MinFreeBytes), that writes to a workspace leave on its
// file system. The store refuses its writes at its floor; Badger's work
// after a write it accepted (a memtable flush of up to 8 MiB, the tables
// of a compaction) goes below it, into room the floor keeps. Workspace
// writes stop this much above the floor, so that the store, not a plugin,
// is the last to write before the floor: the attempt that was refused is
// still recorded, its outputs and logs committed, and Badger never meets
// a full disk through its memory maps (where it dies with SIGBUS).
const WorkspaceMargin = 32 << 20

// guards are the workspace guards of the tasks with attempts running in
// this process, shared by every worker: attempts of one task at once
// count their writes together.
var guards = struct {
	sync.Mutex
	m map[string]*sharedGuard // by workspace directory
}{m: map[string]*sharedGuard{}}

type sharedGuard struct {
	g    *confine.Guard
	refs int
}

// workspaceGuard returns the guard of the workspace dir for an attempt,
// and the function the attempt calls when it ends. The quota is the task's
// limits.workspace_bytes; the reserve is the store's floor plus
// WorkspaceMargin (none for a store with no floor). A guard lives while
// attempts use it: the next one measures the workspace afresh.
func workspaceGuard(dir string, quota uint64, st ledger.Store) (*confine.Guard, func()) {
	guards.Lock()
	defer guards.Unlock()
	sg := guards.m[dir]
	if sg == nil {
		var reserve int64
		if floor := st.MinFreeBytes(); floor > 0 {
			reserve = floor + WorkspaceMargin
		}
		sg = &sharedGuard{g: confine.NewGuard(dir, int64(min(quota, 1<<62)), reserve)}
		guards.m[dir] = sg
	}
	sg.refs++
	return sg.g, func() {
		guards.Lock()
		defer guards.Unlock()
		if sg.refs--; sg.refs == 0 && guards.m[dir] == sg {
			delete(guards.m, dir)
		}
	}
}
