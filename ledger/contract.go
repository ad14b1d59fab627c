package ledger

import (
	"context"
	"encoding/json"
	"time"
)

// Store is the contract a ledger implementation keeps: what the engine
// relies on of its store, and nothing of how the store keeps it. The
// embedded store (../store, Badger) is one implementation; the conformance
// suite (ledgertest) is every behaviour the engine relies on, which every
// implementation must pass.
//
// It is meant for an embedded key-value store and a networked SQL one
// alike: a commit hands back the worker's next units in the same
// transaction (CommitAndClaim), returns before its durability is known when
// asked (Durability), and the store says when something changed (Changed)
// instead of being polled.
type Store interface {
	Work
	Controls
	Capabilities
	Models
	Notifications
	Retention
	Workspaces
}

// Work is the lease protocol and the reads: submit a task, claim units
// under a lease with a fencing epoch, renew, give back or commit them.
type Work interface {
	// Changed returns a channel that is closed when the next transaction
	// commits (for a durable change, once it is synced). Take it before reading,
	// then wait on it, to miss nothing: an event log follower reads the events
	// after the last one it saw each time it is woken.
	Changed() <-chan struct{}
	// Claim leases up to req.Max ready units, oldest task first, respecting each
	// step's concurrency limit. Leases that expired, or that belong to an earlier
	// session of this store (a process that is gone, since Badger allows one
	// process per directory), are taken back first; each new lease takes the
	// task's next fencing epoch.
	Claim(ctx context.Context, req ClaimRequest) (Claimed, error)
	// Close closes the database and brings the high-water mark up to the last
	// sync. Operations in flight must have returned.
	Close() error
	// Commit records the outcome of an attempt, its output or failure, the unit's
	// new state, the task's advance and the events, in one transaction. A lease
	// that is no longer current gets ErrLeaseLost and changes nothing.
	Commit(ctx context.Context, r Result) (*Task, error)
	// CommitAndClaim is Commit followed, in the same transaction, by Claim(next)
	// when next.Max > 0: a worker finishing one unit takes its next without a
	// transaction (and a disk sync) of its own. If the commit is refused, nothing
	// is claimed. It returns as soon as the transaction committed, while its
	// sync may still be under way: a worker
	// starts its next unit beside the sync. What it committed is visible to
	// every reader of the store at once; the Durability says when it is on
	// disk. Before anything outside the process acts on the commit (a task
	// reported finished, a request sent that its output shaped), the caller
	// waits for the Durability, or for a later operation's sync, which covers
	// it. A failed sync fails the store, as for every commit.
	CommitAndClaim(ctx context.Context, r Result, next ClaimRequest) (*Task, Claimed, Durability, error)
	// Heartbeat extends a lease by extend from now. Only the current owner, with
	// the current epoch, may extend it; anyone else gets ErrLeaseLost.
	Heartbeat(ctx context.Context, l Lease, extend time.Duration) (time.Time, error)
	// Owner returns the lease owner name for a worker of this store session.
	Owner(worker string) string
	// Pending reports whether any task is queued or running, that is whether a
	// worker may still find work (now, after a backoff, or after a lease expires).
	Pending() bool
	// Read runs fn with a Reader over a consistent snapshot.
	Read(fn func(r Reader) error) error
	// ReadSynced is Read for an answer that leaves the process (the
	// control-plane API, the dashboard): once fn has read its snapshot, it
	// waits until every commit that snapshot can show is on disk, syncing if
	// none is under way. A store that does not sync answers at once. The
	// error is fn's, or the store's failure if the sync failed (what fn saw
	// may then be lost).
	ReadSynced(fn func(r Reader) error) error
	// Release gives back the unit of a lease whose attempt a stopping worker
	// cut short, without charging the attempt: the unit is ready again, its
	// attempt count and the task's go back to what they were before the
	// claim (the next claim runs the same attempt number, with the same random
	// seed), and a "released" event records it. What the attempt did through
	// the host stays (its effects are journaled by their keys). A lease that is
	// no longer current gets ErrLeaseLost and changes nothing.
	Release(ctx context.Context, l Lease) error
	// Session identifies this opening of the store. Lease owners are prefixed with
	// it, so leases left by an earlier process are recognised as dead.
	Session() string
	// Submit creates a queued task and plans its first step, after storing the
	// modules and the replay set it brings (NewTask.Modules, NewTask.Replay).
	// It returns the task and whether it was created (false: the idempotency
	// key named an existing one).
	Submit(ctx context.Context, nt NewTask) (*Task, bool, error)
	// SyncStats reports how many disk syncs the store performed and how many
	// operations waited for one: their ratio is how well commits are grouped.
	SyncStats() (syncs, ops int64)
	// Task returns one task record.
	Task(_ context.Context, id string) (*Task, error)
}

