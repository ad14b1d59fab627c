// Package testgate is a loopback HTTP server whose answers a test lets
// through: a step guest that fetches from it (testdata/guests/c/gate.c)
// blocks until the test releases its request, so a test paces a running
// task exactly, without sleeping.
package testgate

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// Gate is the server. Requests wait until Release lets them through, Open
// lets every one through, or the test ends.
type Gate struct {
	srv     *httptest.Server
	arrived chan string
	release chan struct{}
	open    chan struct{}
	once    sync.Once
	done    chan struct{}
}

// New starts a gate on 127.0.0.1; it stops when the test ends.
func New(t testing.TB) *Gate {
	g := &Gate{
		arrived: make(chan string, 1<<16),
		release: make(chan struct{}, 1<<16),
		open:    make(chan struct{}),
		done:    make(chan struct{}),
	}
	g.srv = httptest.NewServer(http.HandlerFunc(g.serve))
	t.Cleanup(func() {
		close(g.done)
		g.srv.Close()
	})
	return g
}

func (g *Gate) serve(w http.ResponseWriter, r *http.Request) {
	select {
	case g.arrived <- r.URL.Query().Get("item"):
	default: // nobody counts this many
	}
	select {
	case <-g.release:
	case <-g.open:
	case <-g.done:
		http.Error(w, "the test ended", http.StatusServiceUnavailable)
		return
	case <-r.Context().Done():
		return
	}
	_, _ = w.Write([]byte("ok"))
}

// URL is the address the guest fetches (input.url).
func (g *Gate) URL() string { return g.srv.URL + "/gate" }

// Host is host:port, for a step's http { allow = [...] }.
func (g *Gate) Host() string {
	u, _ := url.Parse(g.srv.URL)
	return u.Host
}

// Arrived yields the item of each request as it arrives (before it is let
// through).
func (g *Gate) Arrived() <-chan string { return g.arrived }

// Release lets n requests through: waiting ones first, then the next to
// arrive.
func (g *Gate) Release(n int) {
	for range n {
		g.release <- struct{}{}
	}
}

// Open lets every request through from now on.
func (g *Gate) Open() { g.once.Do(func() { close(g.open) }) }

// Step is the HCL of a fan-out step of n gate items with the given
// concurrency, fetching from g, for a task file; plugin is the gate guest's
// file name.
func (g *Gate) Step(name, plugin string, n, concurrency int) string {
	r := strings.NewReplacer("NAME", name, "PLUGIN", plugin, "URL", g.URL(), "HOST", g.Host(),
		"N", itoa(n), "C", itoa(concurrency))
	return r.Replace(`
  step "NAME" {
    plugin      = "PLUGIN"
    for_each    = range(N)
    concurrency = C
    input       = { url = "URL" }
    http {
      allow = ["HOST"]
    }
  }
`)
}

func itoa(n int) string { return strconv.Itoa(n) }
