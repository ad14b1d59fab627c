package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/dgraph-io/badger/v4"

	"github.com/lhengine/lhengine/ledger"
	"github.com/lhengine/lhengine/store/internal/blob"
	"github.com/lhengine/lhengine/store/internal/index"
	"github.com/lhengine/lhengine/store/internal/kv"
	"github.com/lhengine/lhengine/store/internal/snapshot"
)

// Fork creates a task from a checkpoint of task id (ledger.Workspaces):
// the outputs of the steps before step at (at < 0: the last checkpoint),
// their artifacts and the workspace snapshot recorded when step at-1
// completed, in one transaction; the new task starts at step at, or has
// succeeded when at is the number of steps. The original is not changed.
func (s *Store) Fork(ctx context.Context, id string, at int, by string) (*ledger.Task, error) {
	// The snapshot's and artifacts' blobs gain a referrer: GC waits.
	defer blob.Hold()()
	var out *ledger.Task
	err := s.update(ctx, func(t *kv.Tx) error {
		src, err := t.LoadTask(id)
		if err != nil {
			return fmt.Errorf("task %s: %w", id, err)
		}
		if src.Removing {
			return fmt.Errorf("task %s is being removed: it cannot be forked", id)
		}
		n := len(src.Steps)
		if at < 0 {
			at = src.Cursor
			if src.Status == ledger.Succeeded {
				at = n
			}
		}
		if at < n && src.Steps[at].Every > 0 {
			at = src.Steps[at].Anchor // a window step starts again with its anchor
		}
		switch {
		case at > n:
			return fmt.Errorf("task %s has %d steps: it can be forked at step 1 to %d, or at its end", id, n, n)
		case at == n && src.Status != ledger.Succeeded:
			return fmt.Errorf("task %s is %s: only a succeeded task can be forked at its end; fork it at a step it completed, or at step %d %q where it is",
				id, src.Status, src.Cursor+1, src.Steps[src.Cursor].Name)
		case at > src.Cursor && src.Status != ledger.Succeeded:
			return fmt.Errorf("task %s is at step %d %q: it can be forked at that step or an earlier one, not at step %d %q",
				id, src.Cursor+1, src.Steps[src.Cursor].Name, at+1, src.Steps[at].Name)
		}
		for j := range at {
			if st := src.Steps[j]; !st.Planned || st.Done+st.Failed < st.Units {
				return fmt.Errorf("task %s has not completed step %d %q in its current pass: it cannot be forked after it", id, j+1, st.Name)
			}
		}
		now := s.now()
		task := &ledger.Task{
			ID: newTaskID(now), Name: src.Name, Status: ledger.Queued, CreatedAt: now, UpdatedAt: now,
			Notify: src.Notify, Steps: slices.Clone(src.Steps),
		}
		if src.Budget != nil {
			task.Budget = &ledger.Budget{Limits: src.Budget.Limits}
		} else {
			task.Budget = &ledger.Budget{}
		}
		if src.Meter != nil {
			task.Meter = newProgress(&src.Meter.ProgressSpec, src.Steps)
		} else {
			task.Meter = newProgress(nil, src.Steps)
		}
		t.Durable = true
		if err := copyRaw(t, kv.ManifestKey(id), kv.ManifestKey(task.ID)); err != nil {
			return fmt.Errorf("task %s's manifest: %w", id, err)
		}
		for _, k := range [][2][]byte{{kv.FactsKey(id), kv.FactsKey(task.ID)}, {kv.OutputLimitKey(id), kv.OutputLimitKey(task.ID)}} {
			if err := copyRaw(t, k[0], k[1]); err != nil && !errors.Is(err, ledger.ErrNotFound) {
				return err
			}
		}
		var usage ledger.Usage
		names := map[string]bool{}
		for j := range at {
			st := &task.Steps[j]
			st.Leased, st.Waiting = 0, 0
			names[st.Name] = true
			if st.Counters != nil {
				task.Counters = *addCounts(&task.Counters, *st.Counters)
			}
			size, err := copyUnits(t, id, task.ID, j, st.Pass)
			if err != nil {
				return err
			}
			usage.Outputs += size
		}
		for j := at; j < n; j++ {
			st := &task.Steps[j]
			st.Pass, st.Planned, st.Units, st.Written, st.PlanHash, st.Done, st.Leased, st.Open = 0, false, 0, 0, "", 0, 0, ""
			st.Failed, st.Waiting, st.Counters = 0, 0, nil
		}
		if usage.Artifacts, err = copyArtifacts(t, id, task.ID, names); err != nil {
			return err
		}
		if err := t.PutJSON(kv.QuotaKey(task.ID), usage); err != nil {
			return err
		}
		passes := make([]int, n)
		for j, st := range src.Steps {
			passes[j] = st.Pass
		}
		origin := &ledger.ForkOrigin{Task: id, StepIndex: at, By: by}
		if at < n {
			origin.Step = src.Steps[at].Name
		}
		snap, err := snapshot.At(t, id, at, passes)
		if err != nil {
			return err
		}
		if snap != nil {
			origin.Workspace = snap.Seq
			if err := snapshot.Copy(t, task, *snap); err != nil {
				return err
			}
		}
		task.ForkedFrom = origin
		msg := fmt.Sprintf("forked from task %s at its end", id)
		if at < n {
			msg = fmt.Sprintf("forked from task %s at step %d %q, with the outputs of the %d steps before it", id, at+1, origin.Step, at)
		}
		if snap != nil {
			msg += fmt.Sprintf(" and its workspace snapshot %d (%d files, %d bytes)", snap.Seq, len(snap.Sums()), snap.Bytes)
		}
		if by != "" {
			msg += " by " + by
		}
		if err := s.event(t, task, ledger.Event{Type: ledger.EvForked, Message: msg}); err != nil {
			return err
		}
		if at == n {
			task.Cursor = n - 1
			task.Status, task.Output, task.FinishedAt = ledger.Succeeded, slices.Clone(src.Output), now
			if err := s.event(t, task, ledger.Event{Type: ledger.EvSucceeded}); err != nil {
				return err
			}
			out = task
			return t.SaveTask(task)
		}
		if err := t.Put(kv.ActiveKey(task.ID), nil); err != nil {
			return err
		}
		nid := task.ID
		t.After(func(x *index.Index) { x.AddActive(nid) })
		task.Cursor = at
		if err := s.enterStep(t, task); err != nil {
			return err
		}
		if st := task.Steps[at]; task.Status == ledger.Queued && st.Planned && st.Units == 0 {
			if err := s.advance(t, task); err != nil {
				return err
			}
		}
		out = task
		return t.SaveTask(task)
	})
	if errors.Is(err, badger.ErrTxnTooBig) {
		return nil, fmt.Errorf("task %s is too large to fork in one transaction: %w", id, err)
	}
	if err != nil {
		return nil, err
	}
	if _, err := s.planPending(ctx, out.ID); err != nil && ctx.Err() == nil {
		return nil, err
	}
	return s.Task(ctx, out.ID)
}