// Controls change a task from outside its units, or from a unit about its task: cancel, retry, pause and resume, budgets, drift, approvals.
type Controls interface {
	// Cancel cancels a task that has not finished. Attempts in flight lose their
	// leases: their commits are refused.
	Cancel(ctx context.Context, id, reason string) (*Task, error)
	// CheckFacts compares values, the task's facts read by the holder of lease
	// l just before running it, with the recorded ones. When none changed it
	// returns no changes, and the unit runs. Otherwise, in one transaction, it
	// records the new values, an EvDrift event for each changed fact (its
	// name, old and new value, the action) and the last change in Task.Drift,
	// then applies on:
	//
	//   - continue: nothing more; run reports true and the unit runs under the
	//     new values.
	//   - pause: the lease is given back without charging its attempt, and the
	//     task pauses with a reason of kind PauseDrift naming the fact;
	//     Resume continues it (and the facts, read again before the next
	//     unit, are compared with the values recorded now).
	//   - restart: when step RestartFrom has been entered, the lease is given
	//     back uncharged and the task goes back to that step, as a repair
	//     does (every step from it on runs again in a new pass; what came
	//     before is kept). When the task has not reached it yet, nothing
	//     needs running again and the unit runs.
	//
	// Concurrent checks of one task with the same new values record the
	// drift once: the first one's transaction changes the record, the others
	// find it equal. A unit whose task was paused after it was leased (by
	// another unit's drift, say) does not start either: its lease is given
	// back uncharged and run is false. Values equal to the record are told by a read alone, and
	// the lease is then checked by the unit's commit.
	CheckFacts(ctx context.Context, l Lease, values map[string]string, on OnDrift) (changes []FactChange, run bool, task *Task, err error)
	// CloseApproval ends approval id of the unit of lease l without a
	// person's decision: expired (its expiry passed while pending) or voided
	// (its subject changed: why says how). The unit stays leased for the
	// caller to commit, ask again or give back. A voided approval's event
	// names why.
	CloseApproval(ctx context.Context, l Lease, id string, state ApprovalState, why string) (*Approval, error)
	// DecideApproval records a person's decision on approval id of task:
	// approved, or rejected, by whom, with a note. Only a pending approval
	// that has not expired takes a decision (else ErrApprovalClosed); a
	// finished task's approvals take none (ErrTerminal). The unit waiting for
	// it becomes ready: its next attempt runs on an approval, and fails (or
	// goes to its step's repair) on a rejection.
	DecideApproval(ctx context.Context, task, id string, approve bool, by, note string) (*Approval, *Task, error)
	// Pause gives up the lease l without consuming its attempt and pauses the
	// task with reason: nothing of it runs until it is resumed (or an effect it
	// waits on is resolved).
	Pause(ctx context.Context, l Lease, reason string) (*Task, error)
	// PauseTask pauses the task id for why, without a lease: it stops claiming
	// new units of the task at once. Units in flight keep their leases and may
	// still commit or be given back (Release); a paused task whose last unit
	// commits still advances (and may succeed). A task already paused keeps its
	// first reason and is returned unchanged. why.At defaults to now. A
	// finished task gets an error matching ErrTerminal; an unknown id
	// ErrNotFound.
	PauseTask(ctx context.Context, id string, why PauseReason) (*Task, error)
	// PauseUnit is Pause with the structured reason why (a PauseEffect's Name
	// is set to the unit's step; At defaults to now).
	PauseUnit(ctx context.Context, l Lease, why PauseReason) (*Task, error)
	// RaiseBudgets raises budgets of the task id, each recorded as an event
	// with by and the old and new limit. A raise to a value below the usage
	// is refused (it would pause the task again at once); a raise lower than
	// the limit lowers it. The task's status does not change: Resume
	// continues a paused task.
	RaiseBudgets(ctx context.Context, id string, raises []BudgetRaise, by string) (*Task, error)
	// RequestApproval makes the unit of lease l wait for a person's decision:
	// it records a (the store sets its id, task, unit, state and created time),
	// gives the unit back without charging the attempt, and takes it out of
	// the claim queue until the approval is decided or, if it has an expiry,
	// until then. The task shows WaitingApproval when nothing else of it can
	// run. It returns the task and the approval as recorded.
	RequestApproval(ctx context.Context, l Lease, a Approval) (*Task, *Approval, error)
	// Resume makes a paused task runnable again.
	Resume(ctx context.Context, id string) (*Task, error)
	// ResumeAs is Resume by a person (by: who, where: from which host and
	// process), recorded in a "resumed" event; a task that is not paused (one
	// whose process died, continued by `lhengine resume`) gets the event too,
	// when by is set, and is otherwise unchanged.
	ResumeAs(ctx context.Context, id, by, where string) (*Task, error)
	// Retry re-opens a failed or cancelled task, or a task with failed items
	// (FailedItems). With from < 0 it goes on at the step it stopped at, or at
	// the first step with failed items when that is earlier (the steps after it
	// are entered again, as with from): every unit committed is kept, and only
	// the units that did not commit run (a failed unit, a failed item, one whose
	// lease the stop ended, one not yet run or planned). With from >= 0, which
	// must not be after the step it stopped at, every output committed before
	// step from is kept, and that
	// step and the ones after it are entered again: their pass rises (earlier
	// attempts stay on record) and what their earlier pass counted leaves the
	// task's counters. Either way every unit gets its step's whole retry budget
	// again (Unit.Base), notes and the totals of attempts, failures and
	// repairs are kept, and consecutive failures start again from zero. by says
	// who retried, for the event log.
	Retry(ctx context.Context, id string, from int, by string) (*Task, error)
	// UseApproval records that the attempt of lease l runs on approval id
	// (Approval.UsedBy), once: the first attempt to run on it.
	UseApproval(ctx context.Context, l Lease, id string) error
	// WaitEffect makes the unit of lease l wait for a person to settle its
	// effect key, whose outcome is unknown (mode manual): the attempt is given
	// back uncharged, the unit leaves the claim queue until ResolveEffect
	// settles the effect, and the task's other units run on. reason says so,
	// with the commands that settle it. When nothing else of the task can
	// run, the task pauses (PauseEffect) with that reason.
	WaitEffect(ctx context.Context, l Lease, key, reason string) (*Task, error)
}

