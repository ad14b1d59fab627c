package store

import (
	"context"

	"github.com/lhengine/lhengine/ledger"
)

// The model journal (internal/models) keeps the response of every model
// call a unit made, durably, before the plugin sees it: a later attempt of
// the unit that makes the same call is answered from it and not billed
// again, and a call whose outcome no one saw is counted as possibly billed.

// ModelCall reads the recorded response of a unit's call key made with the
// request whose normalised sha256 is sum. ErrNotFound when there is none
// (an intent is not a response).
func (s *Store) ModelCall(task string, step, item int, key, sum string) (*ledger.ModelCall, error) {
	return s.models.Call(task, step, item, key, sum)
}

// StartModelCall records durably, under the unit's lease, the intent c
// (State ModelSending) of a call about to be sent. An intent found at its
// key, left by a send whose outcome no one saw, is first counted as
// possibly billed (the task's ModelUsage and an EvModelCall event), in the
// same transaction. When the call's response is recorded already (recorded
// meanwhile), nothing is written and that entry is returned: answer from
// it; otherwise the result is nil and the caller sends.
func (s *Store) StartModelCall(ctx context.Context, l ledger.Lease, c *ledger.ModelCall) (recorded *ledger.ModelCall, err error) {
	return s.models.Start(ctx, l, c)
}

// EndModelCall closes call c's send: it counts unknown of its sends as
// possibly billed (their connection failed after the request may have
// reached the provider) and drops c's intent if no response was recorded
// (the call ended without one, its outcome seen: refused, say). An entry
// holding a response is left as it is.
func (s *Store) EndModelCall(ctx context.Context, l ledger.Lease, c *ledger.ModelCall, unknown int) error {
	return s.models.End(ctx, l, c, unknown)
}

// RecordModelCall writes a call's journal entry durably, under the unit's
// lease (a zombie records nothing), in place of its intent, adds its tokens
// and cost to the task's ModelUsage and records an EvModelCall event, all
// in one transaction. If the response is recorded already (the same call
// recorded meanwhile), nothing is written or charged and the recorded entry
// is returned with recorded false.
func (s *Store) RecordModelCall(ctx context.Context, l ledger.Lease, c *ledger.ModelCall) (out *ledger.ModelCall, recorded bool, err error) {
	return s.models.Record(ctx, l, c)
}

// ModelCallReplayed records an EvModelCall event for a call answered from
// the journal: nothing is charged.
func (s *Store) ModelCallReplayed(ctx context.Context, l ledger.Lease, c *ledger.ModelCall) error {
	return s.models.Replayed(ctx, l, c)
}
