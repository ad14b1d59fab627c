package store

import (
	"bytes"
	"errors"
	"strings"
	"sync"
	"time"

	"github.com/lhengine/lhengine/fault"
	"github.com/lhengine/lhengine/ledger"
	"github.com/lhengine/lhengine/store/internal/kv"
)

// Storage quotas. What a task's plugins make the store keep is counted per
// task, in a record of its own that every write it limits updates in the
// same transaction (never in the task record, which every commit rewrites):
//
//	q/<task>/usage            Usage: bytes of key/value entries, artifacts and outputs
//	q/<task>/blob/<sha256>    an artifact blob counted in the task's usage (once per task)
//	q/<task>/output_limit     the task's output_bytes quota, when not the default
//
// A write that would take the usage past its limit is refused with a
// *QuotaError and changes nothing.

// usage reads a task's usage; zero when nothing was counted yet.
func usage(t *kv.Tx, task string) (ledger.Usage, error) {
	var u ledger.Usage
	err := t.GetJSON(kv.QuotaKey(task), &u)
	if errors.Is(err, ledger.ErrNotFound) {
		err = nil
	}
	return u, err
}

// charge adds n bytes to the counter *used of a task's usage u, or refuses
// with a *QuotaError when that passes limit. The caller saves u.
func charge(what string, used *int64, n, limit int64) error {
	if n > 0 && *used+n > limit {
		return &ledger.QuotaError{What: what, Used: *used, Add: n, Limit: limit}
	}
	*used += n
	if *used < 0 {
		*used = 0
	}
	return nil
}

// Usage returns what task id keeps in the store.
func (r *reader) Usage(id string) (ledger.Usage, error) { return usage(r.t, id) }

// OwnsArtifact reports whether task has stored the artifact ref: a unit of
// it put that content (a provenance record of the task names it). Plugins
// read only their own task's artifacts.
func (s *Store) OwnsArtifact(task, ref string) (bool, error) {
	hexSum, ok := strings.CutPrefix(ref, "sha256:")
	if !ok || len(hexSum) != 64 {
		return false, nil
	}
	owned := false
	err := s.view(func(t *kv.Tx) error {
		_, err := t.GetRaw(kv.ChargedKey(task, hexSum))
		if err == nil {
			owned = true
			return nil
		}
		if !errors.Is(err, ledger.ErrNotFound) {
			return err
		}
		// Artifacts stored before usage was counted have provenance only.
		mid := []byte("/" + hexSum + "/")
		return t.Scan([]byte("p/"+task+"/"), func(key, _ []byte) (bool, error) {
			owned = bytes.Contains(key, mid)
			return !owned, nil
		})
	})
	return owned, err
}

// kvSize is what a key/value entry counts against the kv quota.
func kvSize(key string, value []byte) int64 { return int64(len(key) + len(value)) }

// inflightArtifacts counts, per task, the artifact puts that passed their
// quota check and have not been charged yet: their chunks are being written
// outside any transaction, so a check must count them, or puts of one task at
// once would each pass against the same usage and write more than its quota.
type inflightArtifacts struct {
	mu   sync.Mutex
	puts map[string]map[string]*inflightBlob // task -> sha256 -> put in flight
	hook func()                              // tests: called between a put's check and its writes
}

type inflightBlob struct {
	size int64
	refs int // puts of this content by the task in flight
}

// precheckArtifact refuses, before any chunk is written, an artifact of n
// bytes that cannot fit the task's quota, counting the task's other puts in
// flight; PutArtifact checks again in the transaction that counts it. Once it
// passes, the put is in flight until release is called (after the charge).
func (s *Store) precheckArtifact(task, hexSum string, n, limit int64) (release func(), err error) {
	if n > limit {
		return nil, &ledger.QuotaError{What: "artifact_bytes", Add: n, Limit: limit}
	}
	f := &s.inflight
	f.mu.Lock()
	defer f.mu.Unlock()
	counted := false
	err = s.view(func(t *kv.Tx) error {
		if _, err := t.GetRaw(kv.ChargedKey(task, hexSum)); err == nil {
			counted = true
			return nil
		} else if !errors.Is(err, ledger.ErrNotFound) {
			return err
		}
		if f.puts[task][hexSum] != nil {
			return nil // counted in flight
		}
		u, err := usage(t, task)
		if err != nil {
			return err
		}
		used := u.Artifacts
		for _, b := range f.puts[task] {
			used += b.size
		}
		return charge("artifact_bytes", &used, n, limit)
	})
	if err != nil {
		return nil, err
	}
	if counted {
		return func() {}, nil
	}
	if f.puts == nil {
		f.puts = map[string]map[string]*inflightBlob{}
	}
	if f.puts[task] == nil {
		f.puts[task] = map[string]*inflightBlob{}
	}
	b := f.puts[task][hexSum]
	if b == nil {
		b = &inflightBlob{size: n}
		f.puts[task][hexSum] = b
	}
	b.refs++
	return func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		if b.refs--; b.refs == 0 {
			delete(f.puts[task], hexSum)
			if len(f.puts[task]) == 0 {
				delete(f.puts, task)
			}
		}
	}, nil
}

// chargeArtifact counts a blob of n bytes in the task's usage, once.
func chargeArtifact(t *kv.Tx, task, hexSum string, n, limit int64) error {
	if _, err := t.GetRaw(kv.ChargedKey(task, hexSum)); err == nil {
		return nil
	} else if !errors.Is(err, ledger.ErrNotFound) {
		return err
	}
	u, err := usage(t, task)
	if err != nil {
		return err
	}
	if err := charge("artifact_bytes", &u.Artifacts, n, limit); err != nil {
		return err
	}
	if err := t.Put(kv.ChargedKey(task, hexSum), nil); err != nil {
		return err
	}
	return t.PutJSON(kv.QuotaKey(task), u)
}

// chargeOutput counts a successful result's output in its task's usage. An
// output that does not fit the task's output_bytes quota turns the result
// into a failure of kind budget (not retried: the same output would not fit
// again) and is not kept.
func (s *Store) chargeOutput(t *kv.Tx, r *ledger.Result) error {
	if r.Failure != nil || r.Repair != nil {
		return nil
	}
	task := r.Lease.Task
	limit := int64(ledger.DefaultOutputQuota)
	if err := t.GetJSON(kv.OutputLimitKey(task), &limit); err != nil && !errors.Is(err, ledger.ErrNotFound) {
		return err
	}
	u, err := usage(t, task)
	if err != nil {
		return err
	}
	n := int64(len(r.Output))
	if n == 0 {
		n = int64(len("null"))
	}
	var qe *ledger.QuotaError
	if err := charge("output_bytes", &u.Outputs, n, limit); errors.As(err, &qe) {
		r.Failure = &ledger.Failure{Kind: fault.Budget, Message: "step output refused: " + qe.Error()}
		r.Output, r.RetryAt, r.Counts, r.Notes = nil, time.Time{}, nil, nil
		return nil
	}
	return t.PutJSON(kv.QuotaKey(task), u)
}