// Capabilities are the records behind a plugin's host calls: artifacts with provenance, the effect journal, KV entries and notes.
type Capabilities interface {
	// CompactNotes replaces the notes replaces of the task of lease l with one
	// summary note (kind summary, text summary, Replaces the list), in one
	// transaction: each replaced note records the summary's seq and stays on
	// record. A protected note gets ErrProtected, a note already replaced or
	// unknown ErrNotFound; either changes nothing. It returns the summary's
	// seq.
	CompactNotes(ctx context.Context, l Lease, replaces []uint64, summary string) (uint64, error)
	// Effect reads one journal entry.
	Effect(task string, step, item int, key string) (*Effect, error)
	// KVGet reads a unit's own key/value entry.
	KVGet(task string, step, item int, key string) (json.RawMessage, bool, error)
	// KVPut writes a unit's own key/value entry, durably, if the lease is
	// still the unit's current one: a zombie cannot move the cursor of the worker
	// that took over. The entry's key and value count against the task's kv
	// quota of limit bytes (kv_bytes; an overwrite counts the difference); an
	// entry that does not fit is refused with a *QuotaError and nothing is
	// written.
	KVPut(ctx context.Context, l Lease, key string, value json.RawMessage, limit int64) error
	// OwnsArtifact reports whether task has stored the artifact ref: a unit of
	// it put that content (a provenance record of the task names it). Plugins
	// read only their own task's artifacts.
	OwnsArtifact(task, ref string) (bool, error)
	// PutArtifact stores data (deduplicated by its sha256) and records its
	// provenance; it returns the ref "sha256:<hex>". The same unit putting the
	// same content under the same name again (a retry) updates one provenance
	// record instead of adding another.
	//
	// Each distinct content counts once against the task's artifact quota of
	// limit bytes (artifact_bytes); content that does not fit is refused with a
	// *QuotaError before anything is written.
	PutArtifact(ctx context.Context, p Provenance, data []byte, limit int64) (string, error)
	// ReadArtifact copies up to len(buf) bytes of the artifact ref, starting at
	// offset, into buf; it returns the number copied (0 at the end) and the
	// artifact's size. ErrNotFound for an unknown ref.
	ReadArtifact(ref string, offset int64, buf []byte) (int, int64, error)
	// RecordEffect writes a journal entry durably, under the unit's lease (so a
	// zombie cannot record an intent or outcome in the journal of a unit someone
	// else now owns).
	RecordEffect(ctx context.Context, l Lease, e *Effect) error
	// ResolveEffect settles an effect whose outcome is unknown, as a human
	// decided: confirmed (it was applied: the outcome ConfirmedOutcome(kind,
	// request, "confirmed") is recorded and it is never performed again) or retry
	// (the intent stays, marked ResendRetry: the next attempt performs it again
	// under the same idempotency key). A task paused for it becomes runnable
	// again.
	ResolveEffect(ctx context.Context, task string, step, item int, key string, confirmed bool, note string) (*Effect, error)
}

