// Package server serves lhengine's control-plane API (package api,
// specs/api.md) and its web dashboard from an open engine.
//
// The process that owns a home creates one Server over its engine and
// serves it on the home's Unix socket (Listen), and with `serve --listen`
// on TCP behind a bearer token (RequireToken). Every handler reads the
// ledger through the engine in one snapshot, or changes it through the
// engine's control methods; nothing here writes the store directly.
package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/lhengine/lhengine/api"
	"github.com/lhengine/lhengine/engine"
	"github.com/lhengine/lhengine/internal/homefiles"
	"github.com/lhengine/lhengine/ledger"
)

// Options configure a Server.
type Options struct {
	// Owner describes this process, for GET /v1/owner.
	Owner  api.Owner
	Logger hclog.Logger
	// Dashboard serves the web dashboard at / (serve does; other owners
	// serve only the API).
	Dashboard bool
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Halt, when it is closed, cuts short the grace of every stop of
	// Serve: requests still in flight are cancelled and their connections
	// closed (a second SIGTERM or Ctrl-C). Nil: a stop takes its grace.
	Halt <-chan struct{}
}

// Server is the API (and, with Options.Dashboard, the dashboard) of one
// engine. Its handler is safe for concurrent use.
type Server struct {
	e   *engine.Engine
	o   Options
	mux *http.ServeMux

	mu    sync.Mutex
	works string // Owner.Works, set by SetWorks once the owner knows
}

// New returns the server of e. It starts nothing: serve its Handler, or
// call Serve.
func New(e *engine.Engine, o Options) *Server {
	if o.Logger == nil {
		o.Logger = hclog.NewNullLogger()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	s := &Server{e: e, o: o, mux: http.NewServeMux(), works: o.Owner.Works}
	s.routes()
	return s
}

// SetWorks changes what GET /v1/owner says the owner's workers run: "all",
// a task id, or "".
func (s *Server) SetWorks(works string) {
	s.mu.Lock()
	s.works = works
	s.mu.Unlock()
}

// Owner describes the owner as GET /v1/owner does.
func (s *Server) Owner() api.Owner {
	s.mu.Lock()
	defer s.mu.Unlock()
	o := s.o.Owner
	o.Works = s.works
	return o
}

// Handler is the server's HTTP handler.
func (s *Server) Handler() http.Handler { return s.mux }

// Serve serves the handler on l until ctx ends, then stops: it closes l,
// ends event streams at once, and lets the other requests in flight run on
// for up to grace (their contexts live until they end or the grace runs
// out, or Options.Halt is closed); then it closes their connections.
func (s *Server) Serve(ctx context.Context, l net.Listener, h http.Handler, grace time.Duration) error {
	if h == nil {
		h = s.mux
	}
	// Requests outlive ctx: a stop gives them their grace.
	base, cancelBase := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelBase()
	hs := &http.Server{
		Handler:           endStreams(ctx, h),
		ReadHeaderTimeout: 10 * time.Second,
		BaseContext:       func(net.Listener) context.Context { return base },
		ErrorLog:          s.o.Logger.StandardLogger(&hclog.StandardLoggerOptions{InferLevels: true}),
	}
	done := make(chan error, 1)
	go func() { done <- hs.Serve(l) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), grace)
	defer cancel()
	halted := make(chan struct{})
	go func() { // ends with the grace, or cuts it short
		defer close(halted)
		select {
		case <-s.o.Halt:
			cancel()
		case <-sctx.Done():
		}
	}()
	err := hs.Shutdown(sctx)
	cancel()
	<-halted
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		cancelBase()
		err = hs.Close()
	}
	if serr := <-done; !errors.Is(serr, http.ErrServerClosed) {
		err = errors.Join(err, serr)
	}
	return err
}

// endStreams ends the event streams h serves (GET /v1/tasks?follow=1, and
// GET /v1/tasks/{id}/events with ?follow=1 or "Accept: text/event-stream")
// when stop ends: a stream lasts as long as what it follows, and would
// hold a stop for its whole grace. Their clients reconnect to the next
// owner.
func endStreams(stop context.Context, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if wantsFollow(r) || strings.Contains(r.Header.Get("Accept"), "text/event-stream") {
			ctx, cancel := context.WithCancel(r.Context())
			defer cancel()
			defer context.AfterFunc(stop, cancel)()
			r = r.WithContext(ctx)
		}
		h.ServeHTTP(w, r)
	})
}

