package quota

import (
	"encoding/json"
	"testing"

	"github.com/dgraph-io/badger/v4"
	"github.com/stretchr/testify/require"

	"github.com/lhengine/lhengine/fault"
	"github.com/lhengine/lhengine/ledger"
	"github.com/lhengine/lhengine/store/internal/kv"
)

type fixture struct {
	t  *testing.T
	db *badger.DB
	kv *kv.DB
}

func setup(t *testing.T) *fixture {
	t.Helper()
	db, err := badger.Open(badger.DefaultOptions("").WithInMemory(true).WithLogger(nil))
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, db.Close()) })
	return &fixture{t: t, db: db, kv: kv.New(db, nil)}
}

// update runs fn in a transaction of its own, committed if fn succeeds.
func (f *fixture) update(fn func(*kv.Tx) error) error {
	txn := f.db.NewTransaction(true)
	defer txn.Discard()
	if err := f.kv.Tx(txn, true, nil).Run(fn); err != nil {
		return err
	}
	return txn.Commit()
}

func (f *fixture) usage(task string) ledger.Usage {
	var u ledger.Usage
	require.NoError(f.t, f.kv.View(func(t *kv.Tx) error {
		var err error
		u, err = Usage(t, task)
		return err
	}))
	return u
}

func TestCharge(t *testing.T) {
	t.Parallel()
	used := int64(90)
	var qe *ledger.QuotaError
	require.ErrorAs(t, Charge("kv_bytes", &used, 11, 100), &qe)
	require.Equal(t, ledger.QuotaError{What: "kv_bytes", Used: 90, Add: 11, Limit: 100}, *qe)
	require.EqualValues(t, 90, used, "refused: nothing counted")
	require.NoError(t, Charge("kv_bytes", &used, 10, 100))
	require.EqualValues(t, 100, used)
	require.NoError(t, Charge("kv_bytes", &used, -150, 100), "a shrink always fits")
	require.Zero(t, used, "never below zero")
}

// TestPutKV: an entry counts its key and value; an overwrite the
// difference; one that does not fit is refused and writes nothing.
func TestPutKV(t *testing.T) {
	t.Parallel()
	f := setup(t)
	l := ledger.Lease{Task: "T", Step: 0, Item: 1}
	put := func(key, value string, limit int64) error {
		return f.update(func(t *kv.Tx) error { return PutKV(t, l, key, json.RawMessage(value), limit) })
	}
	require.NoError(t, put("cursor", `12`, 100))
	require.EqualValues(t, 8, f.usage("T").KV)
	require.NoError(t, put("cursor", `1234`, 100))
	require.EqualValues(t, 10, f.usage("T").KV, "the difference")
	require.ErrorAs(t, put("other", `"`+string(make([]byte, 90))+`"`, 100), new(*ledger.QuotaError))
	require.ErrorAs(t, put("big", string(make([]byte, 200)), 100), new(*ledger.QuotaError))
	require.EqualValues(t, 10, f.usage("T").KV)
	var v []byte
	var missing error
	require.NoError(t, f.kv.View(func(tx *kv.Tx) error {
		var err error
		v, err = tx.GetRaw(kv.UnitKVKey("T", 0, 1, "cursor"))
		_, missing = tx.GetRaw(kv.UnitKVKey("T", 0, 1, "other"))
		return err
	}))
	require.Equal(t, `1234`, string(v))
	require.ErrorIs(t, missing, ledger.ErrNotFound)
}

