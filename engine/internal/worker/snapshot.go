package worker

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lhengine/lhengine/ledger"
)

// A task's workspace travels with it (ledger.Workspaces): each commit of a
// unit whose step writes the workspace records a snapshot of the tree, and
// before a unit runs, a workspace that is missing here, or holds an older
// snapshot than the task's latest, is restored from the store. Beside each
// workspace folder a marker (<task>.snapshot, outside the folder, so no
// plugin sees or changes it) says which snapshot the folder holds and the
// size, mtime and sha256 of each file as this process last read or wrote
// it: the next snapshot hashes only the files whose size or mtime changed.

// wsTasks are the workspaces with attempts running in this process, shared
// by every worker, by folder, and the wsIdleKept latest used of those with
// none running now: a task whose units run one after another keeps what
// it knows of its folder (its marker, and the snapshots this process
// recorded, needsSnapshot) from one unit to the next.
var wsTasks = struct {
	sync.Mutex
	m    map[string]*wsTask
	used uint64 // counts releases; wsTask.used orders the idle
}{m: map[string]*wsTask{}}

// wsIdleKept is how many workspaces with no attempt running wsTasks keeps.
const wsIdleKept = 64

// forgetIdle drops the least recently used workspace with no attempt
// running while more than wsIdleKept are kept. The caller holds wsTasks.
func forgetIdle() {
	for {
		idle, oldest := 0, ""
		for dir, t := range wsTasks.m {
			if t.refs > 0 {
				continue
			}
			if idle++; oldest == "" || t.used < wsTasks.m[oldest].used {
				oldest = dir
			}
		}
		if idle <= wsIdleKept {
			return
		}
		delete(wsTasks.m, oldest)
	}
}

// wsTask is one task's workspace in this process. mu is held while a
// snapshot is taken until its commit has its place in the store's order
// of commits (ledger.Result.Queued), and while the folder is restored: a
// snapshot names the tree as it was at its commit, and commits of one task
// here record their snapshots in the order they were taken.
type wsTask struct {
	mu      sync.Mutex
	refs    int     // attempts using the entry
	running int     // attempts that may write the folder now
	mark    *marker // loaded on first use
	saved   *marker // as the file holds it (nil: not known)
	// recorded is, for a step and pass, the seq of the last snapshot
	// this process committed for a unit of it (needsSnapshot).
	recorded map[stepPass]uint64
	used     uint64 // when refs last fell to 0 (wsTasks.used); under wsTasks
}

// stepPass names a pass of a step.
type stepPass struct{ step, pass int }

// marker is what the file beside the folder holds: the snapshot the
// folder holds (Seq, and the Digest of its tree) and the files as last
// hashed. A folder whose digest is the task's latest needs no restore, so
// the file is rewritten only when the tree or the files' hashes changed:
// not at each commit of a unit that left the workspace as it was.
type marker struct {
	Seq    uint64            `json:"seq"`
	Digest string            `json:"digest,omitempty"`
	Files  map[string]cached `json:"files"`
}

// current reports whether a folder holding m holds task's latest snapshot.
func (m *marker) current(task *ledger.Task) bool {
	return m.Seq == task.WorkspaceSeq || (task.WorkspaceDigest != "" && m.Digest == task.WorkspaceDigest)
}

// sameFiles reports whether a and b name the same files with the same
// size, mtime and content.
func sameFiles(a, b map[string]cached) bool {
	if len(a) != len(b) {
		return false
	}
	for p, x := range a {
		y, ok := b[p]
		if !ok || x.Size != y.Size || x.MTime != y.MTime || x.SHA256 != y.SHA256 {
			return false
		}
	}
	return true
}

// cached is a file as it was last hashed (or written by a restore).
type cached struct {
	Size   int64  `json:"size"`
	MTime  int64  `json:"mtime"` // UnixNano
	SHA256 string `json:"sha256"`
	Read   int64  `json:"read"` // UnixNano: when its sha256 was taken
}

// racyWindow: a file whose mtime is this close to the moment it was
// hashed may have been written again within the same mtime tick, so it is
// hashed again however its size and mtime compare.
const racyWindow = 50 * time.Millisecond

// wsUse is one attempt's use of its task's workspace.
type wsUse struct {
	dir   string
	write bool // the step writes the workspace: its commit records a snapshot
	// changed is set by whatever of the attempt's may change the tree (the
	// guest's file system, its file effects): an attempt that left it
	// unset changed nothing (needsSnapshot).
	changed atomic.Bool
	at      stepPass // the unit's step and pass
	t       *wsTask
	once    sync.Once
}

