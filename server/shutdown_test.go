package server_test

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lhengine/lhengine/api"
	"github.com/lhengine/lhengine/engine"
	"github.com/lhengine/lhengine/internal/testwait"
	"github.com/lhengine/lhengine/server"
)

// serving is a server of a real engine on 127.0.0.1, served until the
// test stops it.
type serving struct {
	srv    *server.Server
	url    string
	stop   context.CancelFunc
	served chan error
	client *http.Client
}

func startServing(t *testing.T, o server.Options, h func(*server.Server) http.Handler, grace time.Duration) *serving {
	t.Helper()
	ctx := context.Background()
	e, err := engine.Open(ctx, engine.Config{Home: filepath.Join(t.TempDir(), "home")})
	require.NoError(t, err)
	s := &serving{srv: server.New(e, o), served: make(chan error, 1)}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	s.url = "http://" + l.Addr().String()
	sctx, stop := context.WithCancel(ctx)
	s.stop = stop
	go func() { s.served <- s.srv.Serve(sctx, l, h(s.srv), grace) }()
	tr := &http.Transport{}
	s.client = &http.Client{Transport: tr}
	t.Cleanup(func() {
		stop()
		tr.CloseIdleConnections()
		require.NoError(t, e.Close(ctx))
	})
	return s
}

func waitCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// blocking is a handler that waits for release, then says whether its
// request's context was still alive.
type blocking struct {
	entered chan struct{}
	release chan struct{}
}

func newBlocking() *blocking {
	return &blocking{entered: make(chan struct{}, 1), release: make(chan struct{})}
}

func (b *blocking) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b.entered <- struct{}{}
	select {
	case <-b.release:
	case <-r.Context().Done():
	}
	if err := r.Context().Err(); err != nil {
		http.Error(w, "cancelled: "+err.Error(), http.StatusServiceUnavailable)
		return
	}
	_, _ = io.WriteString(w, "finished")
}

type answer struct {
	status int
	body   string
	err    error
}

func get(c *http.Client, url string) <-chan answer {
	out := make(chan answer, 1)
	go func() {
		resp, err := c.Get(url)
		if err != nil {
			out <- answer{err: err}
			return
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		out <- answer{status: resp.StatusCode, body: string(b), err: err}
	}()
	return out
}

// TestStopLetsRequestsInFlightFinish: a request in flight when the server
// is stopped keeps its context and finishes within the grace; the
// listener takes no new connection meanwhile.
func TestStopLetsRequestsInFlightFinish(t *testing.T) {
	t.Parallel()
	ctx := waitCtx(t)
	h := newBlocking()
	s := startServing(t, server.Options{}, func(*server.Server) http.Handler { return h }, time.Minute)
	got := get(s.client, s.url+"/slow")
	testwait.Receive(t, ctx, h.entered, "the request")
	s.stop()
	// The stop has begun once the listener is closed.
	for {
		c, err := net.Dial("tcp", strings.TrimPrefix(s.url, "http://"))
		if err != nil {
			break
		}
		c.Close()
		select {
		case <-ctx.Done():
			t.Fatal("the listener was not closed")
		case <-time.After(time.Millisecond):
		}
	}
	close(h.release)
	a := testwait.Receive(t, ctx, got, "the answer")
	require.NoError(t, a.err)
	require.Equal(t, http.StatusOK, a.status, a.body)
	require.Equal(t, "finished", a.body)
	require.NoError(t, testwait.Receive(t, ctx, s.served, "Serve to return"))
}

// TestStopEndsStreams: event streams, which last as long as what they
// follow, end as the stop begins instead of holding it for its grace.
func TestStopEndsStreams(t *testing.T) {
	t.Parallel()
	ctx := waitCtx(t)
	s := startServing(t, server.Options{Owner: api.Owner{Works: "all"}}, (*server.Server).Handler, time.Hour)
	resp, err := s.client.Get(s.url + "/v1/tasks?follow=1")
	require.NoError(t, err)
	defer resp.Body.Close()
	rd := bufio.NewReader(resp.Body)
	line, err := rd.ReadString('\n')
	require.NoError(t, err)
	require.Contains(t, line, "event: tasks")
	s.stop()
	ended := make(chan error, 1)
	go func() {
		_, err := io.Copy(io.Discard, rd)
		ended <- err
	}()
	require.NoError(t, testwait.Receive(t, ctx, ended, "the stream to end"))
	require.NoError(t, testwait.Receive(t, ctx, s.served, "Serve to return"))
}

// TestHaltCutsTheGrace: closing Options.Halt during a stop's grace cancels
// the requests still in flight and ends Serve at once.
func TestHaltCutsTheGrace(t *testing.T) {
	t.Parallel()
	ctx := waitCtx(t)
	h := newBlocking()
	halt := make(chan struct{})
	s := startServing(t, server.Options{Halt: halt}, func(*server.Server) http.Handler { return h }, time.Hour)
	got := get(s.client, s.url+"/slow")
	testwait.Receive(t, ctx, h.entered, "the request")
	s.stop()
	close(halt)
	require.NoError(t, testwait.Receive(t, ctx, s.served, "Serve to return"))
	a := testwait.Receive(t, ctx, got, "the answer")
	if a.err == nil {
		require.Contains(t, a.body, "cancelled")
	}
}
