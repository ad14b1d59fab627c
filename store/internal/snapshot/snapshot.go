// Package snapshot is the store's workspace snapshots (ledger.Workspaces):
// the manifest of a task's workspace each commit records, the blobs of its
// files' contents (in the content-addressed blob table), the blobs a unit
// about to commit a snapshot has put (kept from GC until then), their
// charge in the task's usage, and the copy of a snapshot into a forked
// task.
package snapshot

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/lhengine/lhengine/ledger"
	"github.com/lhengine/lhengine/store/internal/blob"
	"github.com/lhengine/lhengine/store/internal/kv"
	"github.com/lhengine/lhengine/store/internal/lease"
	"github.com/lhengine/lhengine/store/internal/quota"
)

// Key layout, in a table of its own (w) so that one task's snapshot
// records are one prefix away (Remove deletes it whole):
//
//	w/<task>/s/<step>             WorkspaceSnapshot: the latest a unit of the step recorded
//	w/<task>/p/<step>/<item>      the sums a unit about to commit a snapshot prepared (JSON list)
//	w/<task>/c/<sha256>           a blob counted in the task's usage (Usage.Workspace), once
//
// The files' contents are blobs of the store's blob table (B/<sha256> and
// its chunks), shared with artifacts and modules and with every other
// snapshot that holds the same content.

// Prefix is the prefix of every snapshot record of a task.
func Prefix(task string) []byte { return []byte("w/" + task + "/") }

// Key is the key of the snapshot a unit of step last recorded.
func Key(task string, step int) []byte { return fmt.Appendf(nil, "w/%s/s/%04x", task, step) }

func snapPrefix(task string) []byte { return []byte("w/" + task + "/s/") }

// PendingKey is the key of the sums the unit (step, item) prepared.
func PendingKey(task string, step, item int) []byte {
	return fmt.Appendf(nil, "w/%s/p/%04x/%08x", task, step, item)
}

// ChargedKey marks blob sum counted in the task's usage.
func ChargedKey(task, sum string) []byte { return []byte("w/" + task + "/c/" + sum) }

// Prepare records, under lease l, the sums the unit's coming snapshot
// names (so GC keeps them) and returns those the store does not hold. The
// caller holds blob.Hold across the transaction, so a GC under way has
// finished deleting before this looks.
func Prepare(t *kv.Tx, l ledger.Lease, sums []string) ([]string, error) {
	if _, _, err := lease.Leased(t, l); err != nil {
		return nil, err
	}
	var missing []string
	for _, sum := range sums {
		if !ledger.IsSHA256(sum) {
			return nil, fmt.Errorf("workspace blob %q: want 64 hex digits", sum)
		}
		_, err := t.GetRaw(kv.BlobKey(sum))
		if errors.Is(err, ledger.ErrNotFound) {
			missing = append(missing, sum)
		} else if err != nil {
			return nil, err
		}
	}
	if sums == nil {
		sums = []string{}
	}
	return missing, t.PutJSON(PendingKey(l.Task, l.Step, l.Item), sums)
}

// Record writes snap as the snapshot the commit of lease l records, in the
// commit's transaction: it sets the unit, the time and the next seq of the
// task (Task.WorkspaceSeq, which the caller saves), counts the blobs the
// task had not counted yet in its usage, and drops the unit's prepared
// sums. A file whose blob the store does not hold fails the commit: the
// caller prepares and puts them first.
func Record(t *kv.Tx, task *ledger.Task, l ledger.Lease, pass int, snap *ledger.WorkspaceSnapshot, now time.Time) error {
	task.WorkspaceSeq++
	task.WorkspaceDigest = snap.Digest()
	snap.Task, snap.Seq, snap.Step, snap.Pass, snap.Item, snap.Attempt, snap.Time = task.ID, task.WorkspaceSeq, l.Step, pass, l.Item, l.Attempt, now
	if err := charge(t, task.ID, snap); err != nil {
		return err
	}
	if err := t.Del(PendingKey(l.Task, l.Step, l.Item)); err != nil {
		return err
	}
	return t.PutJSON(Key(task.ID, l.Step), snap)
}