// needsSnapshot reports whether the attempt's commit must record a
// snapshot of the workspace, which means walking the tree. Not when the
// attempt changed nothing there and the task's latest snapshot, as this
// process knows it, is one it committed for a unit of the same step and
// pass: that snapshot is of the tree as it still is, and it is what a fork
// at the next step takes (ledger.Workspaces.Fork). A fan-out whose units
// leave the workspace as they found it walks the tree once, not per unit.
// The caller holds u.t.mu.
func (u *wsUse) needsSnapshot() bool {
	if u.changed.Load() {
		return true
	}
	seq, ok := u.t.recorded[u.at]
	return !ok || u.t.mark == nil || seq != u.t.mark.Seq
}

// markerPath is the marker of the workspace folder dir.
func markerPath(dir string) string { return dir + ".snapshot" }

// enterWorkspace makes dir, the workspace of task, ready for an attempt:
// restored from the task's latest snapshot when it is missing or holds
// another, unless other attempts of the task run on it in this process.
func (w *Worker) enterWorkspace(task *ledger.Task, dir string, write bool) (*wsUse, error) {
	wsTasks.Lock()
	t := wsTasks.m[dir]
	if t == nil {
		t = &wsTask{}
		wsTasks.m[dir] = t
	}
	t.refs++
	wsTasks.Unlock()
	u := &wsUse{dir: dir, write: write, t: t}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.mark == nil {
		t.mark = readMarker(dir)
		t.saved = t.mark
	}
	fi, statErr := os.Stat(dir)
	missing := errors.Is(statErr, fs.ErrNotExist)
	switch {
	case t.running == 0 && task.WorkspaceSeq > 0 && (missing || !t.mark.current(task)):
		if err := w.restore(task.ID, dir, t); err != nil {
			u.release()
			return nil, err
		}
	case statErr == nil && fi.IsDir(): // there: nothing to make
	default:
		if err := os.MkdirAll(dir, 0o755); err != nil {
			u.release()
			return nil, err
		}
	}
	t.running++
	return u, nil
}

// release ends the attempt's use of the workspace.
func (u *wsUse) release() {
	u.once.Do(func() {
		u.t.mu.Lock()
		if u.t.running > 0 {
			u.t.running--
		}
		u.t.mu.Unlock()
		wsTasks.Lock()
		if u.t.refs--; u.t.refs == 0 {
			wsTasks.used++
			u.t.used = wsTasks.used
			forgetIdle()
		}
		wsTasks.Unlock()
	})
}

func readMarker(dir string) *marker {
	m := &marker{}
	b, err := os.ReadFile(markerPath(dir))
	if err == nil && json.Unmarshal(b, m) != nil {
		m = &marker{}
	}
	if m.Files == nil {
		m.Files = map[string]cached{}
	}
	return m
}

// save writes the marker beside dir (a temporary file renamed over it).
func (m *marker) save(dir string) error {
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	tmp := markerPath(dir) + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, markerPath(dir))
}

// underLink reports whether a folder on the way to path (slash-separated,
// relative) is one of links: restoring it would write wherever the link
// points, outside the workspace. A tree walked once never names one, but
// restore does not rely on the manifest it reads.
func underLink(path string, links map[string]bool) bool {
	for i := range len(path) {
		if path[i] == '/' && links[path[:i]] {
			return true
		}
	}
	return false
}

