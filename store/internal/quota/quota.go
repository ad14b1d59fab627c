// Package quota counts what a task's plugins make the store keep, per task,
// and refuses a write that would take the task past its quota: key/value
// entries (PutKV), artifacts (ChargeArtifact, and Inflight for the puts
// between their check and their charge) and step outputs (ChargeOutput,
// which turns an output that does not fit into a budget failure).
package quota

import (
	"bytes"
	"errors"
	"strings"
	"sync"
	"time"

	"encoding/json"

	"github.com/lhengine/lhengine/fault"
	"github.com/lhengine/lhengine/ledger"
	"github.com/lhengine/lhengine/store/internal/kv"
)

// What a task's plugins make the store keep is counted per task, in a
// record of its own that every write it limits updates in the same
// transaction (never in the task record, which every commit rewrites):
//
//	q/<task>/usage            Usage: bytes of key/value entries, artifacts and outputs
//	q/<task>/blob/<sha256>    an artifact blob counted in the task's usage (once per task)
//	q/<task>/output_limit     the task's output_bytes quota, when not the default
//
// A write that would take the usage past its limit is refused with a
// *QuotaError and changes nothing.

// Usage reads a task's usage; zero when nothing was counted yet.
func Usage(t *kv.Tx, task string) (ledger.Usage, error) {
	var u ledger.Usage
	err := t.GetJSON(kv.QuotaKey(task), &u)
	if errors.Is(err, ledger.ErrNotFound) {
		err = nil
	}
	return u, err
}

// Charge adds n bytes to the counter *used of a task's usage u, or refuses
// with a *QuotaError when that passes limit. The caller saves u.
func Charge(what string, used *int64, n, limit int64) error {
	if n > 0 && *used+n > limit {
		return &ledger.QuotaError{What: what, Used: *used, Add: n, Limit: limit}
	}
	*used += n
	if *used < 0 {
		*used = 0
	}
	return nil
}

// Owns reports whether task has stored the artifact ref: a unit of it put
// that content (a provenance record of the task names it).
func Owns(t *kv.Tx, task, ref string) (owned bool, err error) {
	hexSum, ok := strings.CutPrefix(ref, "sha256:")
	if !ok || len(hexSum) != 64 {
		return false, nil
	}
	_, err = t.GetRaw(kv.ChargedKey(task, hexSum))
	if err == nil {
		return true, nil
	}
	if !errors.Is(err, ledger.ErrNotFound) {
		return false, err
	}
	// Artifacts stored before usage was counted have provenance only.
	mid := []byte("/" + hexSum + "/")
	err = t.Scan([]byte("p/"+task+"/"), func(key, _ []byte) (bool, error) {
		owned = bytes.Contains(key, mid)
		return !owned, nil
	})
	return owned, err
}

// kvSize is what a key/value entry counts against the kv quota.
func kvSize(key string, value []byte) int64 { return int64(len(key) + len(value)) }

// PutKV writes a unit's own key/value entry (its lease checked by the
// caller), durably. The entry's key and value count against the task's kv
// quota of limit bytes (kv_bytes; an overwrite counts the difference); an
// entry that does not fit is refused with a *QuotaError and nothing is
// written.
func PutKV(t *kv.Tx, l ledger.Lease, key string, value json.RawMessage, limit int64) error {
	k := kv.UnitKVKey(l.Task, l.Step, l.Item, key)
	size := kvSize(key, value)
	if size > limit {
		return &ledger.QuotaError{What: "kv_bytes", Add: size, Limit: limit}
	}
	u, err := Usage(t, l.Task)
	if err != nil {
		return err
	}
	delta := size
	if old, err := t.GetRaw(k); err == nil {
		delta -= kvSize(key, old)
	} else if !errors.Is(err, ledger.ErrNotFound) {
		return err
	}
	if err := Charge("kv_bytes", &u.KV, delta, limit); err != nil {
		return err
	}
	t.Durable = true
	if err := t.PutJSON(kv.QuotaKey(l.Task), u); err != nil {
		return err
	}
	return t.Put(k, value)
}

// Inflight counts, per task, the artifact puts that passed their
// quota check and have not been charged yet: their chunks are being written
// outside any transaction, so a check must count them, or puts of one task at
// once would each pass against the same usage and write more than its quota.
type Inflight struct {
	mu   sync.Mutex
	puts map[string]map[string]*inflightBlob // task -> sha256 -> put in flight
	// Hook, when set, is called between a put's check and its writes
	// (tests).
	Hook func()
}

// Tasks is the number of tasks with puts in flight.
func (f *Inflight) Tasks() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.puts)
}

type inflightBlob struct {
	size int64
	refs int // puts of this content by the task in flight
}

// Precheck refuses, before any chunk is written, an artifact of n bytes
// that cannot fit the task's quota, counting the task's other puts in
// flight; ChargeArtifact checks again in the transaction that counts it.
// Once it passes, the put is in flight until release is called (after the
// charge).
func (f *Inflight) Precheck(db *kv.DB, task, hexSum string, n, limit int64) (release func(), err error) {
	if n > limit {
		return nil, &ledger.QuotaError{What: "artifact_bytes", Add: n, Limit: limit}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	counted := false
	err = db.View(func(t *kv.Tx) error {
		if _, err := t.GetRaw(kv.ChargedKey(task, hexSum)); err == nil {
			counted = true
			return nil
		} else if !errors.Is(err, ledger.ErrNotFound) {
			return err
		}
		if f.puts[task][hexSum] != nil {
			return nil // counted in flight
		}
		u, err := Usage(t, task)
		if err != nil {
			return err
		}
		used := u.Artifacts
		for _, b := range f.puts[task] {
			used += b.size
		}
		return Charge("artifact_bytes", &used, n, limit)
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

// ChargeArtifact counts a blob of n bytes in the task's usage, once.
func ChargeArtifact(t *kv.Tx, task, hexSum string, n, limit int64) error {
	if _, err := t.GetRaw(kv.ChargedKey(task, hexSum)); err == nil {
		return nil
	} else if !errors.Is(err, ledger.ErrNotFound) {
		return err
	}
	u, err := Usage(t, task)
	if err != nil {
		return err
	}
	if err := Charge("artifact_bytes", &u.Artifacts, n, limit); err != nil {
		return err
	}
	if err := t.Put(kv.ChargedKey(task, hexSum), nil); err != nil {
		return err
	}
	return t.PutJSON(kv.QuotaKey(task), u)
}

// ChargeOutput counts a successful result's output in its task's usage. An
// output that does not fit the task's output_bytes quota turns the result
// into a failure of kind budget (not retried: the same output would not fit
// again) and is not kept.
func ChargeOutput(t *kv.Tx, r *ledger.Result) error {
	if r.Failure != nil || r.Repair != nil {
		return nil
	}
	task := r.Lease.Task
	limit := int64(ledger.DefaultOutputQuota)
	if err := t.GetJSON(kv.OutputLimitKey(task), &limit); err != nil && !errors.Is(err, ledger.ErrNotFound) {
		return err
	}
	u, err := Usage(t, task)
	if err != nil {
		return err
	}
	n := int64(len(r.Output))
	if n == 0 {
		n = int64(len("null"))
	}
	var qe *ledger.QuotaError
	if err := Charge("output_bytes", &u.Outputs, n, limit); errors.As(err, &qe) {
		r.Failure = &ledger.Failure{Kind: fault.Budget, Message: "step output refused: " + qe.Error()}
		r.Output, r.RetryAt, r.Counts, r.Notes = nil, time.Time{}, nil, nil
		return nil
	}
	return t.PutJSON(kv.QuotaKey(task), u)
}
