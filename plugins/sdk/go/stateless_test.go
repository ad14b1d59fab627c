//go:build !wasip1

package sdk

import (
	"bytes"
	"runtime"
	"strings"
	"testing"
)

type countIn struct {
	N int `json:"n"`
}

func countHandler(_ *Context, in countIn) (map[string]int, error) {
	if in.N < 0 {
		panic("negative")
	}
	return map[string]int{"n": in.N * 2}, nil
}

// TestStatelessServesUntilTheHostStops plays a host that reuses the
// instance: serve_next first says "get ready" (1), then serves three
// requests, then ends (the engine ends the instance instead; here it
// returns a status).
func TestStatelessServesUntilTheHostStops(t *testing.T) {
	reqs := []string{`{"abi":1,"input":{"n":1}}`, `{"abi":1,"input":{"n":2}}`, `{"abi":1,"input":{"n":3}}`}
	var stdin bytes.Reader
	var stdout, stderr bytes.Buffer
	served, greeted := 0, false
	saved := hostServeNext
	t.Cleanup(func() { hostServeNext = saved })
	hostServeNext = func() int32 {
		if !greeted {
			greeted = true
			return 1
		}
		if served == len(reqs) {
			return int32(ErrUnavailable)
		}
		stdin.Reset([]byte(reqs[served]))
		served++
		return 0
	}
	status := run(&stdin, &stdout, &stderr, countHandler, []Option{Stateless()})
	if status != 0 || served != 3 {
		t.Fatalf("status %d after %d requests", status, served)
	}
	want := `{"output":{"n":2}}` + "\n" + `{"output":{"n":4}}` + "\n" + `{"output":{"n":6}}` + "\n"
	if stdout.String() != want {
		t.Fatalf("stdout %q, want %q", stdout.String(), want)
	}
}

// TestStatelessPanicExits: a panic ends the serving with status 1, as it
// ends a plain plugin, so the engine discards the instance.
func TestStatelessPanicExits(t *testing.T) {
	saved := hostServeNext
	t.Cleanup(func() { hostServeNext = saved })
	var stdin bytes.Reader
	n := 0
	hostServeNext = func() int32 {
		n++
		stdin.Reset([]byte(`{"abi":1,"input":{"n":-1}}`))
		return 0
	}
	var stdout, stderr bytes.Buffer
	if status := run(&stdin, &stdout, &stderr, countHandler, []Option{Stateless()}); status != 1 || n != 1 {
		t.Fatalf("status %d after %d serve_next calls", status, n)
	}
	if !strings.Contains(stdout.String(), `"error":"panic: negative"`) {
		t.Fatalf("stdout %q", stdout.String())
	}
}

// TestStatelessWithoutHost: off wasip1 (and under an engine that does not
// serve), serve_next is unavailable and the request on stdin is served once.
func TestStatelessWithoutHost(t *testing.T) {
	var stdout, stderr bytes.Buffer
	status := run(strings.NewReader(`{"abi":1,"input":{"n":5}}`), &stdout, &stderr, countHandler, []Option{Stateless()})
	if status != 0 || stdout.String() != `{"output":{"n":10}}`+"\n" {
		t.Fatalf("status %d, stdout %q", status, stdout.String())
	}
}

// TestStatelessOnlyOnATestedToolchain: Stateless enables the reuse only on
// the Go release it was tested with (reuse_tested.go's constraint); built
// with another it is ignored and the plugin says why in its log.
func TestStatelessOnlyOnATestedToolchain(t *testing.T) {
	tested := strings.HasPrefix(runtime.Version(), "go1.26")
	if got := Stateless(); (got.serve != nil) != tested || got.untested == tested {
		t.Fatalf("Stateless on %s: serve set %v, untested %v; tested: %v", runtime.Version(), got.serve != nil, got.untested, tested)
	}
	var stdin = strings.NewReader(`{"abi":1,"input":{"n":2}}`)
	var stdout, stderr bytes.Buffer
	status := run(stdin, &stdout, &stderr, countHandler, []Option{{untested: true}})
	if status != 0 || !strings.Contains(stdout.String(), `"n":4`) {
		t.Fatalf("an ignored Stateless serves the one request: status %d, %s", status, stdout.String())
	}
	if !strings.Contains(stderr.String(), "sdk: Stateless ignored: instance reuse is tested with Go 1.26 only") {
		t.Fatalf("log: %q", stderr.String())
	}
}