// TestArtifacts: a blob counts once per task, and owning it is having
// counted it (or, for artifacts put before usage was counted, a provenance
// record naming it).
func TestArtifacts(t *testing.T) {
	t.Parallel()
	f := setup(t)
	sum := "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	other := "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
	for range 2 {
		require.NoError(t, f.update(func(t *kv.Tx) error { return ChargeArtifact(t, "T", sum, 300, 1000) }))
	}
	require.EqualValues(t, 300, f.usage("T").Artifacts)
	require.ErrorAs(t, f.update(func(t *kv.Tx) error { return ChargeArtifact(t, "T", other, 701, 1000) }), new(*ledger.QuotaError))
	require.NoError(t, f.update(func(t *kv.Tx) error {
		return t.PutJSON(kv.ProvKey("U", "s", 0, other, "old.txt"), ledger.Provenance{})
	}))
	owns := func(task, ref string) bool {
		var owned bool
		require.NoError(t, f.kv.View(func(t *kv.Tx) error {
			var err error
			owned, err = Owns(t, task, ref)
			return err
		}))
		return owned
	}
	require.True(t, owns("T", "sha256:"+sum))
	require.False(t, owns("T", "sha256:"+other))
	require.True(t, owns("U", "sha256:"+other), "by its provenance")
	require.False(t, owns("U", "sha256:"+sum))
	require.False(t, owns("T", sum), "not a ref")
}

// TestInflight: puts of one task in flight count against its quota until
// they are released; content counted already passes.
func TestInflight(t *testing.T) {
	t.Parallel()
	f := setup(t)
	var in Inflight
	a, b := "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
	_, err := in.Precheck(f.kv, "T", a, 1001, 1000)
	require.ErrorAs(t, err, new(*ledger.QuotaError), "larger than the quota")
	release, err := in.Precheck(f.kv, "T", a, 600, 1000)
	require.NoError(t, err)
	again, err := in.Precheck(f.kv, "T", a, 600, 1000)
	require.NoError(t, err, "the same content in flight counts once")
	_, err = in.Precheck(f.kv, "T", b, 600, 1000)
	require.ErrorAs(t, err, new(*ledger.QuotaError), "a's put in flight counts")
	_, err = in.Precheck(f.kv, "U", b, 600, 1000)
	require.NoError(t, err, "another task's quota")
	require.Equal(t, 2, in.Tasks())
	release()
	again()
	require.Equal(t, 1, in.Tasks())
	release, err = in.Precheck(f.kv, "T", b, 600, 1000)
	require.NoError(t, err)
	release()

	require.NoError(t, f.update(func(t *kv.Tx) error { return ChargeArtifact(t, "V", a, 600, 1000) }))
	release, err = in.Precheck(f.kv, "V", a, 600, 1000)
	require.NoError(t, err, "counted already")
	release()
}

// TestChargeOutput: an output that does not fit the task's quota turns
// the result into a budget failure, keeping nothing of it.
func TestChargeOutput(t *testing.T) {
	t.Parallel()
	f := setup(t)
	require.NoError(t, f.update(func(t *kv.Tx) error { return t.PutJSON(kv.OutputLimitKey("T"), int64(10)) }))
	ok := ledger.Result{Lease: ledger.Lease{Task: "T"}}
	require.NoError(t, f.update(func(t *kv.Tx) error { return ChargeOutput(t, &ok) }))
	require.EqualValues(t, 4, f.usage("T").Outputs, "an empty output is null")
	big := ledger.Result{Lease: ledger.Lease{Task: "T"}, Output: json.RawMessage(`"1234567"`), Notes: []ledger.Note{{Text: "n"}}}
	require.NoError(t, f.update(func(t *kv.Tx) error { return ChargeOutput(t, &big) }))
	require.NotNil(t, big.Failure)
	require.Equal(t, fault.Budget, big.Failure.Kind)
	require.Nil(t, big.Output)
	require.Nil(t, big.Notes)
	require.EqualValues(t, 4, f.usage("T").Outputs)
	failed := ledger.Result{Lease: ledger.Lease{Task: "T"}, Failure: &ledger.Failure{}, Output: json.RawMessage(`"1234567"`)}
	require.NoError(t, f.update(func(t *kv.Tx) error { return ChargeOutput(t, &failed) }))
	require.EqualValues(t, 4, f.usage("T").Outputs, "a failure counts nothing")
}
