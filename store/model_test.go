package store

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lhengine/lhengine/ledger"
)

// TestModelJournal: a recorded call charges the task once and is read
// back by its key and request hash; recording it again charges nothing;
// a zombie's lease records nothing; the store verifies clean; removing the
// task removes its model journal.
func TestModelJournal(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s, err := Open(dir, Options{NoSync: true})
	require.NoError(t, err)
	b := &testBundle{s: s, ctx: t.Context()}
	task := b.submit(t, plainSteps("think"))
	l := b.claim1(t, "w")

	call := func(sum string) *ledger.ModelCall {
		return &ledger.ModelCall{Task: task.ID, Step: 0, StepName: "think", Item: l.Item, Key: "turn-1", RequestSHA256: sum,
			Model: "m", Provider: "openai", ModelID: "id", Response: json.RawMessage(`{"text":"hi"}`),
			InputTokens: 10, OutputTokens: 4, Cost: 0.5, Attempt: l.Attempt}
	}
	c, fresh, err := s.RecordModelCall(b.ctx, l, call("aa"))
	require.NoError(t, err)
	require.True(t, fresh)
	require.False(t, c.Time.IsZero())
	_, fresh, err = s.RecordModelCall(b.ctx, l, call("aa"))
	require.NoError(t, err)
	require.False(t, fresh, "recorded already: nothing charged")
	_, fresh, err = s.RecordModelCall(b.ctx, l, call("bb"))
	require.NoError(t, err)
	require.True(t, fresh, "another request under the key is another call")
	require.NoError(t, s.ModelCallReplayed(b.ctx, l, c))

	got, err := s.ModelCall(task.ID, 0, l.Item, "turn-1", "aa")
	require.NoError(t, err)
	require.JSONEq(t, `{"text":"hi"}`, string(got.Response))
	_, err = s.ModelCall(task.ID, 0, l.Item, "turn-1", "cc")
	require.ErrorIs(t, err, ledger.ErrNotFound)

	tk, err := s.Task(b.ctx, task.ID)
	require.NoError(t, err)
	require.Equal(t, ledger.ModelUsage{Calls: 2, InputTokens: 20, OutputTokens: 8, Cost: 1}, tk.ModelUsage)

	zombie := l
	zombie.Epoch++
	_, _, err = s.RecordModelCall(b.ctx, zombie, call("dd"))
	require.True(t, errors.Is(err, ledger.ErrLeaseLost), "%v", err)

	var events []ledger.Event
	require.NoError(t, s.Read(func(r ledger.Reader) error {
		events, err = r.Events(task.ID, 0, 0)
		return err
	}))
	var replayed []bool
	for _, e := range events {
		if e.Type == ledger.EvModelCall {
			replayed = append(replayed, e.Model.Replayed)
		}
	}
	require.Equal(t, []bool{false, false, true}, replayed)

	b.done(t, l, `{}`)
	require.NoError(t, s.Close())
	rep, err := Verify(dir, nil)
	require.NoError(t, err)
	require.False(t, rep.Damaged(), "%v", rep.Findings)

	s, err = Open(dir, Options{NoSync: true, Now: func() time.Time { return time.Now().Add(time.Hour) }})
	require.NoError(t, err)
	defer s.Close()
	require.NoError(t, s.Remove(t.Context(), task.ID))
	require.NoError(t, s.Read(func(r ledger.Reader) error {
		calls, err := r.ModelCalls(task.ID)
		require.Empty(t, calls, "removed with the task")
		return err
	}))
}