// charge counts in task's usage the blobs of snap it has not counted yet.
func charge(t *kv.Tx, task string, snap *ledger.WorkspaceSnapshot) error {
	var add int64
	seen := map[string]bool{}
	for _, e := range snap.Entries {
		if e.Type != ledger.WorkspaceFile || seen[e.SHA256] {
			continue
		}
		seen[e.SHA256] = true
		_, err := t.GetRaw(ChargedKey(task, e.SHA256))
		if err == nil {
			continue
		} else if !errors.Is(err, ledger.ErrNotFound) {
			return err
		}
		var m blob.Meta
		if err := t.GetJSON(kv.BlobKey(e.SHA256), &m); err != nil {
			return fmt.Errorf("workspace file %s: blob %s: %w", e.Path, e.SHA256, err)
		}
		if err := t.Put(ChargedKey(task, e.SHA256), nil); err != nil {
			return err
		}
		add += m.Size
	}
	if add == 0 {
		return nil
	}
	u, err := quota.Usage(t, task)
	if err != nil {
		return err
	}
	u.Workspace += add
	return t.PutJSON(kv.QuotaKey(task), u)
}

// All returns the snapshots task keeps, in step order.
func All(t *kv.Tx, task string) ([]ledger.WorkspaceSnapshot, error) {
	var out []ledger.WorkspaceSnapshot
	err := t.Scan(snapPrefix(task), func(key, val []byte) (bool, error) {
		var s ledger.WorkspaceSnapshot
		if err := json.Unmarshal(val, &s); err != nil {
			return false, fmt.Errorf("workspace snapshot %s: %w", key, err)
		}
		out = append(out, s)
		return true, nil
	})
	return out, err
}

// Latest returns the task's snapshot with the highest seq; ErrNotFound
// for none.
func Latest(t *kv.Tx, task string) (*ledger.WorkspaceSnapshot, error) {
	all, err := All(t, task)
	if err != nil {
		return nil, err
	}
	if len(all) == 0 {
		return nil, fmt.Errorf("workspace snapshot of task %s: %w", task, ledger.ErrNotFound)
	}
	best := slices.MaxFunc(all, func(a, b ledger.WorkspaceSnapshot) int { return cmp.Compare(a.Seq, b.Seq) })
	return &best, nil
}

// At returns the snapshot a fork of task at step at starts from: the
// latest (highest seq) recorded by a unit of a step before at in that
// step's current pass (passes: each step's pass, by index); nil for none.
func At(t *kv.Tx, task string, at int, passes []int) (*ledger.WorkspaceSnapshot, error) {
	all, err := All(t, task)
	if err != nil {
		return nil, err
	}
	var best *ledger.WorkspaceSnapshot
	for i := range all {
		s := &all[i]
		if s.Step >= at || s.Step >= len(passes) || s.Pass != passes[s.Step] {
			continue
		}
		if best == nil || s.Seq > best.Seq {
			best = s
		}
	}
	return best, nil
}

// Copy records snap as the first snapshot of the forked task (seq 1 of
// task, which the caller saves), its blobs counted in its usage.
func Copy(t *kv.Tx, task *ledger.Task, snap ledger.WorkspaceSnapshot) error {
	task.WorkspaceSeq, task.WorkspaceDigest = 1, snap.Digest()
	snap.Task, snap.Seq = task.ID, 1
	if err := charge(t, task.ID, &snap); err != nil {
		return err
	}
	return t.PutJSON(Key(task.ID, snap.Step), snap)
}

