package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/lhengine/lhengine/api"
	"github.com/lhengine/lhengine/ledger"
)

// streamTasks is the event of GET /v1/tasks?follow=1 whose data is the
// JSON list of every task (api.Task), oldest first.
const streamTasks = api.StreamTasks

// listEvery is the shortest time between two messages of a task list
// stream: commits that come faster are coalesced into the next message.
const listEvery = 200 * time.Millisecond

// wantsFollow reports whether GET /v1/tasks asks for the list as a stream.
func wantsFollow(req *http.Request) bool {
	f := req.URL.Query().Get("follow")
	return f == "1" || f == "true"
}

// taskList reads every task, oldest first, as the owner shows it.
func (s *Server) taskList() ([]api.Task, error) {
	return s.taskListFrom(&taskCache{})
}

// taskCache holds the tasks a list stream has read, with the version each
// was read at.
type taskCache struct {
	version map[string]uint64
	task    map[string]*ledger.Task
}

// taskListFrom is taskList reading again only the tasks whose record
// changed since c last saw them (store.Reader.TaskVersions reads keys
// only): a stream's work per change is the tasks that changed, not every
// step record of the home's whole history.
func (s *Server) taskListFrom(c *taskCache) ([]api.Task, error) {
	var ids []string
	err := s.e.Read(func(r ledger.Reader) error {
		vs, err := r.TaskVersions()
		if err != nil {
			return err
		}
		version := make(map[string]uint64, len(vs))
		task := make(map[string]*ledger.Task, len(vs))
		for _, v := range vs {
			t, ok := c.task[v.ID]
			if !ok || c.version[v.ID] != v.Version {
				if t, err = r.Task(v.ID); err != nil {
					return err
				}
			}
			version[v.ID], task[v.ID] = v.Version, t
			ids = append(ids, v.ID)
		}
		c.version, c.task = version, task
		return nil
	})
	if err != nil {
		return nil, err
	}
	out := make([]api.Task, len(ids))
	for i, id := range ids {
		out[i] = s.view(c.task[id])
	}
	return out, nil
}

// listStream answers GET /v1/tasks?follow=1 with server-sent events: a
// "tasks" message holding the whole list at the start, then again whenever
// the store changes, at most one every listEvery. A list equal to the last
// one sent is not sent again. The stream lasts until the client goes away
// or the server stops.
func (s *Server) listStream(w http.ResponseWriter, req *http.Request) {
	out, ok := s.startSSE(w, req)
	if !ok {
		return
	}
	ctx := req.Context()
	tick := time.NewTicker(keepAlive)
	defer tick.Stop()
	var (
		last   []byte
		sentAt time.Time
		cache  taskCache
	)
	for {
		changed := s.e.Changed() // before reading: a commit during the read wakes the next wait
		list, err := s.taskListFrom(&cache)
		if err != nil {
			out.fail(err)
			return
		}
		out.begin()
		b, err := json.Marshal(list)
		if err != nil {
			out.fail(err)
			return
		}
		if !bytes.Equal(b, last) {
			if _, err := fmt.Fprintf(w, "event: %s\ndata: %s\n\n", streamTasks, b); err != nil {
				return
			}
			out.flush()
			last, sentAt = b, time.Now()
		}
		select {
		case <-ctx.Done():
			return
		case <-changed:
			// Coalesce: let the commits of the next moments join this one.
			if wait := listEvery - time.Since(sentAt); wait > 0 {
				t := time.NewTimer(wait)
				select {
				case <-ctx.Done():
					t.Stop()
					return
				case <-t.C:
				}
			}
		case <-tick.C:
			// The shown status may change with no commit (a worker of the
			// owner stopped): look again, and keep the connection alive.
			if !out.keepAlive() {
				return
			}
		}
	}
}
