package kv

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lhengine/lhengine/fault"
	"github.com/lhengine/lhengine/ledger"
	"github.com/lhengine/lhengine/store/internal/index"
)

// TestALeasedUnitIsReadBackWithoutDecoding: a unit written leased is read
// back from what the write kept, the same as a decode; one written in any
// other state, or whose bytes changed since, is decoded.
func TestALeasedUnitIsReadBackWithoutDecoding(t *testing.T) {
	t.Parallel()
	d := open(t)
	key := UnitKey("T", 1, 7)
	u := &ledger.Unit{Task: "T", Step: 1, Item: 7, Key: json.RawMessage(`"/about"`), Value: json.RawMessage(`{"url":"/about"}`),
		State: ledger.UnitLeased, Attempt: 2, Owner: "w1", Epoch: 3,
		// The store's clock is time.Now: local time, here at no offset.
		LeaseUntil: time.Now().In(time.FixedZone("here", 0)).Add(time.Minute), Claimed: time.Now().UTC(),
		Failure: &ledger.Failure{Kind: fault.PluginError, Message: "first try", Step: "s", Item: 7, Attempt: 1}}
	require.NoError(t, update(t, d, index.New(), func(tx *Tx) error { return tx.PutJSON(key, u) }))
	require.Contains(t, d.leased.m, string(key), "kept")

	var got, want ledger.Unit
	require.NoError(t, d.View(func(tx *Tx) error { return tx.GetJSON(key, &got) }))
	require.NoError(t, d.View(func(tx *Tx) error {
		return tx.txn.Get(key, func(b []byte, _ uint64) error { return json.Unmarshal(b, &want) })
	}))
	require.Equal(t, want, got)
	got.Failure.Message, got.Key[1] = "changed", 'X'
	var again ledger.Unit
	require.NoError(t, d.View(func(tx *Tx) error { return tx.GetJSON(key, &again) }))
	require.Equal(t, want, again, "a copy each time")

	// Another writer's bytes at the key are decoded.
	other := *u
	other.Owner = "w2"
	b, err := json.Marshal(&other)
	require.NoError(t, err)
	require.NoError(t, update(t, d, index.New(), func(tx *Tx) error { return tx.Put(key, b) }))
	require.NoError(t, d.View(func(tx *Tx) error { return tx.GetJSON(key, &got) }))
	require.Equal(t, "w2", got.Owner)

	u.State = ledger.UnitDone
	require.NoError(t, update(t, d, index.New(), func(tx *Tx) error { return tx.PutJSON(key, u) }))
	require.NotContains(t, d.leased.m, string(key), "a unit no longer leased leaves")
}

// FuzzLeasedUnitDecodesAsJSON holds the kept form of a unit to a decode
// of its encoding: whatever decodedForm takes, json.Unmarshal gives the
// same.
func FuzzLeasedUnitDecodesAsJSON(f *testing.F) {
	f.Add("T", "w1", "msg", []byte(`"k"`), []byte(`{"a":[1,2]}`), int64(1764800000123456789), 0, true)
	f.Add("T\xff", "w", "<b>", []byte(`{"a": 1}`), []byte(`"<>"`), int64(0), 1, false)
	f.Add("", "", "\u2028", []byte(`[ ]`), []byte(`null`), int64(-62135596800000000), 2, true)
	f.Fuzz(func(t *testing.T, task, owner, msg string, key, value []byte, nanos int64, zone int, fail bool) {
		if !json.Valid(key) || !json.Valid(value) {
			return
		}
		at := time.Unix(0, nanos)
		switch zone % 3 {
		case 0:
			at = at.UTC()
		case 1:
			at = at.In(time.FixedZone("x", 3600))
		}
		u := &ledger.Unit{Task: task, Item: len(msg), Key: key, Value: value, State: ledger.UnitLeased, Owner: owner,
			LeaseUntil: at, Claimed: at.Add(time.Second), NotBefore: time.Time{}.In(time.FixedZone("y", 60))}
		if fail {
			u.Failure = &ledger.Failure{Kind: fault.Kind(msg), Message: msg, Item: 1}
		}
		enc, err := json.Marshal(u)
		if err != nil {
			return // a time json cannot write (a year past 9999)
		}
		var c leasedUnits
		c.note([]byte("k"), enc, u)
		var got, want ledger.Unit
		require.NoError(t, c.decode([]byte("k"), enc, &got))
		require.NoError(t, json.Unmarshal(enc, &want))
		require.Equal(t, want, got)
	})
}