// copyRaw copies the value at from to the key to.
func copyRaw(t *kv.Tx, from, to []byte) error {
	v, err := t.GetRaw(from)
	if err != nil {
		return err
	}
	return t.Put(to, v)
}

// copyUnits copies the units of step of task src that belong to its pass,
// with their committed attempts, to task dst as they stand: committed (or
// failed, an item allow_failures tolerated). It returns the bytes of the
// outputs copied.
func copyUnits(t *kv.Tx, src, dst string, step, pass int) (int64, error) {
	var units []*ledger.Unit
	err := t.Scan(kv.UnitStepPrefix(src, step), func(key, val []byte) (bool, error) {
		u := new(ledger.Unit)
		if err := json.Unmarshal(val, u); err != nil {
			return false, fmt.Errorf("unit record %s: %w", key, err)
		}
		if u.Pass == pass {
			units = append(units, u)
		}
		return true, nil
	})
	if err != nil {
		return 0, err
	}
	var size int64
	for _, u := range units {
		if u.State == ledger.UnitDone {
			a := new(ledger.Attempt)
			if err := t.GetJSON(kv.AttemptKey(src, step, u.Item, u.Committed), a); err != nil {
				return 0, fmt.Errorf("the committed attempt of unit %s/%d/%d: %w", src, step, u.Item, err)
			}
			a.Owner, a.Epoch = "", 0
			size += int64(len(a.Output))
			if err := t.PutJSON(kv.AttemptKey(dst, step, u.Item, u.Committed), a); err != nil {
				return 0, err
			}
		}
		u.Task, u.Owner, u.Epoch, u.LeaseUntil, u.NotBefore, u.Approval, u.Effect, u.WaitReason = dst, "", 0, time.Time{}, time.Time{}, "", "", ""
		if err := t.PutJSON(kv.UnitKey(dst, step, u.Item), u); err != nil {
			return 0, err
		}
	}
	return size, nil
}

// copyArtifacts copies the provenance of the artifacts that units of the
// steps named put in task src to task dst, each distinct blob counted in
// its usage; it returns their bytes.
func copyArtifacts(t *kv.Tx, src, dst string, steps map[string]bool) (int64, error) {
	var provs []ledger.Provenance
	err := t.Scan([]byte("p/"+src+"/"), func(key, val []byte) (bool, error) {
		var p ledger.Provenance
		if err := json.Unmarshal(val, &p); err != nil {
			return false, fmt.Errorf("provenance %s: %w", key, err)
		}
		if steps[p.Step] {
			provs = append(provs, p)
		}
		return true, nil
	})
	if err != nil {
		return 0, err
	}
	var size int64
	for _, p := range provs {
		sum, ok := strings.CutPrefix(p.Ref, "sha256:")
		if !ok {
			continue
		}
		p.Task = dst
		if err := t.PutJSON(kv.ProvKey(dst, p.Step, p.Item, sum, p.Name), p); err != nil {
			return 0, err
		}
		if _, err := t.GetRaw(kv.ChargedKey(dst, sum)); err == nil {
			continue
		}
		if err := t.Put(kv.ChargedKey(dst, sum), nil); err != nil {
			return 0, err
		}
		size += p.Size
	}
	return size, nil
}
