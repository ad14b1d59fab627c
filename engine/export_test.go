package engine

import "github.com/lhengine/lhengine/store"

// StoreOf hands tests in package engine_test the ledger behind an engine,
// for what no public method offers (older-engine records, sync counts).
func StoreOf(e *Engine) *store.Store { return e.store.(*store.Store) }