// Models is the model journal, replay sets and plugin modules.
type Models interface {
	// EndModelCall closes call c's send: it counts unknown of its sends as
	// possibly billed (their connection failed after the request may have
	// reached the provider) and drops c's intent if no response was recorded
	// (the call ended without one, its outcome seen: refused, say). An entry
	// holding a response is left as it is.
	EndModelCall(ctx context.Context, l Lease, c *ModelCall, unknown int) error
	// ModelCall reads the recorded response of a unit's call key made with the
	// request whose normalised sha256 is sum. ErrNotFound when there is none
	// (an intent is not a response).
	ModelCall(task string, step, item int, key, sum string) (*ModelCall, error)
	// ModelCallReplayed records an EvModelCall event for a call answered from
	// the journal: nothing is charged.
	ModelCallReplayed(ctx context.Context, l Lease, c *ModelCall) error
	// Module returns the bytes of the plugin module pinned with sha256 sum
	// (lower-case hex), verified against it. It returns an error wrapping
	// ErrNotFound when the store does not hold the module: tasks submitted by
	// engines that did not keep module bytes pin only a path.
	Module(sum string) ([]byte, error)
	// RecordModelCall writes a call's journal entry durably, under the unit's
	// lease (a zombie records nothing), in place of its intent, adds its tokens
	// and cost to the task's ModelUsage and records an EvModelCall event, all
	// in one transaction. If the response is recorded already (the same call
	// recorded meanwhile), nothing is written or charged and the recorded entry
	// is returned with recorded false.
	RecordModelCall(ctx context.Context, l Lease, c *ModelCall) (out *ModelCall, recorded bool, err error)
	// ReplayIndex reads the index of the replay set with sha256 set. It
	// returns an error wrapping ErrNotFound when the store does not hold it.
	ReplayIndex(set string) (ReplayIndex, error)
	// ReplayRecording returns the recording file whose sha256 is file (an
	// entry of a ReplayIndex), verified against it.
	ReplayRecording(file string) ([]byte, error)
	// StartModelCall records durably, under the unit's lease, the intent c
	// (State ModelSending) of a call about to be sent. An intent found at its
	// key, left by a send whose outcome no one saw, is first counted as
	// possibly billed (the task's ModelUsage and an EvModelCall event), in the
	// same transaction. When the call's response is recorded already (recorded
	// meanwhile), nothing is written and that entry is returned: answer from
	// it; otherwise the result is nil and the caller sends.
	StartModelCall(ctx context.Context, l Lease, c *ModelCall) (recorded *ModelCall, err error)
}

