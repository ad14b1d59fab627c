// Package kv is the store's records in Badger: the key layout (every key
// builder), typed access to a transaction (Tx: JSON records, raw values,
// scans, the index changes to apply once it commits, what the operations
// sharing one transaction must see of each other), and the task record as
// a header and one record per step (Tx.Step, Tx.SaveTask, Tx.Fill), with
// the caches that spare decoding it (DB).
package kv

import (
	"fmt"
	"strconv"

	"github.com/lhengine/lhengine/ledger"
)

// Key layout. Every key starts with a one-letter table name and, for the
// records of a task, the task id, so one task's records are one prefix scan
// away and tasks sort by creation. Numbers are fixed-width hex so that byte
// order is numeric order.
//
//	t/<task>                                 Task header (all but its steps)
//	s/<task>/<step>                          StepState of one step of the task
//	m/<task>                                 Manifest (written once)
//	u/<task>/<step>/<item>                   Unit
//	a/<task>                                 runnable (queued or running) tasks
//	o/<task>/<step>/<item>/<attempt>         Attempt (output, failure, log)
//	e/<task>/<seq>                           Event
//	k/<idempotency key>     -> task id       submit dedupe
//	r/<task>/<seq>                           Approval
//	f/<task>/values                          Facts (the environment facts last read)
//	x/<task>/<event seq>                     Notification waiting to be delivered (the outbox)
//	j/<task>/notify/<event seq>              Effect: a notification's delivery journal entry
//	h/sync                                   the number of the store's latest disk sync
//
// Host capabilities keep their durable records here too: artifacts (content-
// addressed, with provenance), the effect journal, the model journal, and
// each unit's own key/value cursor. Progress counts and notes ride in the
// unit's commit (Result.Counts, Result.Notes) so a retried unit never counts
// twice.
//
//	B/<sha256>                               blob (artifact, module, recording, replay set's index): size and chunk count (written last: the blob's commit point)
//	b/<sha256>/<chunk>                       blob bytes, in chunks of ArtifactChunk
//	p/<task>/<step>/<item>/<sha256>/<name>   provenance of an artifact put by a unit
//	j/<task>/<step>/<item>/<key>             effect journal entry
//	g/<task>/<step>/<item>/<sha256>/<key>    model journal entry
//	v/<task>/<step>/<item>/<key>             unit key/value
//	n/<task>/<seq>                           progress note
//	q/<task>/usage                           storage usage
//	q/<task>/blob/<sha256>                   a blob counted in the task's usage
//	q/<task>/output_limit                    the task's output quota, when not the default

// TaskKey is the key of a task's header.
func TaskKey(id string) []byte { return []byte("t/" + id) }

// StepKey is the key of one step's state.
func StepKey(id string, step int) []byte { return fmt.Appendf(nil, "s/%s/%04x", id, step) }

// StepPrefix is the prefix of a task's step records.
func StepPrefix(id string) []byte { return []byte("s/" + id + "/") }

// ManifestKey is the key of a task's manifest.
func ManifestKey(id string) []byte { return []byte("m/" + id) }

// UnitKey is the key of a unit.
func UnitKey(id string, step, item int) []byte {
	return fmt.Appendf(nil, "u/%s/%04x/%08x", id, step, item)
}

// UnitStepPrefix is the prefix of a step's units.
func UnitStepPrefix(id string, step int) []byte { return fmt.Appendf(nil, "u/%s/%04x/", id, step) }

// ActiveKey marks a task runnable.
func ActiveKey(id string) []byte { return []byte("a/" + id) }

// AttemptKey is the key of one attempt of a unit.
func AttemptKey(id string, step, item, attempt int) []byte {
	return fmt.Appendf(nil, "o/%s/%04x/%08x/%08x", id, step, item, attempt)
}

// AttemptPrefix is the prefix of a step's attempts.
func AttemptPrefix(id string, step int) []byte { return fmt.Appendf(nil, "o/%s/%04x/", id, step) }

// EventKey is the key of a task's event seq.
func EventKey(id string, seq uint64) []byte { return fmt.Appendf(nil, "e/%s/%016x", id, seq) }

// IdemKey maps an idempotency key to its task.
func IdemKey(k string) []byte { return []byte("k/" + k) }

// ApprovalKey is the key of a task's approval n.
func ApprovalKey(task string, n uint64) []byte { return fmt.Appendf(nil, "r/%s/%016x", task, n) }

// ApprovalSeq parses an approval id ("3") into its sequence number, the n
// of its ApprovalKey.
func ApprovalSeq(id string) (uint64, error) {
	n, err := strconv.ParseUint(id, 10, 64)
	if err != nil || n == 0 {
		return 0, fmt.Errorf("%w: approval %q (approval ids are numbers, as lhengine approvals lists them)", ledger.ErrNotFound, id)
	}
	return n, nil
}

// FactsKey is the key of a task's facts.
func FactsKey(task string) []byte { return []byte("f/" + task + "/values") }

// QuotaKey is the key of a task's storage usage.
func QuotaKey(task string) []byte { return []byte("q/" + task + "/usage") }

// ChargedKey marks blob sum counted in the task's usage.
func ChargedKey(task, sum string) []byte { return []byte("q/" + task + "/blob/" + sum) }

// OutputLimitKey is the key of a task's output quota.
func OutputLimitKey(task string) []byte { return []byte("q/" + task + "/output_limit") }

// OutboxKey is the key of the notification of a task's event seq.
func OutboxKey(task string, seq uint64) []byte { return fmt.Appendf(nil, "x/%s/%016x", task, seq) }

// NotifyEffectKey is the key of the journal entry of the delivery of the
// notification of a task's event seq.
func NotifyEffectKey(task string, seq uint64) []byte {
	return fmt.Appendf(nil, "j/%s/%s/%016x", task, ledger.NotifyStep, seq)
}

// ModelCallKey is the key of a unit's model call key with the request whose
// sha256 is sum.
func ModelCallKey(task string, step, item int, sum, key string) []byte {
	return fmt.Appendf(nil, "g/%s/%04x/%08x/%s/%s", task, step, item, sum, key)
}

// BlobKey is the key of a blob's record.
func BlobKey(sum string) []byte { return []byte("B/" + sum) }

// ChunkKey is the key of chunk n of a blob.
func ChunkKey(sum string, n int) []byte { return fmt.Appendf(nil, "b/%s/%08x", sum, n) }

// ProvKey is the key of the provenance of an artifact a unit put.
func ProvKey(task, step string, item int, sum, name string) []byte {
	return fmt.Appendf(nil, "p/%s/%s/%08x/%s/%s", task, step, item, sum, name)
}

// EffectKey is the key of a unit's effect journal entry key.
func EffectKey(task string, step, item int, key string) []byte {
	return fmt.Appendf(nil, "j/%s/%04x/%08x/%s", task, step, item, key)
}

// UnitKVKey is the key of a unit's own key/value entry key.
func UnitKVKey(task string, step, item int, key string) []byte {
	return fmt.Appendf(nil, "v/%s/%04x/%08x/%s", task, step, item, key)
}

// NoteKey is the key of a task's note seq.
func NoteKey(task string, seq uint64) []byte { return fmt.Appendf(nil, "n/%s/%016x", task, seq) }
