package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/lhengine/lhengine/api"
	"github.com/lhengine/lhengine/engine"
	"github.com/lhengine/lhengine/ledger"
	"github.com/lhengine/lhengine/server"
)

// A home has one owner: the process that has its store open. The owner
// serves the API on the home's socket; every command reaches the home
// through an API client, either of the owner's socket or, when no owner
// answers, of this process, which then opens the store and owns the home
// for as long as the command runs.

// session is a command's way into a home.
type session struct {
	c *api.Client
	// Owned by this process: its engine and server. Nil for a client of
	// another owner.
	e   *engine.Engine
	srv *server.Server
	// owner is the other process that owns the home (nil when this one
	// does); self is this process as owner (when it does).
	owner *api.Owner
	self  api.Owner
	stop  func() error
}

// local: this process owns the home.
func (s *session) local() bool { return s.e != nil }

// close stops serving and closes the engine (if owned) or the client.
func (s *session) close() error {
	s.c.Close()
	if s.stop != nil {
		return s.stop()
	}
	return nil
}

// homeMode says what a command needs of a home.
type homeMode struct {
	create bool   // create the home if it has no store (submit, run, serve...)
	works  string // what this process's workers will run if it owns the home: "all", "task", ""
	// own: the command works tasks itself; a home already owned is
	// returned as a client session all the same, and the command decides.
	own bool
}

// ownWait bounds how long a command waits for a home held by another
// process that is not serving (one that is starting, or a command that
// holds it for a moment) before giving up. The wait starts again each time
// the home changes hands (commands started at once take it in turn), up
// to ownWaitAll in all.
const (
	ownWait    = 10 * time.Second
	ownWaitAll = time.Minute
)

// connect returns a session of the home: the owner's socket if one
// answers, else this process opens the store and owns the home.
func (a *app) connect(ctx context.Context, m homeMode) (*session, error) {
	if a.server != "" {
		return a.dialServer(ctx)
	}
	if err := a.privateHome(m.create); err != nil {
		return nil, err
	}
	if !m.own {
		if s := a.dialOwner(ctx); s != nil {
			return s, nil
		}
	}
	start := time.Now()
	deadline := start.Add(ownWait)
	holder := "" // the owner session on record when the wait last started
	if o, err := server.ReadOwner(a.home); err == nil {
		holder = o.Session
	}
	for {
		cache, noCache := a.cacheConfig()
		e, err := engine.Open(ctx, engine.Config{Home: a.home, Logger: a.logger(), AllowDamaged: a.damaged, MustExist: !m.create,
			CacheDir: cache, NoCache: noCache, OnCompile: a.onCompile()})
		if err == nil {
			return a.serveLocal(ctx, e, m)
		}
		if !errors.Is(err, ledger.ErrInUse) {
			return nil, err
		}
		// Another process has the store: talk to it, or wait for it to
		// start serving or to let go. A command that works tasks waits
		// for one that only holds the home for a moment (status, or
		// events --follow looking at it) to let go.
		if s := a.dialOwner(ctx); s != nil {
			if !m.own || s.owner.Works != "" {
				return s, nil
			}
			s.c.Close()
		}
		if o, err := server.ReadOwner(a.home); err == nil && o.Session != holder {
			holder = o.Session
			deadline = time.Now().Add(ownWait)
			if all := start.Add(ownWaitAll); deadline.After(all) {
				deadline = all
			}
		}
		if time.Now().After(deadline) || a.stuckOwner() {
			return nil, a.busy(err)
		}
		t := time.NewTimer(50 * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		case <-t.C:
		}
	}
}

// dialOwner returns a client session of the home's owner, or nil if no
// owner answers on the socket (there is none, or it died and left its
// socket behind: the next owner replaces it).
func (a *app) dialOwner(ctx context.Context) *session {
	path := api.SocketPath(a.home)
	if _, err := os.Stat(path); err != nil {
		return nil
	}
	c := api.NewSocketClient(path)
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	o, err := c.Owner(cctx)
	// The probe's connection is not kept: an owner that lets go closes
	// its idle connections, and a request sent on one as it does is cut
	// after it was sent, while a new connection is served or refused.
	c.Close()
	if err != nil {
		return nil
	}
	return &session{c: c, owner: o}
}

// dialServer returns a client session of the server --server names.
func (a *app) dialServer(ctx context.Context) (*session, error) {
	tok := os.Getenv(api.TokenEnv)
	if a.tokenFile != "" {
		b, err := os.ReadFile(a.tokenFile)
		if err != nil {
			return nil, fmt.Errorf("--token-file: %w", err)
		}
		tok = strings.TrimSpace(string(b))
	}
	c := api.NewClient(a.server, nil, tok)
	o, err := c.Owner(ctx)
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("server %s: %w", a.server, err)
	}
	return &session{c: c, owner: o}, nil
}

// stuckOwner: the home's owner record names a live process that works
// tasks and started a while ago, yet its socket did not answer. Waiting
// for it to let go would be waiting for a worker to finish: say so at once.
func (a *app) stuckOwner() bool {
	o, err := server.ReadOwner(a.home)
	return err == nil && o.Stopped.IsZero() && o.Works != "" &&
		time.Since(o.Started) > 2*time.Second && alive(o.PID)
}