// Notifications is the outbox of a task's notify block.
type Notifications interface {
	// NotificationsChanged returns a channel closed when an outbox entry is
	// next written: take it before PendingNotifications, then wait on it, to
	// miss none.
	NotificationsChanged() <-chan struct{}
	// NotifyIntent journals, durably, that n is about to be sent, and returns
	// the journal entry: a new intent, or the one a delivery before left (a
	// crash between the intent and the outcome, or an answer that left it
	// open), which is sent again under the same Idempotency-Key. The entry is
	// an http effect of step NotifyStep (Step -1, Item the event's seq, Key the
	// event type), so that the task's journal lists it. A notification no
	// longer in the outbox is ErrNotFound: it must not be sent.
	NotifyIntent(ctx context.Context, n *Notification) (*Effect, error)
	// NotifyOutcome records the receiver's final answer to n (outcome, in the
	// http effect result shape, and a note) in its journal entry and deletes n
	// from the outbox, in one transaction: it is never sent again. A
	// notification no longer in the outbox is ErrNotFound.
	NotifyOutcome(ctx context.Context, n *Notification, outcome json.RawMessage, note string) error
	// NotifyRetry records a delivery of n that left it open (why: a transport
	// error, or an answer 5xx, 408 or 429; answered: whether the receiver
	// answered at all): the outbox entry counts the attempt, the journal entry
	// stays an intent, marked to be sent again (ResendRetryable) when the
	// receiver answered. It returns the entry as updated.
	NotifyRetry(ctx context.Context, n *Notification, answered bool, why string) (*Notification, error)
	// PendingNotifications returns the first outbox entry of each task that
	// has one, oldest task first, skipping the tasks skip reports true for (nil
	// skips none), at most max (0: no limit). The first entry of a task is
	// delivered before its next, so a task's notifications arrive in the order
	// of its events. It returns only entries already on disk (as ReadSynced
	// does): a crash cannot take back an event that was notified.
	PendingNotifications(max int, skip func(task string) bool) ([]Notification, error)
}

// Retention removes tasks and gives their space back.
type Retention interface {
	// GC deletes the blobs (artifacts and modules) that no provenance record and
	// no manifest refers to, the chunks left by puts that never finished, and
	// then runs Badger's value-log GC until it has nothing left to rewrite.
	//
	// It is safe while workers of the same store run: blob writers hold blobMu
	// shared from their existence check until their referring record is
	// committed, and GC holds it exclusively while it decides and deletes, so
	// every chunk without a blob record that GC sees was left by a put that is
	// over. Puts wait while GC deletes.
	GC(ctx context.Context) (GCStats, error)
	// MinFreeBytes is the store's free-space floor (Options.MinFreeBytes): 0
	// when it enforces none (in memory, or the check disabled).
	MinFreeBytes() int64
	// ReclaimSpace compacts the store and rewrites the value-log files whose
	// values were mostly deleted, until Badger finds none left; it returns how
	// many files it rewrote.
	//
	// Badger counts a deleted value only when a compaction drops the record
	// that pointed to it, and records deleted since the store was opened are
	// still in the in-memory table, which is written out when full or at
	// Close. So the space of the values GC itself deletes comes back at the
	// next ReclaimSpace after the store was reopened: lhengine gc does that.
	ReclaimSpace(ctx context.Context) (files int, err error)
	// Remove deletes a finished task and every record of it: units, attempts,
	// events, notes, effect journal, key/value entries, artifact provenance,
	// quota keys, its idempotency key, manifest and task record (with its step
	// records). The artifacts
	// and modules it referred to stay until GC finds nothing else refers to them.
	//
	// Deletion runs in transactions of at most 1,000 keys, the task record last:
	// a Remove cut short (a crash, ctx) leaves a finished task with fewer records,
	// which a later Remove finishes. It returns an error wrapping ErrNotFound for
	// an unknown task and a *NotFinishedError for one that is not finished.
	Remove(ctx context.Context, id string) error
}

