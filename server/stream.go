package server

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/lhengine/lhengine/api"
	"github.com/lhengine/lhengine/ledger"
)

// streamBatch bounds the events one read of a follower takes, so a long
// log reaches a new follower in pieces and the snapshot stays short.
const streamBatch = 1000

// keepAlive is how often an idle stream sends a comment, so proxies and
// clients can tell a quiet task from a dead connection.
const keepAlive = 15 * time.Second

// events answers GET /v1/tasks/{id}/events: the events from ?from= on as
// a JSON list, or, with ?follow=1 or "Accept: text/event-stream", as a
// server-sent event stream that follows the task until it finishes.
func (s *Server) events(w http.ResponseWriter, req *http.Request) {
	q := req.URL.Query()
	from, err := parseSeq(q.Get("from"))
	if err != nil {
		s.fail(w, req, err)
		return
	}
	if id := req.Header.Get("Last-Event-ID"); id != "" {
		// A browser's EventSource reconnecting: go on after the last one.
		last, err := parseSeq(id)
		if err != nil {
			s.fail(w, req, err)
			return
		}
		from = last + 1
	}
	follow := q.Get("follow") == "1" || q.Get("follow") == "true" || strings.Contains(req.Header.Get("Accept"), "text/event-stream")
	if !follow {
		s.eventPage(w, req, from) // tasks.go: ?type=, ?since=, ?limit=
		return
	}
	s.stream(w, req, from)
}

func parseSeq(v string) (uint64, error) {
	if v == "" {
		return 0, nil
	}
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		return 0, badRequest("event sequence number %q: %v", v, err)
	}
	return n, nil
}

// stream sends the task's events from sequence number from on, and the
// task whenever its record or shown status changes, as server-sent events;
// it ends with an "end" message once the task is finished and every event
// up to it was sent. Each wake-up reads what committed since the last in
// one snapshot, so a burst of commits costs one read.
func (s *Server) stream(w http.ResponseWriter, req *http.Request, from uint64) {
	out, ok := s.startSSE(w, req)
	if !ok {
		return
	}
	var (
		lastSeen time.Time // UpdatedAt of the task last sent
		lastShow string
	)
	tick := time.NewTicker(keepAlive)
	defer tick.Stop()
	for {
		changed := s.e.Changed() // before reading: a commit during the read wakes the next wait
		var (
			t   *ledger.Task
			evs []ledger.Event
		)
		err := s.e.Read(func(r ledger.Reader) error {
			var err error
			if t, err = find(r, req); err != nil {
				return err
			}
			evs, err = r.Events(t.ID, from, streamBatch)
			return err
		})
		if err != nil {
			out.fail(err)
			return
		}
		out.begin()
		for i := range evs {
			e := wireEvent(evs[i])
			writeSSE(w, api.StreamEvent, strconv.FormatUint(e.Seq, 10), &e)
			from = evs[i].Seq + 1
		}
		v := s.view(t)
		more := len(evs) == streamBatch
		switch {
		case t.Status.Terminal() && !more:
			writeSSE(w, api.StreamEnd, "", v)
			out.flush()
			return
		case !t.UpdatedAt.Equal(lastSeen) || v.ShownStatus != lastShow:
			writeSSE(w, api.StreamTask, "", v)
			lastSeen, lastShow = t.UpdatedAt, v.ShownStatus
		}
		out.flush()
		if more {
			continue
		}
		select {
		case <-req.Context().Done():
			return
		case <-changed:
		case <-tick.C:
			// A comment keeps the connection alive, and the shown status
			// is looked at again (a worker of the owner may have stopped).
			if !out.keepAlive() {
				return
			}
		}
	}
}

// sseOut is a server-sent event response: its headers go out with the
// first message, so that a failure before it is still a plain API error.
type sseOut struct {
	s       *Server
	w       http.ResponseWriter
	req     *http.Request
	flusher http.Flusher
	started bool
}

// startSSE prepares a server-sent event response, or answers that the
// connection cannot stream.
func (s *Server) startSSE(w http.ResponseWriter, req *http.Request) (*sseOut, bool) {
	flusher, ok := w.(http.Flusher)
	if !ok {
		s.fail(w, req, fmt.Errorf("this connection cannot stream"))
		return nil, false
	}
	return &sseOut{s: s, w: w, req: req, flusher: flusher}, true
}

// begin sends the headers, once.
func (o *sseOut) begin() {
	if o.started {
		return
	}
	o.w.Header().Set("Content-Type", "text/event-stream")
	o.w.Header().Set("Cache-Control", "no-store")
	o.w.Header().Set("X-Accel-Buffering", "no")
	o.w.WriteHeader(http.StatusOK)
	o.started = true
}

// fail ends the response with err: an API error before the stream began,
// an "error" message in it after.
func (o *sseOut) fail(err error) {
	if !o.started {
		o.s.fail(o.w, o.req, err)
		return
	}
	writeSSE(o.w, "error", "", toAPIError(err))
	o.flush()
}

func (o *sseOut) flush() { o.flusher.Flush() }

// keepAlive sends a comment; false when the client is gone.
func (o *sseOut) keepAlive() bool {
	if _, err := fmt.Fprint(o.w, ": keep-alive\n\n"); err != nil {
		return false
	}
	o.flush()
	return true
}

// writeSSE writes one server-sent event whose data is v as JSON (one line:
// JSON has no raw newlines).
func writeSSE(w http.ResponseWriter, event, id string, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		b, _ = json.Marshal(map[string]string{"error": err.Error()})
	}
	var sb strings.Builder
	if id != "" {
		sb.WriteString("id: " + id + "\n")
	}
	sb.WriteString("event: " + event + "\ndata: ")
	sb.Write(b)
	sb.WriteString("\n\n")
	_, _ = w.Write([]byte(sb.String()))
}
