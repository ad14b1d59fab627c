package ledger

import (
	"encoding/json"
	"time"
)

// NewTask is what Submit needs to create a task.
type NewTask struct {
	Name     string
	Steps    []StepState // Name, FanOut and Limit of each step, in order
	Manifest Manifest
	// IdempotencyKey makes Submit return the existing task created with the
	// same key instead of creating another.
	IdempotencyKey string
	// OutputQuota is the task's output_bytes quota; nil means
	// DefaultOutputQuota. It is written with the task, so no output is ever
	// committed under another quota.
	OutputQuota *int64
	// Facts are the task's environment facts read at submit (Facts); nil
	// for a task without an environment block.
	Facts map[string]string
	// Budget is the task's budget block's limits (store/budget.go); zero: none.
	Budget BudgetLimits
	// Notify is the task's notify block (store/notify.go); nil for none.
	Notify *NotifySpec
	// Progress is the task's progress block (store/progress.go); nil counts the
	// units of every step.
	Progress *ProgressSpec
	// Modules are the plugin modules the manifest pins, by sha256: each is
	// stored before the task, once however many tasks pin it, so the task
	// runs the same bytes after the files change (store/modules.go). Nil stores
	// none (the task's steps read their modules from elsewhere).
	Modules map[string][]byte
	// Replay is the replay set the task's model calls are answered from
	// (store/replay.go), stored before the task; the manifest must pin it
	// (Manifest.ModelReplay). Nil for none.
	Replay *ReplaySet
}

// ClaimRequest asks for up to Max units.
type ClaimRequest struct {
	Owner    string        // lease owner: Store.Owner(worker name)
	Max      int           // at most this many leases
	LeaseFor time.Duration // lease length
	Task     string        // only units of this task, when set
}

// Claimed is the answer to Claim.
type Claimed struct {
	Leases []Lease
	// Wake is the earliest time at which a unit that is waiting (retry
	// backoff, or a live lease that may expire) could become claimable; zero
	// when nothing is waiting.
	Wake time.Time
	// Reclaimed is how many expired leases the claim took back (each a
	// lease_expired event, and counted in its task's Reclaims), whether or
	// not this claim leased their units again.
	Reclaimed int
}

// Result is the outcome of one attempt, presented with its lease. Exactly one
// of Output (success), Failure or Repair describes it.
type Result struct {
	Lease  Lease
	Output json.RawMessage
	// Failure, when set, failed the attempt. RetryAt is when to try again;
	// zero means no attempt is left and the task fails.
	Failure *Failure
	RetryAt time.Time
	// Repair, when set, sends the task back to an earlier step.
	Repair  *Repair
	Log     []byte
	Started time.Time
	// Counts and Notes are the progress the attempt reported; they are
	// recorded only if the attempt succeeded, with its output.
	Counts map[string]int64
	Notes  []Note
	// HeaderOnly: the caller does not read the steps of the task that
	// CommitAndClaim returns, which then has Steps nil. That saves reading
	// every step's record: the commit itself reads only the steps it changes.
	HeaderOnly bool
	// Environment is the environment facts the attempt ran under
	// (Attempt.Environment).
	Environment map[string]string
	// Workspace, when set, is the snapshot of the task's workspace this
	// commit records (Workspaces): its blobs were put and prepared
	// (PrepareWorkspace) before. The store fills in the unit and sets Seq
	// to the snapshot's number, which the committed task's WorkspaceSeq
	// holds. Recorded only with a success or a repair: a failed attempt
	// checkpoints nothing.
	Workspace *WorkspaceSnapshot
	// Queued, when set, is called (perhaps more than once) when the commit
	// has its place in the store's order of commits: commits of one store
	// land in the order they were queued, so a caller that holds a lock
	// to order its commits (the workspace's, whose snapshots must land in
	// the order they were taken) may release it then rather than after
	// the commit. A commit refused before it is queued never calls it.
	Queued func() `json:"-"`
}

// Repair asks to send the task back to step RestartFrom.
type Repair struct {
	RestartFrom int
	Max         int // repairs allowed over the task's life
	Reason      string
}

// MaxItemBytes bounds one for_each item (its key and value as JSON): every
// unit record carries its item, and is read at every claim and commit.
const MaxItemBytes = 1 << 20