// Referenced adds to used every blob a snapshot or a prepared snapshot of
// any task names: GC keeps them. GC calls it holding blob.LockAll.
func Referenced(t *kv.Tx, used map[string]bool) error {
	return t.Scan([]byte("w/"), func(key, val []byte) (bool, error) {
		parts := strings.SplitN(string(key), "/", 4)
		if len(parts) < 4 {
			return true, nil
		}
		switch parts[2] {
		case "s":
			var s ledger.WorkspaceSnapshot
			if err := json.Unmarshal(val, &s); err != nil {
				return false, fmt.Errorf("workspace snapshot %s: %w", key, err)
			}
			for _, e := range s.Entries {
				if e.Type == ledger.WorkspaceFile {
					used[e.SHA256] = true
				}
			}
		case "p":
			var sums []string
			if err := json.Unmarshal(val, &sums); err != nil {
				return false, fmt.Errorf("prepared workspace blobs %s: %w", key, err)
			}
			for _, s := range sums {
				used[s] = true
			}
		}
		return true, nil
	})
}

// Put stores the size bytes read from r as blob sum, chunk by chunk (each
// its own transaction), the blob record last, unless the store holds it
// already. Bytes that are not sum (or not size long) write no record: the
// chunks left are an unfinished put's, which GC collects.
func Put(ctx context.Context, db *kv.DB, update kv.Update, sum string, size int64, r io.Reader) error {
	if !ledger.IsSHA256(sum) {
		return fmt.Errorf("workspace blob %q: want 64 hex digits", sum)
	}
	defer blob.Hold()()
	exists := false
	if err := db.View(func(t *kv.Tx) error {
		_, err := t.GetRaw(kv.BlobKey(sum))
		exists = err == nil
		if errors.Is(err, ledger.ErrNotFound) {
			return nil
		}
		return err
	}); err != nil {
		return err
	}
	if exists {
		return nil
	}
	h := sha256.New()
	buf := make([]byte, ledger.ArtifactChunk)
	var n int64
	chunks := 0
	for {
		k, err := io.ReadFull(r, buf)
		if k > 0 {
			h.Write(buf[:k])
			n += int64(k)
			if n > size {
				return fmt.Errorf("%w: more than its %d bytes", ledger.ErrWorkspaceChanged, size)
			}
			chunk, c := slices.Clone(buf[:k]), chunks
			if err := update(ctx, func(t *kv.Tx) error { return t.Put(kv.ChunkKey(sum, c), chunk) }); err != nil {
				return fmt.Errorf("storing workspace blob %s chunk %d: %w", sum[:12], c, err)
			}
			chunks++
		}
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			break
		}
		if err != nil {
			return err
		}
	}
	if chunks == 0 {
		if err := update(ctx, func(t *kv.Tx) error { return t.Put(kv.ChunkKey(sum, 0), []byte{}) }); err != nil {
			return err
		}
		chunks = 1
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != sum || n != size {
		return fmt.Errorf("%w: %d bytes with sha256 %s, recorded as %d bytes with %s", ledger.ErrWorkspaceChanged, n, got, size, sum)
	}
	meta := blob.Meta{Size: n, Chunks: chunks}
	return update(ctx, func(t *kv.Tx) error { return t.PutJSON(kv.BlobKey(sum), meta) })
}

// Read writes blob sum to w, chunk by chunk, and checks its sha256.
func Read(db *kv.DB, sum string, w io.Writer) error {
	if !ledger.IsSHA256(sum) {
		return fmt.Errorf("workspace blob %q: want 64 hex digits: %w", sum, ledger.ErrNotFound)
	}
	h := sha256.New()
	err := db.View(func(t *kv.Tx) error {
		var m blob.Meta
		if err := t.GetJSON(kv.BlobKey(sum), &m); err != nil {
			return fmt.Errorf("workspace blob %s: %w", sum, err)
		}
		for n := range m.Chunks {
			chunk, err := t.GetRaw(kv.ChunkKey(sum, n))
			if errors.Is(err, ledger.ErrNotFound) {
				return fmt.Errorf("blob %s: chunk %d of %d is missing: the store is damaged", sum, n, m.Chunks)
			} else if err != nil {
				return err
			}
			h.Write(chunk)
			if _, err := w.Write(chunk); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != sum {
		return fmt.Errorf("blob %s: stored bytes have sha256 %s: the store is damaged", sum, got)
	}
	return nil
}