// Durability says when a commit that returned early is on disk.
type Durability interface {
	// Done is closed once the commit is on disk, or its sync failed.
	Done() <-chan struct{}
	// Wait waits until the commit is on disk: nil, or the sync's error (the
	// store then refuses every later write), or ctx's.
	Wait(ctx context.Context) error
}

// Planner produces the items of a fan-out step once the task's cursor has
// reached it. It runs after the transaction that completed the previous step
// committed, in a read-only view (r sees that step's outputs), outside the
// commit leader, and may take as long as it needs: it should stop when ctx
// is done. It must be deterministic: after a crash the step is planned again
// and must give the same list. An error fails the task; a *fault.StepError
// keeps its kind, any other error is recorded as kind input.
type Planner func(ctx context.Context, r Reader, t *Task, step int) ([]Item, error)

// TaskQuery asks Reader.TaskList for a page of tasks.
type TaskQuery struct {
	Newest bool // newest first; else oldest first
	Limit  int  // at most this many (0: all)
	// Match, if set, keeps the tasks it returns true for. It is given the
	// task's header: every field but Steps (StepCount still says how many).
	Match func(*Task) bool
}

// Reader reads records inside one consistent view: a Planner's, or the one
// a store opens for Read and ReadSynced. It is valid only during the call
// it is given to.
type Reader interface {
	// Approval returns approval id of task; ErrNotFound when there is none.
	Approval(task, id string) (*Approval, error)
	// Approvals lists a task's approvals in the order they were asked for.
	Approvals(id string) ([]Approval, error)
	// Artifacts lists the provenance records of a task's artifacts.
	Artifacts(id string) ([]Provenance, error)
	// Attempt returns the record of one attempt.
	Attempt(id string, step, item, attempt int) (*Attempt, error)
	// Attempts returns every recorded attempt of a step, by item then attempt.
	Attempts(id string, step int) ([]*Attempt, error)
	// AttemptsPage returns the first limit recorded attempts of step (limit
	// < 0: all), by item then attempt, of one item (item >= 0) or of every
	// item (item < 0), and how many there are in all. Only the attempts
	// returned are decoded; the rest are counted by key.
	AttemptsPage(id string, step, item, limit int) ([]*Attempt, int, error)
	// CommittedItem returns the output of item of step as its unit committed
	// it in the step's current pass (the unit's committed attempt). A unit
	// that has not committed in the current pass, or an item the step does not
	// have, is ErrNotFound.
	CommittedItem(task *Task, step, item int) (*ItemOutput, error)
	// CommittedOutputs returns the outputs of the first limit units of step
	// that committed in the step's current pass, in item order, and how many
	// units of the pass committed in all (the step's Done): what a fan-out
	// still running has produced so far.
	CommittedOutputs(task *Task, step, limit int) ([]ItemOutput, int, error)
	// EachEvent calls fn with each event of a task with Seq >= from, in order,
	// until fn returns false.
	EachEvent(id string, from uint64, fn func(*Event) bool) error
	// Effects lists a task's journal entries.
	Effects(id string) ([]Effect, error)
	// Events returns up to limit events of a task with Seq >= from (limit <= 0: all).
	Events(id string, from uint64, limit int) ([]Event, error)
	// Facts returns the facts recorded for task id; nil when it has none (a
	// task without an environment block).
	Facts(id string) (*Facts, error)
	// FailedItems returns the failed items of the current pass of every fan-out
	// step of a task, in step and item order.
	FailedItems(id string) ([]FailedItem, error)
	// FindTask resolves a task id or a unique prefix of one (at least 6 characters).
	FindTask(ref string) (*Task, error)
	// Manifest returns the task's pinned run manifest.
	Manifest(id string) (*Manifest, error)
	// ModelCalls lists a task's model journal entries, by step, item and
	// request hash: the recorded responses and the intents of calls being sent
	// (State ModelSending).
	ModelCalls(id string) ([]ModelCall, error)
	// Notes returns a task's progress notes, oldest first.
	Notes(id string) ([]Note, error)
	// NotesPage returns the notes of task id that q selects, oldest first,
	// from seq q.From on, and the seq to ask for the next page from (0 when no
	// note is left to look at). It looks at no more than 10,000 notes, so a
	// page may hold fewer than q.Limit notes and still have a next one.
	NotesPage(id string, q NoteQuery) ([]Note, uint64, error)
	// Notifications lists a task's outbox entries, in event order.
	Notifications(id string) ([]Notification, error)
	// OpenNotes returns up to limit of a task's notes that a summary may
	// replace (not protected, not replaced yet), oldest first, after seq after
	// (-1 for from the start).
	OpenNotes(id string, after int64, limit int) ([]Note, error)
	// RecentApprovals returns the newest approvals of task, up to max, newest
	// first, by point reads as RecentNotes.
	RecentApprovals(task *Task, max int) ([]Approval, error)
	// RecentNotes returns the newest notes of task, up to max, newest first,
	// walking the notes back from the newest, never the older ones; enough,
	// when not nil, ends the walk early once it says the notes read so far
	// are enough.
	RecentNotes(task *Task, max int, enough func([]Note) bool) ([]Note, error)
	// StepOutput returns the current output of a completed step: the output of
	// its unit, or for a fan-out step the JSON array of its items' outputs in item
	// order. It returns ErrNotFound if the step has not completed in its current pass.
	StepOutput(id string, step int) (json.RawMessage, error)
	// StepOutputLimited is StepOutputOf that gives up with ErrTooLarge as soon
	// as the output would exceed max bytes (max < 0: no limit), before holding
	// more than that in memory.
	StepOutputLimited(task *Task, step int, max int64) (json.RawMessage, error)
	// StepOutputOf is StepOutput for a task record the caller already holds (a
	// Planner must use the record it was given: it is newer than the stored one).
	// Only the state of that step is read from the task (a lease's Snapshot
	// holds the steps before the leased one).
	StepOutputOf(task *Task, step int) (json.RawMessage, error)
	// Task returns the task record, every step's state included.
	Task(id string) (*Task, error)
	// TaskVersions returns the version of every task, oldest first, reading
	// keys only: what a reader that keeps tasks it has read needs to know which
	// to read again (the task list stream of the API).
	TaskVersions() ([]TaskVersion, error)
	// Tasks returns all tasks, oldest first.
	Tasks() ([]*Task, error)
	// TaskList returns a page of tasks in submission order (q.Newest:
	// newest first) and how many match in all. A task's header is read to
	// match it; only the tasks returned are read whole. Without q.Match the
	// total is counted by key: the cost is the page's, not the store's.
	TaskList(q TaskQuery) ([]*Task, int, error)
	// Units returns the units of a step in item order, including stale units of
	// earlier passes that have no counterpart in the current one.
	Units(id string, step int) ([]*Unit, error)
	// UnitsUpTo returns the first limit units of a step, in item order: a page
	// of a large fan-out without decoding the rest (Units reads them all).
	UnitsUpTo(id string, step, limit int) ([]*Unit, error)
	// Usage returns what task id keeps in the store.
	Usage(id string) (Usage, error)
	// WindowOutputs returns, as a JSON list in the order given, the committed
	// outputs of the items of step (the anchor of a window step) in its current
	// pass: what a window unit reads as its anchor's output. It gives up with
	// ErrTooLarge past max bytes (max < 0: no limit).
	WindowOutputs(task *Task, step int, items []int, max int64) (json.RawMessage, error)
}
