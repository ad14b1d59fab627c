package server_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lhengine/lhengine/api"
	"github.com/lhengine/lhengine/engine"
	"github.com/lhengine/lhengine/internal/holdpoint"
)

// TestNoAnswerIsAheadOfTheDisk: the sync of the commit that finishes a
// task is held. Until it is released, no client of the API (a task read,
// the task list, a follower of the task's events) hears "succeeded": each
// waits for the sync, and answers "succeeded" once it is done.
func TestNoAnswerIsAheadOfTheDisk(t *testing.T) {
	t.Parallel()
	b := setupAPI(t)
	ctx := context.Background()
	c := api.NewClient(b.url, nil, b.token)
	task := b.submit(t, c, 1)
	storeDir := filepath.Join(b.dir, "home", "store")

	wctx, stop := context.WithCancel(ctx)
	worked := make(chan error, 1)
	go func() { worked <- b.e.Work(wctx, engine.WorkOptions{Concurrency: 1}) }()
	defer func() {
		stop()
		require.ErrorIs(t, <-worked, context.Canceled)
	}()
	<-b.gate.Arrived() // the only unit runs

	syncs, stopSyncs := holdpoint.Watch(holdpoint.StoreSync, storeDir)
	defer stopSyncs()
	waits, stopWaits := holdpoint.Watch(holdpoint.StoreReadWaits, storeDir)
	defer stopWaits()
	syncs.Hold()
	b.gate.Release(1)
	<-syncs.Arrived() // the unit's commit is in the store, its sync held

	type answer struct {
		what   string
		status api.Status
		err    error
	}
	answers := make(chan answer, 3)
	go func() {
		got, err := c.Task(ctx, task.ID)
		a := answer{what: "task", err: err}
		if err == nil {
			a.status = got.Status
		}
		answers <- a
	}()
	go func() {
		ts, err := c.Tasks(ctx)
		a := answer{what: "list", err: err}
		if err == nil && len(ts) == 1 {
			a.status = ts[0].Status
		}
		answers <- a
	}()
	go func() {
		var end api.Status
		err := c.Follow(ctx, task.ID, 0, func(it api.StreamItem) error {
			if it.Type == api.StreamEnd {
				end = it.Task.Status
			}
			return nil
		})
		answers <- answer{what: "follow", status: end, err: err}
	}()
	for waiting := 0; waiting < 3; {
		select {
		case a := <-answers:
			t.Fatalf("%s answered %q (err %v) while the sync of the final commit was held", a.what, a.status, a.err)
		case <-waits.Arrived():
			waiting++
		}
	}
	syncs.Release()
	for range 3 {
		a := <-answers
		require.NoError(t, a.err, a.what)
		require.Equal(t, api.Succeeded, a.status, a.what)
	}
}