// restore replaces dir with the task's latest snapshot: written to a
// folder beside it, then renamed into place.
func (w *Worker) restore(id, dir string, t *wsTask) error {
	snap, err := w.cfg.Store.WorkspaceSnapshot(id)
	if err != nil {
		return fmt.Errorf("reading the task's workspace snapshot: %w", err)
	}
	parent := filepath.Dir(dir)
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp(parent, filepath.Base(dir)+".restore-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp) // nothing left once renamed
	files := map[string]cached{}
	var dirs []ledger.WorkspaceEntry
	links := map[string]bool{} // the symlinks restored so far
	for _, e := range snap.Entries {
		if !filepath.IsLocal(filepath.FromSlash(e.Path)) || underLink(e.Path, links) {
			return fmt.Errorf("workspace snapshot %d names %q, outside the workspace", snap.Seq, e.Path)
		}
		if e.Type == ledger.WorkspaceSymlink {
			links[e.Path] = true
		}
		p := filepath.Join(tmp, filepath.FromSlash(e.Path))
		switch e.Type {
		case ledger.WorkspaceDir:
			if err := os.MkdirAll(p, 0o700); err != nil {
				return err
			}
			dirs = append(dirs, e)
		case ledger.WorkspaceSymlink:
			if err := os.Symlink(e.Target, p); err != nil {
				return err
			}
		case ledger.WorkspaceFile:
			c, err := w.restoreFile(p, e)
			if err != nil {
				return fmt.Errorf("restoring %s from workspace snapshot %d: %w", e.Path, snap.Seq, err)
			}
			files[e.Path] = c
		}
	}
	for i := len(dirs) - 1; i >= 0; i-- {
		if err := os.Chmod(filepath.Join(tmp, filepath.FromSlash(dirs[i].Path)), fs.FileMode(dirs[i].Mode)&fs.ModePerm); err != nil {
			return err
		}
	}
	if err := os.Chmod(tmp, 0o755); err != nil {
		return err
	}
	if _, err := os.Lstat(dir); err == nil {
		old := tmp + ".old"
		if err := os.Rename(dir, old); err != nil {
			return err
		}
		defer os.RemoveAll(old)
	}
	if err := os.Rename(tmp, dir); err != nil {
		return err
	}
	t.mark, t.saved = &marker{Seq: snap.Seq, Digest: snap.Digest(), Files: files}, nil
	if err := t.mark.save(dir); err != nil {
		w.log.Warn("writing the workspace marker failed; the next unit restores the workspace again", "dir", dir, "error", err)
	} else {
		t.saved = t.mark
	}
	w.log.Info("workspace restored from the task's snapshot", "task", id, "snapshot", snap.Seq, "files", len(files), "bytes", snap.Bytes)
	return nil
}

func (w *Worker) restoreFile(p string, e ledger.WorkspaceEntry) (cached, error) {
	f, err := os.OpenFile(p, os.O_CREATE|os.O_EXCL|os.O_WRONLY, fs.FileMode(e.Mode)&fs.ModePerm|0o200)
	if err != nil {
		return cached{}, err
	}
	err = w.cfg.Store.ReadWorkspaceBlob(e.SHA256, f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(p, fs.FileMode(e.Mode)&fs.ModePerm)
	}
	if err != nil {
		return cached{}, err
	}
	fi, err := os.Lstat(p)
	if err != nil {
		return cached{}, err
	}
	return cached{Size: fi.Size(), MTime: fi.ModTime().UnixNano(), SHA256: e.SHA256, Read: time.Now().UnixNano()}, nil
}

// errWorkspaceQuota is a workspace past limits.workspace_bytes.
type errWorkspaceQuota struct{ size, limit uint64 }

func (e *errWorkspaceQuota) Error() string {
	return fmt.Sprintf("the workspace holds %d bytes of files, past limits.workspace_bytes %d: no snapshot was recorded", e.size, e.limit)
}

// snapshot reads the workspace's tree for the commit of lease l, and puts
// the blobs of the files the store does not hold. The caller holds u.t.mu
// until the commit is done (committed). A tree larger than limit is an
// *errWorkspaceQuota, before anything is hashed or stored.
func (u *wsUse) snapshot(ctx context.Context, st ledger.Store, l ledger.Lease, limit uint64) (*ledger.WorkspaceSnapshot, map[string]cached, error) {
	var err error
	for range 3 { // a file changed under the snapshot: take it again
		var snap *ledger.WorkspaceSnapshot
		var files map[string]cached
		snap, files, err = u.take(ctx, st, l, limit)
		if !errors.Is(err, ledger.ErrWorkspaceChanged) {
			return snap, files, err
		}
	}
	return nil, nil, err
}

func (u *wsUse) take(ctx context.Context, st ledger.Store, l ledger.Lease, limit uint64) (*ledger.WorkspaceSnapshot, map[string]cached, error) {
	prev := u.t.mark.Files
	snap := &ledger.WorkspaceSnapshot{Entries: []ledger.WorkspaceEntry{}}
	files := map[string]cached{}
	var hash []int // entries whose sha256 must be read
	err := filepath.WalkDir(u.dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == u.dir {
			return nil
		}
		rel, err := filepath.Rel(u.dir, p)
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		e := ledger.WorkspaceEntry{Path: filepath.ToSlash(rel), Mode: uint32(info.Mode().Perm())}
		switch {
		case d.IsDir():
			e.Type = ledger.WorkspaceDir
		case d.Type()&fs.ModeSymlink != 0:
			e.Type = ledger.WorkspaceSymlink
			if e.Target, err = os.Readlink(p); err != nil {
				return err
			}
		case d.Type().IsRegular():
			e.Type, e.Size = ledger.WorkspaceFile, info.Size()
			snap.Bytes += info.Size()
			c, ok := prev[e.Path]
			mt := info.ModTime().UnixNano()
			if ok && c.Size == e.Size && c.MTime == mt && mt < c.Read-int64(racyWindow) {
				e.SHA256 = c.SHA256
				files[e.Path] = c
			} else {
				hash = append(hash, len(snap.Entries))
			}
		default:
			return nil // no other kind of file can be made through WASI
		}
		snap.Entries = append(snap.Entries, e)
		return nil
	})
	if err != nil {
		return nil, nil, fmt.Errorf("reading the workspace: %w", err)
	}
	if limit > 0 && uint64(snap.Bytes) > limit {
		return nil, nil, &errWorkspaceQuota{size: uint64(snap.Bytes), limit: limit}
	}
	for _, i := range hash {
		e := &snap.Entries[i]
		c, err := hashFile(filepath.Join(u.dir, filepath.FromSlash(e.Path)))
		if err != nil {
			return nil, nil, err
		}
		if c.Size != e.Size {
			return nil, nil, fmt.Errorf("%w: %s", ledger.ErrWorkspaceChanged, e.Path)
		}
		e.SHA256 = c.SHA256
		files[e.Path] = c
	}
	sums := snap.Sums()
	if len(sums) == 0 {
		return snap, files, nil // no blob to keep or send: no transaction of its own
	}
	missing, err := st.PrepareWorkspace(ctx, l, sums)
	if err != nil {
		return nil, nil, err
	}
	if len(missing) > 0 {
		path := map[string]ledger.WorkspaceEntry{}
		for _, e := range snap.Entries {
			if e.Type == ledger.WorkspaceFile {
				path[e.SHA256] = e
			}
		}
		for _, sum := range missing {
			e := path[sum]
			if err := putFile(ctx, st, filepath.Join(u.dir, filepath.FromSlash(e.Path)), e); err != nil {
				return nil, nil, err
			}
		}
	}
	return snap, files, nil
}

