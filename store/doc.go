// Package store is lhengine's ledger: the durable record of every task, its
// work units, their leases, outputs and events, kept in an embedded Badger
// database.
//
// # Task lifecycle
//
//	     submit
//	       │
//	       ▼
//	   ┌────────┐  first lease   ┌─────────┐
//	   │ queued │ ─────────────▶ │ running │ ◀──────────┐
//	   └────────┘                └─────────┘            │ resume
//	       │                      │  │  │  │            │
//	cancel │          last step ──┘  │  │  └─ pause, a budget or repair.max
//	       │             done        │  │     reached, manual effect unknown
//	       │               │         │  │        ▼
//	       ▼               ▼         │  │   ┌──────────────────┐
//	 ┌───────────┐  ┌───────────┐    │  │   │ paused /          │
//	 │ cancelled │  │ succeeded │    │  │   │ waiting_approval  │
//	 └───────────┘  └───────────┘    │  │   └──────────────────┘
//	       ▲                         │  │
//	       └──────── cancel ─────────┘  └─ unit failed past its retries,
//	                                      planning error ──▶ ┌────────┐
//	                                                         │ failed │
//	                                                         └────────┘
//
// succeeded, failed and cancelled are terminal: no unit of such a task is ever
// leased again.
//
// # Work units
//
// A task's pipeline is cut into bounded work units: one per plain step, one per
// item of a fan-out step. Only the units of the step under the cursor exist.
//
//	ready ──claim──▶ leased ──commit(done)──▶ done
//	  ▲                │ │
//	  │   retry later  │ └──commit(failed, no retries left)──▶ failed
//	  └────────────────┤
//	  └─lease expired──┘ (reclaim: the next lease gets a higher epoch)
//
// Every lease grant takes the task's next fencing epoch. A commit or heartbeat
// must carry the owner and epoch of the unit's current lease; anything else
// gets ErrLeaseLost, so a worker that lost its lease (paused, partitioned,
// believed dead) can never overwrite the work of the worker that took over.
//
// # Atomicity and group commit
//
// Every state change is one function run inside a Badger read-write
// transaction. Concurrent changes are gathered by whichever caller arrives
// first (the leader) into one transaction and one fsync, so N concurrent unit
// commits cost about one disk sync, not N. An operation that fails leaves no
// trace: operations validate before they write, and if one fails after
// writing, the batch is discarded and each operation is run again on its own.
//
// # Packages
//
// The store keeps Open and Close, the transactions its operations run in
// (the group commit's batches and their disk sync) and the task state
// machine: submit, the commit of an attempt and the advance it sets off,
// the planning of fan-out steps, repairs, retries, windows, facts, cancel,
// pause and resume. Each other mechanism is a package under
// store/internal, which the store wires together at Open; from the bottom
// up:
//
//   - internal/storedir: the lock beside the directory, taken before
//     anything in it is read, the owner-only modes, and the free-space
//     floor below which writes are refused.
//   - internal/filecheck: the check of the files before Badger opens
//     them, the high-water mark beside the store, and the logs a killed
//     process leaves empty.
//   - internal/logsync: the disk sync of Badger's logs, and the
//     coalescing of the syncs the group commit shares.
//   - internal/group: the group commit: batches of concurrent operations
//     led by the first caller, early answers before the sync.
//   - internal/index: the in-memory claim index: runnable tasks, ready
//     units in the order they are served, live leases, steps to plan.
//   - internal/kv: the key layout, typed access to a transaction (Tx),
//     the task record as a header and one record per step, and the caches
//     that spare decoding it; the database below is a kv.Backend, Badger's
//     or PostgreSQL's.
//   - internal/pgkv: the PostgreSQL backend (OpenPostgres): one table of
//     keys and values, SERIALIZABLE transactions with buffered writes,
//     versioned migrations, the processes' registrations, and the change
//     notices (LISTEN/NOTIFY) that keep every process's index current.
//   - internal/outbox: the event log, and the notification outbox each
//     event of a listed type feeds, with its deliveries' journal.
//   - internal/budget: the wall time, the budgets' checks, pauses and
//     raises.
//   - internal/lease: claims, heartbeats, releases, the taking back of
//     expired leases, and Leased, the fencing check of every write of a
//     lease's holder.
//   - internal/approval: the units that wait for a person: approvals,
//     and effects whose outcome a person settles.
//   - internal/models: the model journal.
//   - internal/quota: the storage quotas and their charges.
//   - internal/blob: the content-addressed blobs: artifacts, plugin
//     modules, replay sets.
//   - internal/read: the read side: a ledger.Reader over one transaction.
//   - internal/retention: Remove, GC and ReclaimSpace.
//   - internal/scrub: the record check of store verify.
//
// specs/RATIONALE.md, "The embedded store's packages", says how the store
// is cut and why.
package store

import "github.com/lhengine/lhengine/ledger"

// A Store is the embedded implementation of the store contract.
var _ ledger.Store = (*Store)(nil)