func (s *Server) routes() {
	m := s.mux
	m.HandleFunc("GET /v1/owner", s.owner)
	m.HandleFunc("GET /v1/version", s.version)
	m.HandleFunc("GET /v1/tasks", s.tasks)
	m.HandleFunc("POST /v1/tasks", s.submit)
	m.HandleFunc("POST /v1/uploads/missing", s.missing) // uploads.go
	m.HandleFunc("PUT /v1/uploads/{sha256}", s.upload)
	m.HandleFunc("GET /v1/tasks/{id}", s.report)
	m.HandleFunc("GET /v1/tasks/{id}/manifest", s.manifest)
	m.HandleFunc("DELETE /v1/tasks/{id}", s.remove)
	m.HandleFunc("POST /v1/tasks/{id}/cancel", s.cancel)
	m.HandleFunc("POST /v1/tasks/{id}/resume", s.resume)
	m.HandleFunc("POST /v1/tasks/{id}/pause", s.pause)
	m.HandleFunc("POST /v1/tasks/{id}/retry", s.retry)
	m.HandleFunc("GET /v1/tasks/{id}/outputs", s.outputs)
	m.HandleFunc("GET /v1/tasks/{id}/attempts", s.attempts)
	m.HandleFunc("GET /v1/tasks/{id}/events", s.events)
	m.HandleFunc("GET /v1/tasks/{id}/artifacts", s.artifacts)
	m.HandleFunc("GET /v1/tasks/{id}/effects", s.effects)
	m.HandleFunc("GET /v1/tasks/{id}/failures", s.failures)
	m.HandleFunc("GET /v1/tasks/{id}/approvals", s.approvalsOf)
	m.HandleFunc("POST /v1/tasks/{id}/approvals/{approval}/approve", s.decide(true))
	m.HandleFunc("POST /v1/tasks/{id}/approvals/{approval}/reject", s.decide(false))
	m.HandleFunc("GET /v1/approvals", s.pendingApprovals)
	m.HandleFunc("GET /v1/tasks/{id}/handoff", s.handoff)
	m.HandleFunc("GET /v1/tasks/{id}/notes", s.notes)
	m.HandleFunc("GET /v1/tasks/{id}/steps/{step}/committed", s.partialOutputs)
	m.HandleFunc("POST /v1/tasks/{id}/effects/confirm", s.settle(true))
	m.HandleFunc("POST /v1/tasks/{id}/effects/retry", s.settle(false))
	m.HandleFunc("GET /v1/artifacts/{ref}", s.artifact)
	m.HandleFunc("POST /v1/gc", s.gc)
	m.HandleFunc("POST /v1/reclaim", s.reclaim)
	// Prometheus metrics (specs/metrics.md), behind the same tokens as the
	// API: a scraper sends one as a bearer token.
	m.Handle("GET /metrics", s.e.MetricsHandler())
	m.HandleFunc("/v1/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, &api.Error{HTTPStatus: http.StatusNotFound, Code: api.CodeNotFound,
			Message: fmt.Sprintf("no API route %s %s (see specs/api.md)", r.Method, r.URL.Path)})
	})
	if s.o.Dashboard {
		s.dashboardRoutes()
	}
}

// RequireToken wraps h so that a request without "Authorization: Bearer
// token" gets 401 and reaches nothing; one with it is made by "owner" (the
// home's own token). See RequireTokens.
func RequireToken(h http.Handler, token string) http.Handler {
	only := map[string]string{homefiles.OwnerToken: token}
	return RequireTokens(h, func() (map[string]string, error) { return only, nil })
}

// RequireTokens wraps h so that only a request carrying one of the tokens
// (name → secret) reaches it: "Authorization: Bearer SECRET", or for the
// dashboard the cookie /login sets. Others get 401 (a page load: the login
// page) and reach nothing. The request goes on marked as made by the
// token's name, which decisions, pauses, raises and retries record instead
// of what the client claims (who). tokens is called for every request, so
// a token added or removed counts at once; if it fails every request is
// refused (503). The comparison takes the same time whatever the token
// sent and whichever token it is.
func RequireTokens(h http.Handler, tokens func() (map[string]string, error)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !ok {
			// The dashboard in a browser cannot send a header on a link:
			// it carries the token in a cookie set by /login. The cookie
			// counts for reads, and for the dashboard's own forms (which
			// refuse cross-origin posts); an API call that changes
			// something needs the header, which a page of another origin
			// cannot make a browser send.
			if c, err := r.Cookie(tokenCookie); err == nil && cookieMay(r) {
				got, ok = c.Value, true
			}
		}
		known, err := tokens()
		if err != nil {
			writeError(w, &api.Error{HTTPStatus: http.StatusServiceUnavailable, Code: api.CodeUnavailable,
				Message: "the server cannot read its API tokens: " + err.Error()})
			return
		}
		name := ""
		if ok {
			name = homefiles.Match(known, got)
		}
		if name == "" {
			w.Header().Set("WWW-Authenticate", `Bearer realm="lhengine"`)
			page := !strings.HasPrefix(r.URL.Path, "/v1/") && r.URL.Path != "/metrics"
			if page && r.Method == http.MethodGet && r.URL.Path != "/login" {
				http.Redirect(w, r, "/login", http.StatusSeeOther)
				return
			}
			if r.URL.Path == "/login" {
				h.ServeHTTP(w, r) // the login form itself
				return
			}
			writeError(w, &api.Error{HTTPStatus: http.StatusUnauthorized, Code: api.CodeUnauthorized,
				Message: "a valid bearer token is required (--token-file, or " + api.TokenEnv + ")"})
			return
		}
		h.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), tokenNameKey{}, name)))
	})
}