// busy explains a home held by a process that does not answer.
func (a *app) busy(cause error) error {
	o, err := server.ReadOwner(a.home)
	if err != nil {
		return fmt.Errorf("home %s is in use by another process that does not serve its API (it may be an older lhengine): "+
			"wait for it to finish or stop it, then try again (%v)", a.home, cause)
	}
	if fate := ownerFate(o, o); fate != "" {
		// The record is a past owner's: whoever holds the home now has
		// not written one.
		return fmt.Errorf("home %s is in use by a process that does not answer on %s and has not recorded itself as the owner "+
			"(the last owner on record, %s, %s): it may be a command starting, or a program other than lhengine; try again in a moment (%v)",
			a.home, api.SocketPath(a.home), o, fate, cause)
	}
	return fmt.Errorf("home %s is in use by %s, which does not answer on %s: "+
		"wait for it to finish, or stop it (kill %d) and try again", a.home, o, api.SocketPath(a.home), o.PID)
}

// serveLocal makes this process the home's owner: it serves the API on
// the home's socket for other processes and on an in-process listener
// for this command's own client.
func (a *app) serveLocal(ctx context.Context, e *engine.Engine, m homeMode) (*session, error) {
	owner := api.Owner{Session: server.NewSession(), PID: os.Getpid(), Command: strings.Join(append([]string{"lhengine"}, os.Args[1:]...), " "),
		Started: time.Now().UTC(), Works: m.works, Version: engine.Version, Home: a.home}
	srv := server.New(e, server.Options{Owner: owner, Logger: a.logger().Named("api"), Dashboard: a.dashboard,
		Halt: a.stop.halted().Done()})
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	var wg sync.WaitGroup
	serve := func(l net.Listener, h func() error) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := h(); err != nil {
				a.logger().Warn("API listener stopped", "addr", l.Addr().String(), "error", err)
			}
		}()
	}
	pl := server.NewPipeListener()
	serve(pl, func() error { return srv.Serve(sctx, pl, nil, a.serveGrace(time.Second)) })
	if err := server.WriteOwner(a.home, owner); err != nil {
		a.logger().Warn("owner record not written", "error", err)
	}
	sock, err := server.Listen(a.home)
	if err != nil {
		a.logger().Warn("the API socket is not served: other commands cannot reach this home while this one runs", "error", err)
	} else {
		serve(sock, func() error { return srv.Serve(sctx, sock, nil, a.serveGrace(time.Second)) })
	}
	for _, l := range a.extra {
		serve(l.l, func() error { return srv.Serve(sctx, l.l, l.h(srv), a.serveGrace(5*time.Second)) })
	}
	s := &session{c: api.NewDialClient(pl.Dial), e: e, srv: srv, self: owner}
	s.stop = func() error {
		cancel()
		wg.Wait()
		err := e.Close(context.WithoutCancel(ctx))
		server.OwnerStopped(a.home, owner, time.Now().UTC())
		return err
	}
	return s, nil
}

// extraListener is one more listener the owner serves (serve --listen),
// with the handler it wants from the server.
type extraListener struct {
	l net.Listener
	h func(*server.Server) http.Handler
}

// withClient connects to the home (never creating one), runs fn with a
// client and closes the session. If the owner goes away under a request
// that did nothing (api.ErrOwnerGone: it stopped or died, or was a command
// that held the home for a moment), fn runs again with the home's next
// owner, or with the home opened by this process, for up to ownWait: fn
// must be fit to run again after such a failure.
func (a *app) withClient(ctx context.Context, fn func(*api.Client) error) error {
	return a.withSessionAgain(ctx, homeMode{}, func(s *session) error { return fn(s.c) })
}

// withSessionAgain is withSession, with fn run again as withClient says
// when the owner goes away under a request that did nothing.
func (a *app) withSessionAgain(ctx context.Context, m homeMode, fn func(*session) error) error {
	deadline := time.Now().Add(ownWait)
	for {
		var gone *api.Owner
		err := a.withSession(ctx, m, func(s *session) error {
			err := fn(s)
			if !s.local() && errors.Is(err, api.ErrOwnerGone) {
				gone = s.owner
			}
			return err
		})
		if gone == nil || a.server != "" || ctx.Err() != nil {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("home %s: its owner, %s, went away, and none answered in its place within %s: %w", a.home, gone, ownWait, err)
		}
	}
}

// ownerFate says what became of owner o, given the home's owner record
// rec: "stopped" (it marked its record stopped), "died" (it is not
// running and did not), or "" (it is running).
func ownerFate(o, rec *api.Owner) string {
	switch {
	case rec != nil && rec.Session == o.Session && !rec.Stopped.IsZero():
		return "stopped"
	case !alive(o.PID):
		return "died"
	}
	return ""
}

// withSession connects as m says, runs fn and closes the session.
func (a *app) withSession(ctx context.Context, m homeMode, fn func(*session) error) error {
	s, err := a.connect(ctx, m)
	if err != nil {
		return err
	}
	err = fn(s)
	return errors.Join(err, s.close())
}