// TestModelIntent: a call's intent is no response; a second start finds it
// and counts the send as possibly billed (bytes, the most it can cost, an
// event) before recording its own; the response replaces the intent and
// is billed once; a start after the response gets the response and writes
// nothing; a call that ends without a response drops its intent, counting
// the sends whose outcome is unknown; a zombie records no intent.
func TestModelIntent(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s, err := Open(dir, Options{NoSync: true})
	require.NoError(t, err)
	b := &testBundle{s: s, ctx: t.Context()}
	task := b.submit(t, plainSteps("think"))
	l := b.claim1(t, "w")

	intent := func(key string) *ledger.ModelCall {
		return &ledger.ModelCall{Task: task.ID, Step: 0, StepName: "think", Item: l.Item, Key: key, RequestSHA256: "aa",
			Model: "m", Provider: "openai", ModelID: "id", Attempt: l.Attempt, RequestBytes: 300, MaxCost: 0.25}
	}
	usage := func() ledger.ModelUsage {
		tk, err := s.Task(b.ctx, task.ID)
		require.NoError(t, err)
		return tk.ModelUsage
	}

	prior, err := s.StartModelCall(b.ctx, l, intent("turn-1"))
	require.NoError(t, err)
	require.Nil(t, prior)
	_, err = s.ModelCall(task.ID, 0, l.Item, "turn-1", "aa")
	require.ErrorIs(t, err, ledger.ErrNotFound, "an intent is not a response")
	require.Equal(t, ledger.ModelUsage{}, usage(), "an intent charges nothing")

	prior, err = s.StartModelCall(b.ctx, l, intent("turn-1"))
	require.NoError(t, err)
	require.Nil(t, prior)
	require.Equal(t, ledger.ModelUsage{PossiblyBilled: ledger.ModelPossiblyBilled{Calls: 1, RequestBytes: 300, MaxCost: 0.25}}, usage())

	c := intent("turn-1")
	c.Response, c.InputTokens, c.OutputTokens, c.Cost = json.RawMessage(`{"text":"hi"}`), 10, 4, 0.5
	_, fresh, err := s.RecordModelCall(b.ctx, l, c)
	require.NoError(t, err)
	require.True(t, fresh, "the response replaces the intent")
	got, err := s.ModelCall(task.ID, 0, l.Item, "turn-1", "aa")
	require.NoError(t, err)
	require.Empty(t, got.State)
	require.JSONEq(t, `{"text":"hi"}`, string(got.Response))

	prior, err = s.StartModelCall(b.ctx, l, intent("turn-1"))
	require.NoError(t, err)
	require.NotNil(t, prior, "answered already: answer from the journal")
	require.JSONEq(t, `{"text":"hi"}`, string(prior.Response))

	// Refused: the intent goes, nothing counted. Cut off twice: both counted.
	for _, k := range []string{"turn-2", "turn-3"} {
		prior, err = s.StartModelCall(b.ctx, l, intent(k))
		require.NoError(t, err)
		require.Nil(t, prior)
	}
	require.NoError(t, s.EndModelCall(b.ctx, l, intent("turn-2"), 0))
	require.NoError(t, s.EndModelCall(b.ctx, l, intent("turn-3"), 2))
	require.Equal(t, ledger.ModelUsage{Calls: 1, InputTokens: 10, OutputTokens: 4, Cost: 0.5,
		PossiblyBilled: ledger.ModelPossiblyBilled{Calls: 3, RequestBytes: 900, MaxCost: 0.75}}, usage())
	require.NoError(t, s.EndModelCall(b.ctx, l, intent("turn-1"), 0))
	_, err = s.ModelCall(task.ID, 0, l.Item, "turn-1", "aa")
	require.NoError(t, err, "a response is never dropped")

	zombie := l
	zombie.Epoch++
	_, err = s.StartModelCall(b.ctx, zombie, intent("turn-4"))
	require.ErrorIs(t, err, ledger.ErrLeaseLost)

	var possibly []string
	require.NoError(t, s.Read(func(r ledger.Reader) error {
		calls, err := r.ModelCalls(task.ID)
		require.NoError(t, err)
		require.Len(t, calls, 1, "no intent left")
		events, err := r.Events(task.ID, 0, 0)
		for _, e := range events {
			if e.Type == ledger.EvModelCall && e.Model.PossiblyBilled {
				require.EqualValues(t, 300, e.Model.RequestBytes)
				require.Contains(t, e.Message, "possibly billed (request 300 bytes, cost at most 0.25)")
				possibly = append(possibly, e.Model.Key)
			}
		}
		return err
	}))
	require.Equal(t, []string{"turn-1", "turn-3", "turn-3"}, possibly)

	b.done(t, l, `{}`)
	require.NoError(t, s.Close())
	rep, err := Verify(dir, nil)
	require.NoError(t, err)
	require.False(t, rep.Damaged(), "%v", rep.Findings)
}