// tokenNameKey marks, in a request's context, the name of the bearer
// token it was let in with (RequireTokens).
type tokenNameKey struct{}

// who says who makes request req: the name of the token it carried over
// TCP, which a client cannot choose; else claimed, what the client says
// (the CLI sends its OS user, over the owner's Unix socket).
func (s *Server) who(req *http.Request, claimed string) string {
	if name, ok := req.Context().Value(tokenNameKey{}).(string); ok && name != "" {
		return name
	}
	return claimed
}

// cookieMay: the token cookie may authorise r.
func cookieMay(r *http.Request) bool {
	return r.Method == http.MethodGet || r.Method == http.MethodHead || !strings.HasPrefix(r.URL.Path, "/v1/")
}

// tokenCookie carries the bearer token of a browser that logged in to the
// dashboard.
const tokenCookie = "lhengine_token"

// Versions are this binary's versions.
func Versions() api.Versions {
	v := api.Versions{Engine: engine.Version, ABI: engine.ABIVersion, Language: engine.LanguageVersion,
		Go: runtime.Version(), Wazero: "unknown", Badger: "unknown"}
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				v.Commit = s.Value
			case "vcs.time":
				v.CommitTime = s.Value
			case "vcs.modified":
				v.Modified = s.Value == "true"
			}
		}
		for _, d := range bi.Deps {
			if d.Replace != nil {
				d = d.Replace
			}
			switch d.Path {
			case "github.com/tetratelabs/wazero":
				v.Wazero = d.Version
			case "github.com/dgraph-io/badger/v4":
				v.Badger = d.Version
			}
		}
	}
	return v
}

// ---- answers ----

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

func writeError(w http.ResponseWriter, e *api.Error) {
	writeJSON(w, e.HTTPStatus, e)
}

// fail answers err with the status and code its kind calls for.
func (s *Server) fail(w http.ResponseWriter, r *http.Request, err error) {
	e := toAPIError(err)
	if e.HTTPStatus >= 500 {
		s.o.Logger.Error("API request failed", "method", r.Method, "path", r.URL.Path, "error", err)
	}
	writeError(w, e)
}

func toAPIError(err error) *api.Error {
	var ae *api.Error
	if errors.As(err, &ae) {
		return ae
	}
	var inv *engine.InvalidTaskError
	if errors.As(err, &inv) {
		var b strings.Builder
		_ = inv.Diagnostics.Write(&b, 0, false)
		return &api.Error{HTTPStatus: http.StatusUnprocessableEntity, Code: api.CodeInvalidTask,
			Message: "the task file is not valid", Diagnostics: b.String()}
	}
	e := &api.Error{HTTPStatus: http.StatusInternalServerError, Code: api.CodeInternal, Message: err.Error()}
	switch {
	case errors.Is(err, ledger.ErrNotFound):
		e.HTTPStatus, e.Code = http.StatusNotFound, api.CodeNotFound
	case errors.Is(err, ledger.ErrTerminal):
		e.HTTPStatus, e.Code = http.StatusConflict, api.CodeConflict
	case errors.Is(err, ledger.ErrNoSpace), errors.Is(err, ledger.ErrStoreFailed), errors.Is(err, ledger.ErrReadOnly):
		e.HTTPStatus, e.Code = http.StatusServiceUnavailable, api.CodeUnavailable
	case errors.Is(err, errBadRequest):
		e.HTTPStatus, e.Code = http.StatusBadRequest, api.CodeInvalid
	case errors.Is(err, errConflict):
		e.HTTPStatus, e.Code = http.StatusConflict, api.CodeConflict
	}
	return e
}

var (
	errBadRequest = errors.New("bad request")
	errConflict   = errors.New("conflict")
)

// badRequest is an error of the caller's making.
func badRequest(format string, args ...any) error {
	return fmt.Errorf("%w: %s", errBadRequest, fmt.Sprintf(format, args...))
}

// readJSON decodes a request body of at most 1 MiB into v.
func readJSON(r *http.Request, v any) error {
	dec := json.NewDecoder(http.MaxBytesReader(nil, r.Body, 1<<20))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return badRequest("request body: %v", err)
	}
	return nil
}
