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
package store

import "github.com/lhengine/lhengine/ledger"

// A Store is the embedded implementation of the store contract.
var _ ledger.Store = (*Store)(nil)