func hashFile(p string) (cached, error) {
	read := time.Now().UnixNano()
	f, err := os.Open(p)
	if err != nil {
		return cached{}, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return cached{}, err
	}
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return cached{}, err
	}
	return cached{Size: n, MTime: fi.ModTime().UnixNano(), SHA256: hex.EncodeToString(h.Sum(nil)), Read: read}, nil
}

func putFile(ctx context.Context, st ledger.Store, p string, e ledger.WorkspaceEntry) error {
	f, err := os.Open(p)
	if err != nil {
		return err
	}
	defer f.Close()
	return st.PutWorkspaceBlob(ctx, e.SHA256, e.Size, f)
}

// committed records that the folder holds snapshot seq, of tree digest,
// whose files are files, after its commit. The file beside the folder is
// rewritten only when the tree or the files' hashes changed since it was
// last written: a folder of the task's latest digest needs no restore.
func (u *wsUse) committed(seq uint64, digest string, files map[string]cached, log interface{ Warn(string, ...any) }) {
	u.t.mu.Lock()
	defer u.t.mu.Unlock()
	if u.t.mark != nil && u.t.mark.Seq > seq {
		return // a later snapshot's commit came back first
	}
	if u.t.recorded == nil {
		u.t.recorded = map[stepPass]uint64{}
	}
	u.t.recorded[u.at] = seq
	u.t.mark = &marker{Seq: seq, Digest: digest, Files: files}
	if s := u.t.saved; s != nil && s.Digest == digest && digest != "" && sameFiles(s.Files, files) {
		return
	}
	u.t.saved = nil
	if err := u.t.mark.save(u.dir); err != nil {
		log.Warn("writing the workspace marker failed; the next unit restores the workspace", "dir", u.dir, "error", err)
		return
	}
	u.t.saved = u.t.mark
}
