package store

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lhengine/lhengine/fault"
	"github.com/lhengine/lhengine/ledger"
)

func (b *testBundle) usage(t *testing.T, id string) ledger.Usage {
	t.Helper()
	var u ledger.Usage
	require.NoError(t, b.s.Read(func(r ledger.Reader) (err error) { u, err = r.Usage(id); return err }))
	return u
}

func TestOutputQuotaFailsTheUnit(t *testing.T) {
	t.Parallel()
	b := setup(t)
	task, _, err := b.s.Submit(b.ctx, ledger.NewTask{Name: "t", Steps: plainSteps("a", "b"), OutputQuota: new(int64(100))})
	require.NoError(t, err)
	l := b.claim1(t, "w")
	out := `"` + strings.Repeat("x", 60) + `"`
	b.done(t, l, out)
	require.Equal(t, int64(62), b.usage(t, task.ID).Outputs)

	l = b.claim1(t, "w")
	got, err := b.s.Commit(b.ctx, ledger.Result{Lease: l, Output: json.RawMessage(out), Counts: map[string]int64{"n": 1}})
	require.NoError(t, err)
	require.Equal(t, ledger.Failed, got.Status, "the output does not fit: the unit fails, not retried")
	require.Equal(t, fault.Budget, got.Failure.Kind)
	require.Contains(t, got.Failure.Message, "output_bytes quota is exhausted: 62 of 100 bytes used")
	require.Empty(t, got.Counters, "nothing of the refused success is kept")
	require.Equal(t, int64(62), b.usage(t, task.ID).Outputs)
}

func TestKVQuotaCountsInTheSameTransaction(t *testing.T) {
	t.Parallel()
	b := setup(t)
	task := b.submit(t, plainSteps("a"))
	l := b.claim1(t, "w")
	require.NoError(t, b.s.KVPut(b.ctx, l, "k", json.RawMessage(`"abc"`), 10))
	err := b.s.KVPut(b.ctx, l, "j", json.RawMessage(`"abcd"`), 10)
	var qe *ledger.QuotaError
	require.ErrorAs(t, err, &qe)
	require.ErrorIs(t, err, ledger.ErrQuota)
	require.False(t, qe.TooLarge())
	_, found, err := b.s.KVGet(task.ID, 0, 0, "j")
	require.NoError(t, err)
	require.False(t, found, "a refused entry is not written")
	require.Equal(t, int64(6), b.usage(t, task.ID).KV)
	err = b.s.KVPut(b.ctx, l, "k", json.RawMessage(`"0123456789"`), 10)
	require.ErrorAs(t, err, &qe)
	require.True(t, qe.TooLarge())
}

func TestArtifactQuotaCountsEachBlobOncePerTask(t *testing.T) {
	t.Parallel()
	b := setup(t)
	a := b.submit(t, plainSteps("a"))
	other := b.submit(t, plainSteps("a"))
	data := []byte(strings.Repeat("d", 300))
	ref, err := b.s.PutArtifact(b.ctx, ledger.Provenance{Name: "1", Task: a.ID, Step: "a"}, data, 500)
	require.NoError(t, err)
	_, err = b.s.PutArtifact(b.ctx, ledger.Provenance{Name: "2", Task: a.ID, Step: "a"}, data, 500)
	require.NoError(t, err)
	_, err = b.s.PutArtifact(b.ctx, ledger.Provenance{Name: "3", Task: a.ID, Step: "a"}, []byte(strings.Repeat("e", 300)), 500)
	require.ErrorIs(t, err, ledger.ErrQuota)
	require.Equal(t, int64(300), b.usage(t, a.ID).Artifacts)

	owns, err := b.s.OwnsArtifact(a.ID, ref)
	require.NoError(t, err)
	require.True(t, owns)
	owns, err = b.s.OwnsArtifact(other.ID, ref)
	require.NoError(t, err)
	require.False(t, owns, "another task's artifact")
	_, err = b.s.PutArtifact(b.ctx, ledger.Provenance{Name: "x", Task: other.ID, Step: "a"}, data, 500)
	require.NoError(t, err)
	owns, err = b.s.OwnsArtifact(other.ID, ref)
	require.NoError(t, err)
	require.True(t, owns)
	require.Equal(t, int64(300), b.usage(t, other.ID).Artifacts)
}

// TestArtifactQuotaCountsPutsInFlight puts artifacts of one task at once, as
// units of a fan-out step would: each put's chunks are written outside any
// transaction, so a second put checked while the first is in flight must
// count it, or both pass against the same usage and write more than the
// quota (the refused one leaving its blob behind).
func TestArtifactQuotaCountsPutsInFlight(t *testing.T) {
	t.Parallel()
	b := setup(t)
	task := b.submit(t, plainSteps("a"))
	first := []byte(strings.Repeat("f", 300))
	second := []byte(strings.Repeat("s", 300))
	var inner error
	calls := 0
	b.s.inflight.Hook = func() {
		calls++
		if calls > 1 {
			return
		}
		// The first put has passed its check and written nothing yet.
		_, inner = b.s.PutArtifact(b.ctx, ledger.Provenance{Name: "2", Task: task.ID, Step: "a"}, second, 500)
		require.NoError(t, errOf(b.s.PutArtifact(b.ctx, ledger.Provenance{Name: "1b", Task: task.ID, Step: "a"}, first, 500)),
			"the same content in flight counts once")
	}
	_, err1 := b.s.PutArtifact(b.ctx, ledger.Provenance{Name: "1", Task: task.ID, Step: "a"}, first, 500)
	require.NoError(t, err1)
	var qe *ledger.QuotaError
	require.ErrorAs(t, inner, &qe, "the second put is refused while the first is in flight")
	require.Equal(t, int64(300), qe.Used)
	require.Equal(t, int64(300), b.usage(t, task.ID).Artifacts)
	var blobs int
	for _, k := range allKeys(t, b.s) {
		if strings.HasPrefix(k, "B/") {
			blobs++
		}
	}
	require.Equal(t, 1, blobs, "the refused put wrote nothing")
	require.Zero(t, b.s.inflight.Tasks(), "nothing stays in flight")

	// Once charged, the same content is free to put again.
	b.s.inflight.Hook = nil
	_, err2 := b.s.PutArtifact(b.ctx, ledger.Provenance{Name: "1c", Task: task.ID, Step: "a"}, first, 500)
	require.NoError(t, err2)
}

func errOf[T any](_ T, e error) error { return e }
