package store

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lhengine/lhengine/fault"
	"github.com/lhengine/lhengine/ledger"
)

func TestArtifactsAreContentAddressedChunkedAndDeduplicated(t *testing.T) {
	t.Parallel()
	s, err := Open(t.TempDir(), Options{})
	require.NoError(t, err)
	defer s.Close()
	b := &testBundle{s: s, ctx: t.Context()}
	task := b.submit(t, plainSteps("a"))
	big := bytes.Repeat([]byte("0123456789abcdef"), 3*ledger.ArtifactChunk/16+7) // 3 chunks and a bit
	p := ledger.Provenance{Name: "big.bin", Task: task.ID, Step: "a", Attempt: 1}
	ref, err := s.PutArtifact(b.ctx, p, big, 1<<30)
	require.NoError(t, err)
	require.Len(t, ref, 71)
	// The same unit putting the same content again (a retry) is one record.
	p.Attempt = 2
	ref2, err := s.PutArtifact(b.ctx, p, big, 1<<30)
	require.NoError(t, err)
	require.Equal(t, ref, ref2)
	_, err = s.PutArtifact(b.ctx, ledger.Provenance{Name: "small.txt", Task: task.ID, Step: "a"}, []byte("hi"), 1<<30)
	require.NoError(t, err)

	got := make([]byte, 0, len(big))
	buf := make([]byte, 300_000)
	for off := int64(0); ; {
		n, size, err := s.ReadArtifact(ref, off, buf)
		require.NoError(t, err)
		require.Equal(t, int64(len(big)), size)
		if n == 0 {
			break
		}
		got = append(got, buf[:n]...)
		off += int64(n)
	}
	require.Equal(t, big, got)
	_, _, err = s.ReadArtifact("sha256:"+string(bytes.Repeat([]byte("0"), 64)), 0, buf)
	require.ErrorIs(t, err, ledger.ErrNotFound)

	require.NoError(t, s.Read(func(r ledger.Reader) error {
		ps, err := r.Artifacts(task.ID)
		require.NoError(t, err)
		require.Len(t, ps, 2)
		for _, p := range ps {
			if p.Name == "big.bin" {
				require.Equal(t, 2, p.Attempt, "the retry's record replaced the first")
				require.Equal(t, int64(len(big)), p.Size)
			}
		}
		return nil
	}))
}

func TestKVPutNeedsTheCurrentLease(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.submit(t, plainSteps("a"))
	zombie := b.claim1(t, "a")
	require.NoError(t, b.s.KVPut(b.ctx, zombie, "cursor", json.RawMessage(`5`), 64<<20))
	b.clock.Add(time.Minute)
	fresh := b.claim1(t, "b")
	require.ErrorIs(t, b.s.KVPut(b.ctx, zombie, "cursor", json.RawMessage(`9`), 64<<20), ledger.ErrLeaseLost)
	v, ok, err := b.s.KVGet(fresh.Task, 0, 0, "cursor")
	require.NoError(t, err)
	require.True(t, ok)
	require.JSONEq(t, `5`, string(v), "the next attempt resumes from the cursor its predecessor saved")
}

func TestCountsAndNotesCommitOnlyWithASuccessfulAttempt(t *testing.T) {
	t.Parallel()
	b := setup(t)
	task := b.submit(t, plainSteps("a"))
	l := b.claim1(t, "w")
	_, err := b.s.Commit(b.ctx, ledger.Result{Lease: l, Failure: &ledger.Failure{Kind: fault.Trap, Message: "x"}, RetryAt: b.clock.Now(),
		Counts: map[string]int64{"pages": 5}, Notes: []ledger.Note{{Kind: "finding", Text: "lost"}}})
	require.NoError(t, err)
	l = b.claim1(t, "w")
	got, err := b.s.Commit(b.ctx, ledger.Result{Lease: l, Output: json.RawMessage(`1`),
		Counts: map[string]int64{"pages": 5}, Notes: []ledger.Note{{Kind: "decision", Text: "kept"}}})
	require.NoError(t, err)
	require.Equal(t, map[string]int64{"pages": 5}, got.Counters)
	require.NoError(t, b.s.Read(func(r ledger.Reader) error {
		notes, err := r.Notes(task.ID)
		require.NoError(t, err)
		require.Len(t, notes, 1)
		require.Equal(t, "kept", notes[0].Text)
		require.Equal(t, 2, notes[0].Attempt)
		return nil
	}))
}

func TestPausedTaskIsNotClaimedUntilItsEffectIsResolved(t *testing.T) {
	t.Parallel()
	b := setup(t)
	task := b.submit(t, plainSteps("send"))
	l := b.claim1(t, "w")
	e := &ledger.Effect{Task: task.ID, Step: 0, StepName: "send", Key: "mail-1", Kind: "http", Mode: "manual",
		IdempotencyKey: ledger.IdempotencyKey(task.ID, "send", 0, "mail-1"), State: ledger.EffectUnknown, Attempt: 1}
	require.NoError(t, b.s.RecordEffect(b.ctx, l, e))
	got, err := b.s.Pause(b.ctx, l, "effect mail-1: outcome unknown")
	require.NoError(t, err)
	require.Equal(t, ledger.Paused, got.Status)
	c, err := b.s.Claim(b.ctx, ledger.ClaimRequest{Owner: b.s.Owner("w"), Max: 5})
	require.NoError(t, err)
	require.Empty(t, c.Leases)

	resolved, err := b.s.ResolveEffect(b.ctx, task.ID, 0, 0, "mail-1", true, "saw it in the outbox")
	require.NoError(t, err)
	require.Equal(t, ledger.EffectDone, resolved.State)
	l = b.claim1(t, "w")
	require.Equal(t, 2, l.Attempt, "pausing gave the attempt back without counting it as failed")
	e2, err := b.s.Effect(task.ID, 0, 0, "mail-1")
	require.NoError(t, err)
	require.JSONEq(t, `{"status":200,"headers":{},"body":"","reconciled":"confirmed"}`, string(e2.Outcome),
		"a confirmed effect has its kind's result shape")
}

func TestIdempotencyKeyIsStable(t *testing.T) {
	t.Parallel()
	a := ledger.IdempotencyKey("T", "send", 3, "mail")
	require.Equal(t, a, ledger.IdempotencyKey("T", "send", 3, "mail"))
	require.NotEqual(t, a, ledger.IdempotencyKey("T", "send", 4, "mail"))
	require.Len(t, a, 32)
}

func TestLeaseOfAUnitInFlightWhenPausedIsReclaimedAfterResume(t *testing.T) {
	t.Parallel()
	b := setup(t, fanOutPlanner(2))
	task := b.submit(t, []ledger.StepState{{Name: "each", FanOut: true, Limit: 2}})
	c, err := b.s.Claim(b.ctx, ledger.ClaimRequest{Owner: b.s.Owner("w"), Max: 2, LeaseFor: 30 * time.Second})
	require.NoError(t, err)
	require.Len(t, c.Leases, 2)
	_, err = b.s.Pause(b.ctx, c.Leases[0], "waiting for a human")
	require.NoError(t, err)
	// The worker running item 1 dies; the task is resumed later.
	_, err = b.s.Resume(b.ctx, task.ID)
	require.NoError(t, err)
	b.clock.Add(time.Minute)
	c, err = b.s.Claim(b.ctx, ledger.ClaimRequest{Owner: b.s.Owner("w2"), Max: 2})
	require.NoError(t, err)
	require.Len(t, c.Leases, 2, "the paused unit and the dead worker's unit both run again")
}
