package server_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lhengine/lhengine/api"
)

// TestPauseAndBudgetRaiseOverTheAPI: POST .../pause pauses a queued task
// (no unit in flight: it answers at once), recorded as made by the
// request's token ("owner", the home's), not by the "by" it claims; a bad
// grace or budget raise is 400; a resume with a raise records it with
// who and makes the task runnable.
func TestPauseAndBudgetRaiseOverTheAPI(t *testing.T) {
	t.Parallel()
	b := setupAPI(t)
	ctx := context.Background()
	c := api.NewClient(b.url, nil, b.token)
	task := b.submit(t, c, 3)

	var ae *api.Error
	_, err := c.Pause(ctx, task.ID, api.PauseRequest{Grace: "soon"})
	require.ErrorAs(t, err, &ae)
	require.Equal(t, api.CodeInvalid, ae.Code)

	got, err := c.Pause(ctx, task.ID, api.PauseRequest{Reason: "deploy window", By: "carol", Grace: "0s"})
	require.NoError(t, err)
	require.Equal(t, api.Paused, got.Status)
	require.Equal(t, "owner", got.Pause.By)
	require.Equal(t, "paused by owner: deploy window", got.Reason)

	_, err = c.ResumeWith(ctx, task.ID, api.ResumeRequest{Budget: []string{"unit=5"}})
	require.ErrorAs(t, err, &ae)
	require.Equal(t, api.CodeInvalid, ae.Code)
	require.Contains(t, ae.Message, `no budget named "unit"`)

	got, err = c.ResumeWith(ctx, task.ID, api.ResumeRequest{Budget: []string{"units=10", "wall_time=+1h"}, By: "carol"})
	require.NoError(t, err)
	require.Equal(t, api.Running, got.Status)
	require.Equal(t, int64(10), got.Budget.Limits.Units)
	evs, err := c.Events(ctx, task.ID, 0)
	require.NoError(t, err)
	require.Equal(t, 2, raisedBy(t, evs, "owner"))
}

// raisedBy counts the budget raises among evs, each of which must have
// been made by owner.
func raisedBy(t *testing.T, evs []api.Event, owner string) int {
	t.Helper()
	raised := 0
	for _, e := range evs {
		if e.Type == api.EvBudgetRaised {
			raised++
			require.Equal(t, owner, e.Owner)
		}
	}
	return raised
}
