// Package ledger is the store contract: the records the ledger keeps (tasks,
// steps, units, attempts, events, manifests, capability records, model
// calls, approvals, budgets, notes) and the errors a store returns. The
// engine is written against it; ../store (Badger, the embedded default) is
// one implementation of it.
//
// It is a leaf below both the store and the engine: it imports nothing of
// lhengine but ../fault, the vocabulary of step failures a record carries.
// The records' JSON form is what the embedded store writes to disk; the
// wire contract (../api) has records of its own, converted by ../server.
package ledger
