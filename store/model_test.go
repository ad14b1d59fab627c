package store

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
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

	call := func(sum string) *ModelCall {
		return &ModelCall{Task: task.ID, Step: 0, StepName: "think", Item: l.Item, Key: "turn-1", RequestSHA256: sum,
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
	require.ErrorIs(t, err, ErrNotFound)

	tk, err := s.Task(b.ctx, task.ID)
	require.NoError(t, err)
	require.Equal(t, ModelUsage{Calls: 2, InputTokens: 20, OutputTokens: 8, Cost: 1}, tk.ModelUsage)

	zombie := l
	zombie.Epoch++
	_, _, err = s.RecordModelCall(b.ctx, zombie, call("dd"))
	require.True(t, errors.Is(err, ErrLeaseLost), "%v", err)

	var events []Event
	require.NoError(t, s.Read(func(r *Reader) error {
		events, err = r.Events(task.ID, 0, 0)
		return err
	}))
	var replayed []bool
	for _, e := range events {
		if e.Type == EvModelCall {
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
	require.NoError(t, s.Read(func(r *Reader) error {
		calls, err := r.ModelCalls(task.ID)
		require.Empty(t, calls, "removed with the task")
		return err
	}))
}
